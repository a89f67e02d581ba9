import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { splitCommand } from '../core/command.js';
import { ClawError, isClawError } from '../core/errors.js';
import { ensureDir, resolveHome } from '../core/home.js';
import { createLogger, type Logger } from '../core/logger.js';
import { RotatingFile } from '../core/rotating-file.js';
import { withStoragePath } from '../core/storage-error.js';
import { dbPath, openDatabase } from './db.js';
import { compileFilter, parseFilter, type CompiledFilter } from './filter.js';
import { brokenFilter, consumerInfo } from './consumer-info.js';
import { DispatchState, type DispatchColumns } from './dispatch/state.js';
import { checkConsumer, checkEventId, DEFAULT_LIMIT, missingEvent, notAConsumer, validatePush } from './inputs.js';
import { canWrite, snapshotThread } from './snapshot.js';
import type { AppendOptions } from './store/types.js';
import type { ConsumerInfo, PeekOptions, PopOptions, PushInput, SubscribeOptions, ThreadEvent, ThreadInfo } from './types.js';

export interface OpenThreadOptions {
  /** Create the thread if it does not exist. Default: false (a missing thread is `not_found`). */
  create?: boolean;
  /** Data root for the notifier registry and pokes. Default: `resolveHome()`. */
  home?: string;
  /**
   * Only to read: where this process may not write the thread's directory (an agent's own threads
   * seen from its sandbox), it is read in a private copy. Default: false.
   */
  readOnly?: boolean;
}

/**
 * Creates a thread directory; a directory that is already a thread is a `conflict`. A database
 * file without a schema (an init that a full disk stopped) is no thread yet: it is completed.
 */
export function initThread(path: string, options: Omit<OpenThreadOptions, 'create'> = {}): Thread {
  const dir = resolve(path);
  if (existsSync(dbPath(dir)) && hasSchema(dir)) {
    throw new ClawError('conflict', `${dir} is already a thread`, { suggestion: 'use it as it is, or choose another path' });
  }
  return openThread(dir, { ...options, create: true });
}

function hasSchema(dir: string): boolean {
  try {
    openDatabase(dir, false).close();
    return true;
  } catch (error) {
    if (isClawError(error, 'not_found')) return false;
    throw error;
  }
}

export function openThread(path: string, options: OpenThreadOptions = {}): Thread {
  const dir = resolve(path);
  if (options.create) ensureDir(join(dir, 'logs'));
  if (options.readOnly && !canWrite(dir) && existsSync(dbPath(dir))) {
    // Read in a copy (snapshot.ts): SQLite cannot open a WAL database in a read-only directory.
    const snapshot = snapshotThread(dir);
    try {
      return new Thread(dir, openDatabase(snapshot.dir, false), options.home ?? resolveHome(), snapshot.remove);
    } catch (error) {
      snapshot.remove();
      throw error;
    }
  }
  return new Thread(dir, openDatabase(dir, options.create ?? false), options.home ?? resolveHome());
}

type EventRow = ThreadEvent;

interface ConsumerRow extends DispatchColumns {
  consumer: string;
  progress: number;
  subscribed: number;
  handler: string | null;
  filter: string | null;
}

const EVENT_COLUMNS = 'id, created_at, source, type, subtype, content';

/**
 * One open thread. Every method is synchronous (better-sqlite3) and each write is one
 * transaction, so a crash leaves either all of a push or none of it.
 */
export class Thread {
  readonly path: string;
  /** Notifier's side of this thread: leases, run records, the registry and pokes (dispatch/index.ts). */
  readonly dispatch: DispatchState;
  private readonly db: Database.Database;
  private readonly jsonl: RotatingFile;
  private readonly dbFile: string;
  private readonly filters = new Map<string, CompiledFilter>();
  private readonly statements = new Map<string, Database.Statement>();
  private logger: Logger | undefined;

  /** @internal use openThread / initThread */
  constructor(
    path: string,
    db: Database.Database,
    home: string,
    /** What closing must also undo: the copy a read-only thread is read in. */
    private readonly onClose?: () => void,
  ) {
    this.path = path;
    this.db = db;
    this.dispatch = new DispatchState(path, home, { write: (fn) => this.write(fn), sql: (source) => this.sql(source) });
    this.jsonl = new RotatingFile(join(path, 'events.jsonl'));
    this.dbFile = dbPath(path);
  }

