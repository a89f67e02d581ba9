import type { ProcessIdentity } from '../../core/process.js';
import type { Placements } from './placements.js';
import type { PostgresLeases } from './postgres-leases.js';
import type { SharedFiles } from './shared-files.js';
import type { ConsumerInfo, PeekOptions, PopOptions, PushInput, SubscribeOptions, ThreadEvent, ThreadInfo } from '../types.js';

/**
 * The thread store behind one interface: what a thread is to its readers and writers, whichever
 * database holds it. SQLite (`sqlite-store.ts`) keeps one file per thread in the home, as ever;
 * PostgreSQL (`postgres-store.ts`) keeps every thread of a home in one database, a thread being a
 * row key. Every call is async, since PostgreSQL answers over a socket.
 *
 * A thread is named by its path relative to the home (`agents/a/inbox`; absolute for one outside
 * it, `threadName`), the same name in both stores, so that `thread migrate` maps one onto the other.
 *
 * Contract, held by both (store.test.ts runs one suite against each):
 * - Event ids of a thread are 1, 2, 3, …, never reused, also after `prune`.
 * - An append is one transaction: all of a batch or none of it. A key seen before stores nothing
 *   and gives the first event's id (a unique constraint backs it).
 * - Progress only moves forward and never past the newest event; an `ack` given with an append is
 *   stored in the append's transaction (the work and the record of it commit together).
 * - A lease is taken only from nobody or from a dead holder; run records survive reopening.
 */
export interface ThreadStore {
  /** `sqlite` or `postgres`. */
  readonly kind: StoreKind;
  /** Where the threads are, for messages: the home, or the database URL without its password. */
  readonly location: string;
  /** Which host runs an agent or owns a channel, and the hosts sharing the store (placements.ts). */
  readonly placements: Placements;
  /** PostgreSQL's: host-aware leases for notifiers on several hosts (postgres-leases.ts). */
  readonly leases?: PostgresLeases;
  /** PostgreSQL's: files that travel between hosts, by their SHA-256 (shared-files.ts). */
  readonly files?: SharedFiles;
  /**
   * PostgreSQL's: calls `onThread` with a thread's row key after each commit that appended to it
   * or subscribed to it, on any host; `onListening` on each (re)connect, when notices may have
   * been missed.
   */
  listen?(onThread: (thread: number) => void, onListening: () => void): Promise<{ unlisten(): Promise<void> }>;
  /** Creates a thread; one that exists is a `conflict`. */
  init(name: string): Promise<StoredThread>;
  /** Opens a thread; a missing one is `not_found` unless `create`. */
  open(name: string, options?: OpenStoredThreadOptions): Promise<StoredThread>;
  /** Every thread's name, sorted. */
  list(): Promise<string[]>;
  /** A thread whole, for `thread migrate`; leases are not part of it (they name local processes). */
  dump(name: string): Promise<ThreadDump>;
  /** Writes a dumped thread as a new thread of this store (a thread of that name is a `conflict`). */
  load(dump: ThreadDump): Promise<void>;
  close(): Promise<void>;
}

export type StoreKind = 'sqlite' | 'postgres';

export interface OpenStoredThreadOptions {
  /** Create the thread if it does not exist. Default: false. */
  create?: boolean;
  /** Only to read (SQLite: a thread whose directory this process may not write is read in a copy). Default: false. */
  readOnly?: boolean;
}

/** An event as it is stored: what `peek` shows, and the idempotency key it never shows. */
export interface StoredEvent extends ThreadEvent {
  idempotency_key: string | null;
}

/** A consumer's row as `thread migrate` copies it. */
export interface StoredConsumer {
  consumer: string;
  progress: number;
  subscribed: boolean;
  handler: string | null;
  filter: string | null;
  failures: number;
  last_error: string | null;
  /** Epoch milliseconds, or null. */
  retry_at: number | null;
  /** The placement key its runs go to (PostgreSQL's; SQLite has one host and keeps none): null, any host. */
  run_on: string | null;
}

export interface ThreadDump {
  name: string;
  /** The newest id ever given (prune may have removed it). */
  last_id: number;
  events: StoredEvent[];
  consumers: StoredConsumer[];
}

export interface AppendOptions {
  /** Acknowledge this consumer's event in the same transaction as the append. */
  ack?: { consumer: string; eventId: number };
}

/** A run's outcome for the run record: a success clears the failures, a failure counts one more. */
export type RunOutcome = { ok: true } | { ok: false; error: string; retryAt: Date };

/** One open thread of a store. */
export interface StoredThread {
  /** The thread's name in its store (`threadName`). */
  readonly name: string;
  /** What the CLI prints for it: the directory (SQLite) or the name (PostgreSQL). */
  readonly path: string;
  /** Appends events in one transaction; each result says whether its key had been seen. */
  append(inputs: readonly PushInput[], options?: AppendOptions): Promise<{ id: number; duplicate: boolean }[]>;
  /** The id of the event stored under this idempotency key, if any. */
  findByKey(key: string): Promise<number | undefined>;
  /** The consumer's next events after its progress, matching its filter (see `Thread.pop`). */
  pop(consumer: string, options?: PopOptions): Promise<ThreadEvent[]>;
  /** Moves the consumer's progress forward; returns the stored progress. */
  ack(consumer: string, eventId: number): Promise<number>;
  /** Events from a position, optionally filtered; reading consumes nothing. */
  peek(options?: PeekOptions): Promise<ThreadEvent[]>;
  subscribe(options: SubscribeOptions): Promise<void>;
  unsubscribe(consumer: string): Promise<void>;
  info(): Promise<ThreadInfo>;
  consumer(name: string): Promise<ConsumerInfo | null>;
  /** Subscribed consumers, for dispatch. */
  subscriptions(): Promise<ConsumerInfo[]>;
  hasPending(consumer: string): Promise<boolean>;
  /** See `Thread.prune`. */
  prune(options: { before: string; keep: number; dryRun?: boolean }): Promise<number>;
  /** Dispatch's side: the lease and the run record (dispatch/index.ts states the contract). */
  takeLease(consumer: string, holder: ProcessIdentity): Promise<boolean>;
  transferLease(consumer: string, fromPid: number, to: ProcessIdentity): Promise<void>;
  releaseLease(consumer: string, pid: number): Promise<void>;
  recordRun(consumer: string, outcome: RunOutcome): Promise<void>;
  retryNow(consumer: string): Promise<void>;
  close(): Promise<void>;
}
