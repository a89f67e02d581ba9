import type { Logger } from '../core/logger.js';
import type { RunLimit } from './run-limit.js';
import type { CommandLauncher } from './launcher.js';
import { describeOutcome, formatRun } from './run.js';
import { dueAt, nextRunAt, type TimerStore } from './timers.js';

export interface SchedulerOptions {
  home: string;
  store: TimerStore;
  logger: Logger;
  launch: CommandLauncher;
  /** Shared with the handlers: how many commands may run at once. */
  limit: RunLimit;
}

/** The run-limit group of timer commands: together they take one turn among the agents. */
const TIMERS = 'timers';

// Wake at least this often, so a changed clock or a far-away run is re-planned in time.
const MAX_SLEEP_MS = 60_000;
const RETRY_AFTER_ERROR_MS = 5_000;

/**
 * Runs due timers. It plans one wake-up for the earliest next run, reloads the store on each
 * wake-up (so `timer add` from another process takes effect when notifier is poked, or within a
 * minute at worst) and never starts a timer's command while its previous run still goes on.
 */
export class TimerScheduler {
  private wake: NodeJS.Timeout | null = null;
  private readonly running = new Set<string>();
  /** The due time each skipped timer was last warned about. */
  private readonly warned = new Map<string, number>();
  private stopped = false;

  constructor(private readonly options: SchedulerOptions) {}

  /**
   * Re-reads the timers, runs the due ones and plans the next wake-up; called at start, on
   * `timers` pokes and by its own wake-up. It never throws: a failure (a locked or damaged
   * timers.db, a full disk) is logged and the scheduler looks again at the next wake-up.
   */
  reload(): void {
    if (this.stopped) return;
    if (this.wake) clearTimeout(this.wake);
    let delayMs = RETRY_AFTER_ERROR_MS;
    try {
      delayMs = this.runDue();
    } catch (error) {
      this.options.logger.error(`timers: ${(error as Error).message}; looking again in ${RETRY_AFTER_ERROR_MS / 1000} s`);
    }
    this.wake = setTimeout(() => this.reload(), delayMs);
  }

  /** Runs the due timers; returns how long to sleep until the next one. */
  private runDue(): number {
    const now = new Date();
    const { store } = this.options;
    for (const timer of store.list()) {
      const due = dueAt(timer, now);
      if (due === null || due.getTime() > now.getTime()) continue;
      try {
        this.run(timer.id, timer.command, due);
      } catch (error) {
        this.options.logger.error(`timer ${timer.id}: ${(error as Error).message}`);
      }
    }
    // Planned after the runs above, which moved their timers' next runs forward. A timer still
    // due was skipped because its previous run goes on: look again in a second.
    let earliest = now.getTime() + MAX_SLEEP_MS;
    for (const timer of store.list()) {
      const next = nextRunAt(timer, now)?.getTime();
      if (next !== undefined) earliest = Math.min(earliest, next <= now.getTime() ? now.getTime() + 1_000 : next);
    }
    return Math.max(10, earliest - Date.now());
  }

  stop(): void {
    this.stopped = true;
    if (this.wake) clearTimeout(this.wake);
  }

  /** Starts a due timer, or queues it until a place is free (it then runs once, as of then). */
  private run(id: string, command: string, due: Date): void {
    const { logger, limit } = this.options;
    if (this.running.has(id)) {
      // Looked at every second until the run ends: say it once for this due time.
      if (this.warned.get(id) !== due.getTime()) logger.warn(`timer ${id} is due since ${due.toISOString()} but its previous run still goes on; it runs once that one ends`);
      this.warned.set(id, due.getTime());
      return;
    }
    this.warned.delete(id);
    if (limit.isWaiting(TIMERS, id)) return;
    limit.request({ group: TIMERS, key: id, start: () => this.start(id, command) });
  }

  private start(id: string, command: string): boolean {
    const { store, logger, limit } = this.options;
    if (this.stopped) return false;
    try {
      store.markRun(id, new Date());
    } catch (error) {
      logger.error(`timer ${id}: ${(error as Error).message}`);
      return false;
    }
    const launched = this.options.launch(`timer-${id}`)(command, timerEnv(this.options.home, id));
    if (!launched.ok) {
      store.markExit(id, 'not started');
      logger.error(`timer ${id}: ${launched.error}`);
      return false;
    }
    const { pid, outcome } = launched.run;
    this.running.add(id);
    void outcome
      .then((ended) => {
        this.running.delete(id);
        if (this.stopped) return;
        store.markExit(id, describeOutcome(ended));
        const line = formatRun(`timer ${id} (pid ${pid})`, ended);
        if (ended.code === 0) logger.info(line);
        else logger.error(line);
      })
      .catch((error: unknown) => logger.error(`timer ${id} (pid ${pid}): ${(error as Error).message}`))
      .finally(() => limit.release());
    return true;
  }
}

/**
 * A timer command's environment: the daemon's, with THECLAW_HOME and THECLAW_TIMER set. A daemon
 * started from a handler inherited that handler's THECLAW_THREAD and THECLAW_CONSUMER; a timer is
 * no consumer, and must not act as one.
 */
function timerEnv(home: string, id: string): NodeJS.ProcessEnv {
  const { THECLAW_THREAD: _thread, THECLAW_CONSUMER: _consumer, ...env } = process.env;
  return { ...env, THECLAW_HOME: home, THECLAW_TIMER: id };
}