  /** Appends one event and returns its id (the first id when the idempotency key was seen). */
  push(input: PushInput): number {
    return this.append([input])[0]!.id;
  }

  /** Appends events in one transaction; returns their ids in input order. */
  pushBatch(inputs: readonly PushInput[]): number[] {
    return this.append(inputs).map((result) => result.id);
  }

  /** The id of the event pushed with this idempotency key, if there is one. */
  findByKey(key: string): number | undefined {
    return this.sql('SELECT id FROM events WHERE idempotency_key = ?').pluck().get(key) as number | undefined;
  }

  /** Like `push`, and says whether the idempotency key had been seen (nothing was stored). */
  pushOnce(input: PushInput): { id: number; duplicate: boolean } {
    return this.append([input])[0]!;
  }

  /** Appends events and, in the same transaction, acknowledges `options.ack` (store/types.ts `AppendOptions`). */
  append(inputs: readonly PushInput[], options: AppendOptions = {}): { id: number; duplicate: boolean }[] {
    if (options.ack) checkConsumer(options.ack.consumer);
    const events = inputs.map((input, index) => validatePush(input, inputs.length > 1 ? index + 1 : undefined));
    const insert = this.sql(`INSERT INTO events (created_at, source, type, subtype, content, idempotency_key) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`);
    const byKey = this.sql('SELECT id FROM events WHERE idempotency_key = ?').pluck();
    const created: ThreadEvent[] = [];
    const results = this.write(() => {
      const appended = events.map((event) => {
        // Looked up first (inside the write transaction) rather than relying on the unique
        // constraint, which would still consume an id from the sequence.
        const existing = event.idempotency_key ? (byKey.get(event.idempotency_key) as number | undefined) : undefined;
        if (existing !== undefined) return { id: existing, duplicate: true };
        const created_at = new Date().toISOString();
        const row = insert.get(created_at, event.source, event.type, event.subtype ?? null, event.content, event.idempotency_key ?? null) as {
          id: number;
        };
        created.push({ id: row.id, created_at, source: event.source, type: event.type, subtype: event.subtype ?? null, content: event.content });
        return { id: row.id, duplicate: false };
      });
      if (options.ack) this.advance(options.ack.consumer, this.ensureConsumer(options.ack.consumer).progress, options.ack.eventId);
      return appended;
    });
    if (created.length > 0) {
      // The database is the truth; the JSONL copy is written after the commit, so it may miss
      // the last lines after a crash but never shows an event that was not stored. The events
      // are stored, so a failing copy must not fail the push, nor keep notifier from hearing.
      try {
        this.jsonl.append(created.map((event) => JSON.stringify(event)).join('\n') + '\n', created.length);
      } catch (error) {
        this.log().warn(`events ${created[0]!.id}-${created.at(-1)!.id} are stored but missing from events.jsonl: ${(error as Error).message}`);
      }
      this.dispatch.poke();
    }
    return results;
  }

  /**
   * Reads the consumer's next events: with `lastEventId`, that id is acknowledged first. Returns
   * events after the stored progress that match the consumer's subscription filter. Nothing is
   * acknowledged by reading: a consumer that dies before `ack` gets the same events again.
   */
  pop(consumer: string, options: PopOptions = {}): ThreadEvent[] {
    checkConsumer(consumer);
    return this.write(() => {
      const row = this.ensureConsumer(consumer);
      const progress = options.lastEventId === undefined ? row.progress : this.advance(consumer, row.progress, options.lastEventId);
      return this.select(progress, row.filter, options.limit ?? DEFAULT_LIMIT);
    });
  }

  /**
   * Removes the events nobody will read again: created before `before`, acknowledged by every
   * consumer (never one a consumer has yet to handle), and not among the newest `keep`, which
   * stay as the conversation's recent history. Ids are never reused. Returns how many events
   * went, or, with `dryRun`, would go. The JSONL copy is an append-only record and is kept.
   */
  prune(options: { before: string; keep: number; dryRun?: boolean }): number {
    return this.write(() => {
      const { floor, consumers } = this.sql('SELECT MIN(progress) AS floor, COUNT(*) AS consumers FROM consumers').get() as { floor: number | null; consumers: number };
      const lastId = this.sql("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").pluck().get() as number;
      const upTo = Math.min(consumers > 0 ? (floor ?? 0) : lastId, lastId - options.keep);
      const where = 'FROM events WHERE id <= ? AND created_at < ?';
      return options.dryRun ? (this.sql(`SELECT COUNT(*) ${where}`).pluck().get(upTo, options.before) as number) : this.sql(`DELETE ${where}`).run(upTo, options.before).changes;
    });
  }

