import type { Logger } from '../core/logger.js';
import type { Thread } from '../thread/thread.js';
import { chatCommandOf } from './chat-commands.js';

/**
 * `/stop` while a turn runs. The `/stop` waits in the inbox behind the run that holds the run
 * lock, so that run watches its inbox: every `intervalMs` it reads the messages that came after
 * the ones it has seen, and a `/stop` aborts the running turn of its conversation (the model call
 * and bash_exec's process group) through that turn's AbortSignal. The `/stop` itself is answered
 * in order like any message, by this run or the next one.
 *
 * A `/stop` stops every turn of its conversation that came before it: the one running, and those
 * waiting in the same batch. Turns that come after it are not touched.
 *
 * The same signal ends a turn that runs past the turn limit (`timeoutMs`): the agent's own
 * deadline, well inside notifier's handler timeout, so that one stuck turn does not cost the run.
 */
export interface RunningTurn {
  readonly signal: AbortSignal;
  /** Inbox id of the `/stop` that ended this turn, or null. */
  readonly stoppedBy: number | null;
  /** The turn ran past the turn limit and was aborted. */
  readonly timedOut: boolean;
}

interface Turn extends RunningTurn {
  inboxId: number;
  controller: AbortController;
  stoppedBy: number | null;
  timedOut: boolean;
  deadline?: NodeJS.Timeout;
}

export class RunningTurns {
  private readonly running = new Map<string, Turn>();
  /** Per conversation, the newest `/stop` seen: turns of earlier messages begin stopped. */
  private readonly stops = new Map<string, number>();

  /** `runSignal`: the whole run's, if it has one; `timeoutMs`: the turn limit, if any. */
  constructor(
    private readonly runSignal?: AbortSignal,
    private readonly timeoutMs?: number,
  ) {}

  /** The turn of one inbox message of a conversation (its messages run one at a time). */
  begin(conversation: string, inboxId: number): RunningTurn {
    const controller = new AbortController();
    const signal = this.runSignal ? AbortSignal.any([this.runSignal, controller.signal]) : controller.signal;
    const turn: Turn = { inboxId, controller, signal, stoppedBy: null, timedOut: false };
    if (this.timeoutMs !== undefined) {
      turn.deadline = setTimeout(() => {
        turn.timedOut = true;
        controller.abort();
      }, this.timeoutMs);
      turn.deadline.unref();
    }
    this.running.set(conversation, turn);
    const stop = this.stops.get(conversation);
    if (stop !== undefined) this.abort(turn, stop);
    return turn;
  }

  end(conversation: string, turn: RunningTurn): void {
    clearTimeout((turn as Turn).deadline);
    if (this.running.get(conversation) === turn) this.running.delete(conversation);
  }

  /** A `/stop` (inbox id) for a conversation; true when it ended a running turn. */
  stop(conversation: string, stopInboxId: number): boolean {
    this.stops.set(conversation, Math.max(stopInboxId, this.stops.get(conversation) ?? 0));
    const turn = this.running.get(conversation);
    return turn !== undefined && this.abort(turn, stopInboxId);
  }

  private abort(turn: Turn, stopInboxId: number): boolean {
    if (turn.inboxId >= stopInboxId || turn.stoppedBy !== null) return false;
    turn.stoppedBy = stopInboxId;
    turn.controller.abort();
    return true;
  }
}

export interface StopWatchOptions {
  /** Inbox messages after this id are looked at: the batch's own, and what comes while it runs. */
  afterId: number;
  turns: RunningTurns;
  /** The conversation a source address goes to, or null when it cannot be routed. */
  conversationOf: (source: string) => string | null;
  logger: Logger;
  /** Default: 250 ms. */
  intervalMs?: number;
}

const PAGE = 200;

/**
 * Watches the inbox for `/stop` until closed. The first look happens before this returns, so a
 * `/stop` already in the batch is known before any turn begins.
 */
export function watchForStop(inbox: Thread, options: StopWatchOptions): { close(): void } {
  let cursor = options.afterId;
  const look = () => {
    try {
      for (;;) {
        const events = inbox.peek({ afterId: cursor, filter: "type = 'message'", limit: PAGE });
        for (const event of events) {
          cursor = event.id;
          if (chatCommandOf(event) !== 'stop') continue;
          const conversation = options.conversationOf(event.source);
          if (conversation === null) continue;
          if (options.turns.stop(conversation, event.id)) options.logger.info(`run: /stop (inbox event ${event.id}) ended the running turn of ${conversation}`);
        }
        if (events.length < PAGE) return;
      }
    } catch (error) {
      // A busy or failing disk: the next look tries again; the turns go on meanwhile.
      options.logger.warn(`run: looking for /stop in the inbox failed: ${(error as Error).message}`);
    }
  };
  look();
  const timer = setInterval(look, options.intervalMs ?? 250);
  timer.unref();
  return { close: () => clearInterval(timer) };
}
