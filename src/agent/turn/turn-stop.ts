import type { Logger } from '../../core/logger.js';
import type { ThreadEvent } from '../../thread/index.js';
import { chatCommandOf } from '../chat-commands.js';

/**
 * `/stop` while a turn runs. The `/stop` waits in the inbox behind the run that holds the run
 * lock, so that run watches its inbox (inbox-watch.ts), and a `/stop` aborts the running turn of
 * its conversation (the model call and bash_exec's process group) through that turn's AbortSignal. The `/stop` itself is answered
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

/**
 * Looks at one inbox message the run sees while it runs (inbox-watch.ts): a `/stop` ends the
 * running turn of its conversation.
 */
export function noticeStop(event: ThreadEvent, turns: RunningTurns, conversationOf: (source: string) => string | null, logger: Logger): void {
  if (chatCommandOf(event) !== 'stop') return;
  const conversation = conversationOf(event.source);
  if (conversation !== null && turns.stop(conversation, event.id)) logger.info(`run: /stop (inbox event ${event.id}) ended the running turn of ${conversation}`);
}