  /** Acknowledges everything up to `eventId` for the consumer; returns the stored progress. */
  ack(consumer: string, eventId: number): number {
    checkConsumer(consumer);
    return this.write(() => this.advance(consumer, this.ensureConsumer(consumer).progress, eventId));
  }

  peek(options: PeekOptions = {}): ThreadEvent[] {
    const filter = options.filter === undefined ? null : options.filter;
    if (options.last !== undefined) {
      const { where, params } = this.where(options.afterId ?? 0, filter);
      const rows = this.sql(`SELECT ${EVENT_COLUMNS} FROM events WHERE ${where} ORDER BY id DESC LIMIT ?`).all(...params, options.last) as EventRow[];
      return rows.reverse();
    }
    return this.select(options.afterId ?? 0, filter, options.limit ?? DEFAULT_LIMIT);
  }

  /**
   * Registers (or updates) a subscription: notifier starts `handler` when events matching
   * `filter` are pending. The consumer's progress is kept, so re-subscribing resumes. A changed
   * handler or filter, or a subscription renewed after unsubscribe, starts with a clean record:
   * the failures and backoff of the old one do not hold it back. Subscribing again with the same
   * handler and filter keeps the backoff, so a caller that re-subscribes in a loop cannot defeat it.
   */
  subscribe(options: SubscribeOptions): void {
    checkConsumer(options.consumer);
    splitCommand(options.handler); // a handler that cannot be split is refused now, not at dispatch
    if (options.filter !== undefined) this.compile(options.filter);
    const filter = options.filter ?? null;
    this.write(() => {
      const row = this.ensureConsumer(options.consumer);
      const renewed = row.subscribed === 0 || row.handler !== options.handler || row.filter !== filter;
      this.sql('UPDATE consumers SET subscribed = 1, handler = ?, filter = ?, updated_at = ? WHERE consumer = ?').run(options.handler, filter, new Date().toISOString(), options.consumer);
      if (renewed) this.dispatch.clearRunRecord(options.consumer);
      // Inside the write transaction, as in unsubscribe: a subscriber killed before the commit
      // leaves at most an entry with no subscription (harmless), never a subscription that the
      // sweep does not know of (its events would wait forever); and a failed entry stores nothing.
      this.dispatch.register();
    });
    this.log().info(`subscribed ${options.consumer}: handler ${options.handler}${options.filter ? `, filter ${options.filter}` : ''}`);
    this.dispatch.poke(); // events may already be waiting
  }

  /**
   * Ends a subscription; progress stays, so a later subscribe resumes where it stopped. The last
   * one to go takes the thread out of notifier's registry, so the sweep stops looking at it.
   */
  unsubscribe(consumer: string): void {
    checkConsumer(consumer);
    const changed = this.write(() => {
      const changes = this.sql('UPDATE consumers SET subscribed = 0, updated_at = ? WHERE consumer = ?').run(new Date().toISOString(), consumer).changes;
      // Inside the write transaction: a subscribe in another process commits after this one
      // and registers the thread again, so a subscription is never left unregistered.
      if (changes > 0 && this.sql('SELECT 1 FROM consumers WHERE subscribed = 1 LIMIT 1').get() === undefined) {
        this.dispatch.unregister();
      }
      return changes;
    });
    if (changed === 0) throw notAConsumer(this.path, consumer);
    this.log().info(`unsubscribed ${consumer}`);
  }

  info(): ThreadInfo {
    const { events, last_id } = this.sql("SELECT COUNT(*) AS events, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS last_id FROM events").get() as {
      events: number;
      last_id: number;
    };
    const rows = this.sql('SELECT * FROM consumers ORDER BY consumer').all() as ConsumerRow[];
    return { path: this.path, events, last_id, consumers: rows.map((row) => this.describe(row)) };
  }

