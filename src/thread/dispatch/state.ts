import type Database from 'better-sqlite3';
import { isAlive, type ProcessIdentity } from '../../core/process.js';
import type { ConsumerInfo } from '../types.js';
import { pokeNotifier } from './poke.js';
import { registerThread, unregisterThread } from './registry.js';

/** The columns of the consumers table (db.ts) that dispatch writes; the thread writes the others. */
export interface DispatchColumns {
  lease_pid: number | null;
  lease_start: number | null;
  lease_since: string | null;
  failures: number;
  last_error: string | null;
  retry_at: number | null;
}

/** What dispatch state needs of its thread: the thread's write transactions and cached statements. */
export interface ThreadStore {
  write<T>(fn: () => T): T;
  sql(source: string): Database.Statement;
}

/**
 * One open thread's dispatch state (index.ts says who writes what): the lease and run-record
 * columns of its consumers, its entry in the registry, and its pokes. `Thread` makes it and
 * calls it where the stream touches dispatch (a push pokes, a subscribe registers); dispatchers
 * reach it as `thread.dispatch`.
 */
export class DispatchState {
  private pokeScheduled = false;

  constructor(
    private readonly threadPath: string,
    /** Data root for the registry and pokes. */
    private readonly home: string,
    private readonly store: ThreadStore,
  ) {}

  /**
   * Takes the consumer's lease for `holder` unless a live process holds it. A lease whose holder
   * died is taken over. Returns whether the lease is now `holder`'s.
   */
  takeLease(consumer: string, holder: ProcessIdentity): boolean {
    return this.store.write(() => {
      const row = this.store.sql('SELECT lease_pid, lease_start FROM consumers WHERE consumer = ?').get(consumer) as Pick<DispatchColumns, 'lease_pid' | 'lease_start'> | undefined;
      if (!row || isHeld(row)) return false;
      this.store.sql('UPDATE consumers SET lease_pid = ?, lease_start = ?, lease_since = ? WHERE consumer = ?').run(holder.pid, holder.start, new Date().toISOString(), consumer);
      return true;
    });
  }

  /** Hands a lease from the dispatcher to the handler it started. */
  transferLease(consumer: string, fromPid: number, to: ProcessIdentity): void {
    this.store.write(() => this.store.sql('UPDATE consumers SET lease_pid = ?, lease_start = ? WHERE consumer = ? AND lease_pid = ?').run(to.pid, to.start, consumer, fromPid));
  }

  /** Releases the lease if `pid` still holds it. */
  releaseLease(consumer: string, pid: number): void {
    this.store.write(() => this.store.sql('UPDATE consumers SET lease_pid = NULL, lease_start = NULL, lease_since = NULL WHERE consumer = ? AND lease_pid = ?').run(consumer, pid));
  }

  /** Records a handler run's outcome: a success clears the failures, a failure counts one more. */
  recordRun(consumer: string, outcome: { ok: true } | { ok: false; error: string; retryAt: Date }): void {
    const now = new Date().toISOString();
    this.store.write(() => {
      if (outcome.ok) {
        this.store.sql('UPDATE consumers SET failures = 0, last_error = NULL, retry_at = NULL, updated_at = ? WHERE consumer = ?').run(now, consumer);
      } else {
        this.store
          .sql('UPDATE consumers SET failures = failures + 1, last_error = ?, retry_at = ?, updated_at = ? WHERE consumer = ?')
          .run(outcome.error.slice(0, 2000), outcome.retryAt.getTime(), now, consumer);
      }
    });
  }

  /** Ends a failing consumer's backoff now, keeping its failure count (notifier's wake). */
  retryNow(consumer: string): void {
    this.store.write(() => this.store.sql('UPDATE consumers SET retry_at = NULL WHERE consumer = ? AND retry_at IS NOT NULL').run(consumer));
  }

  /** A renewed subscription starts with a clean run record. Runs inside subscribe's transaction. */
  clearRunRecord(consumer: string): void {
    this.store.sql('UPDATE consumers SET failures = 0, last_error = NULL, retry_at = NULL WHERE consumer = ?').run(consumer);
  }

  /** Puts the thread in the registry, so that notifier's sweep looks at it. */
  register(): void {
    registerThread(this.home, this.threadPath);
  }

  /** Takes the thread out of the registry: no subscription is left. */
  unregister(): void {
    unregisterThread(this.home, this.threadPath);
  }

  /** Pokes notifier after a commit: one poke per tick however many pushes a caller makes in a loop. */
  poke(): void {
    if (this.pokeScheduled) return;
    this.pokeScheduled = true;
    queueMicrotask(() => {
      this.pokeScheduled = false;
      void pokeNotifier(this.home, this.threadPath);
    });
  }
}

/** A consumer row's dispatch state as `ConsumerInfo` shows it: only a live holder's lease counts. */
export function dispatchInfo(row: DispatchColumns): Pick<ConsumerInfo, 'lease' | 'failures' | 'last_error' | 'retry_at'> {
  return {
    lease: isHeld(row) ? { pid: row.lease_pid, start: row.lease_start, since: row.lease_since ?? '' } : null,
    failures: row.failures,
    last_error: row.last_error,
    retry_at: row.retry_at === null ? null : new Date(row.retry_at).toISOString(),
  };
}

/** Whether a live process holds the lease; a dead one's (or a zombie's) is free to take over. */
export function isHeld<T extends Pick<DispatchColumns, 'lease_pid' | 'lease_start'>>(row: T): row is T & { lease_pid: number } {
  return row.lease_pid !== null && isAlive({ pid: row.lease_pid, start: row.lease_start });
}
