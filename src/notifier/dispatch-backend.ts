import type { NotifierConfig } from './config.js';
import type { SubscriptionStatus } from './types.js';

/**
 * What the daemon asks of the part that runs subscriptions' handlers, whichever store holds the
 * threads: `Dispatcher` for the home's SQLite files (registry, pid leases, pokes on the socket),
 * `PostgresDispatcher` for a PostgreSQL store shared by several hosts (host leases with a
 * heartbeat, LISTEN/NOTIFY).
 */
export interface ThreadDispatcher {
  /** A reloaded config: its backoff (and leases) apply from now on. */
  configure(config: NotifierConfig): void;
  /** A poke on the socket: this thread (a path) has new events. */
  poke(thread: string): void;
  /** Look at every subscription: the periodic safety net for lost pokes. */
  sweep(): void;
  /** End every backoff now (see WakeMessage). */
  wake(): void;
  status(): SubscriptionStatus[] | Promise<SubscriptionStatus[]>;
  /** Stops starting handlers (see each for what becomes of the running ones). */
  stop(): void | Promise<void>;
}