  /** The consumer's state, or null if it never popped nor subscribed. */
  consumer(name: string): ConsumerInfo | null {
    const row = this.readConsumer(name);
    return row ? this.describe(row) : null;
  }

  /** Subscribed consumers' states, for dispatch. */
  subscriptions(): ConsumerInfo[] {
    const rows = this.sql('SELECT * FROM consumers WHERE subscribed = 1 ORDER BY consumer').all() as ConsumerRow[];
    return rows.map((row) => this.describe(row));
  }

  /** Whether events matching the consumer's filter are waiting (cheaper than `info`). */
  hasPending(consumer: string): boolean {
    const row = this.readConsumer(consumer);
    if (!row || this.brokenFilter(row)) return false;
    const { where, params } = this.where(row.progress, row.filter);
    return this.sql(`SELECT 1 FROM events WHERE ${where} LIMIT 1`).get(...params) !== undefined;
  }

  close(): void {
    if (!this.db.open) return;
    this.db.close();
    this.onClose?.();
  }

  /**
   * Runs `fn` as one write transaction, taking the write lock first (so reads inside it see what
   * the write is based on). A full or read-only disk fails it whole, as a ClawError naming the
   * thread's database.
   */
  private write<T>(fn: () => T): T {
    return withStoragePath(this.dbFile, () => this.db.transaction(fn).immediate());
  }

  /** Prepared statements are cached: preparing costs as much as running a small query. */
  private sql(source: string): Database.Statement {
    let statement = this.statements.get(source);
    if (!statement) {
      statement = this.db.prepare(source);
      this.statements.set(source, statement);
    }
    return statement;
  }

  private select(afterId: number, filter: string | null, limit: number): ThreadEvent[] {
    const { where, params } = this.where(afterId, filter);
    return this.sql(`SELECT ${EVENT_COLUMNS} FROM events WHERE ${where} ORDER BY id LIMIT ?`).all(...params, limit) as EventRow[];
  }

  private where(afterId: number, filter: string | null): { where: string; params: (string | number)[] } {
    if (filter === null) return { where: 'id > ?', params: [afterId] };
    const compiled = this.compile(filter);
    return { where: `id > ? AND ${compiled.sql}`, params: [afterId, ...compiled.params] };
  }

  private compile(filter: string): CompiledFilter {
    let compiled = this.filters.get(filter);
    if (!compiled) {
      compiled = compileFilter(parseFilter(filter));
      this.filters.set(filter, compiled);
    }
    return compiled;
  }

  /** Moves progress to `eventId` if that is forward; an id past the newest event is refused. */
  private advance(consumer: string, progress: number, eventId: number): number {
    checkEventId(eventId);
    if (eventId <= progress) return progress;
    const last = this.sql("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number | undefined;
    if (eventId > (last ?? 0)) throw missingEvent(this.path, eventId, last ?? 0);
    this.sql('UPDATE consumers SET progress = ?, updated_at = ? WHERE consumer = ?').run(eventId, new Date().toISOString(), consumer);
    return eventId;
  }

  private readConsumer(consumer: string): ConsumerRow | undefined {
    return this.sql('SELECT * FROM consumers WHERE consumer = ?').get(consumer) as ConsumerRow | undefined;
  }

  private ensureConsumer(consumer: string): ConsumerRow {
    this.sql('INSERT INTO consumers (consumer, updated_at) VALUES (?, ?) ON CONFLICT (consumer) DO NOTHING').run(consumer, new Date().toISOString());
    return this.readConsumer(consumer)!;
  }

  private brokenFilter(row: ConsumerRow): string | null {
    return brokenFilter(row.filter, (filter) => this.compile(filter));
  }

  private describe(row: ConsumerRow): ConsumerInfo {
    const broken = this.brokenFilter(row);
    let pending = 0;
    if (!broken) {
      const { where, params } = this.where(row.progress, row.filter);
      pending = this.sql(`SELECT COUNT(*) FROM events WHERE ${where}`)
        .pluck()
        .get(...params) as number;
    }
    return consumerInfo({ ...row, subscribed: row.subscribed === 1 }, pending, broken);
  }

  private log(): Logger {
    this.logger ??= createLogger(join(this.path, 'logs', 'thread.log'));
    return this.logger;
  }
}
