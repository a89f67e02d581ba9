import type { Sql, TransactionSql } from 'postgres';
import { splitCommand } from '../../core/command.js';
import { ClawError, usageError } from '../../core/errors.js';
import type { ProcessIdentity } from '../../core/process.js';
import { brokenFilter, consumerInfo, type ConsumerFields } from '../consumer-info.js';
import { isHeld, type DispatchColumns } from '../dispatch/state.js';
import { compileFilter, parseFilter, type CompiledFilter } from '../filter.js';
import { checkConsumer, checkEventId, DEFAULT_LIMIT, missingEvent, notAConsumer, validatePush } from '../inputs.js';
import type { ConsumerInfo, PeekOptions, PopOptions, PushInput, SubscribeOptions, ThreadEvent, ThreadInfo } from '../types.js';
import { POSTGRES_DIALECT } from './postgres-filter.js';
import { ensureSchema } from './postgres-schema.js';
import { connectPostgres, postgresFailure } from './postgres-connect.js';
import { postgresPlacements } from './placements.js';
import { PostgresLeases, THREADS_CHANNEL } from './postgres-leases.js';
import { postgresSharedFiles } from './shared-files.js';
import type { AppendOptions, OpenStoredThreadOptions, RunOutcome, StoredConsumer, StoredEvent, StoredThread, ThreadDump, ThreadStore } from './types.js';

type Tx = Sql | TransactionSql;

const EVENT_COLUMNS = 'id, created_at, source, type, subtype, content';
const APPEND = 'SELECT id, duplicate FROM theclaw.append($1, $2, $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8, $9)';
/** Rows per INSERT: PostgreSQL takes at most 65,535 parameters in one statement. */
const ROWS_PER_INSERT = 1000;

/**
 * The PostgreSQL store (types.ts says what every store holds to). Each write is one transaction;
 * a thread's appends are serialised by a lock on its row, as SQLite's write lock serialises them,
 * so ids follow each other without gaps and a key is looked up before it is inserted.
 */
export async function createPostgresStore(url: string, options: { maxConnections?: number } = {}): Promise<ThreadStore> {
  const { sql, location } = await connectPostgres(url, options);
  try {
    await ensureSchema(sql, location);
  } catch (error) {
    await sql.end({ timeout: 1 });
    throw postgresFailure(error, location);
  }
  return new PostgresStore(sql, location);
}

class PostgresStore implements ThreadStore {
  readonly kind = 'postgres' as const;
  readonly placements = postgresPlacements(this);
  readonly files = postgresSharedFiles(this);
  readonly leases: PostgresLeases;
  constructor(
    /** The pool; the store's threads query through `run` and `transaction`. */
    readonly sql: Sql,
    readonly location: string,
  ) {
    this.leases = new PostgresLeases(sql, location);
  }

  listen(onThread: (thread: number) => void, onListening: () => void): Promise<{ unlisten(): Promise<void> }> {
    return this.guard(() => this.sql.listen(THREADS_CHANNEL, (payload) => onThread(Number(payload)), onListening));
  }

  async init(name: string): Promise<StoredThread> {
    const [row] = await this.guard(() => this.sql<{ thread: number }[]>`INSERT INTO theclaw.threads (name, created_at) VALUES (${name}, ${now()}) ON CONFLICT (name) DO NOTHING RETURNING thread`);
    if (!row) throw new ClawError('conflict', `${name} is already a thread in ${this.location}`, { suggestion: 'use it as it is, or choose another name' });
    return new PostgresThread(this, name, row.thread);
  }

  async open(name: string, options: OpenStoredThreadOptions = {}): Promise<StoredThread> {
    const find = async () => (await this.sql<{ thread: number }[]>`SELECT thread FROM theclaw.threads WHERE name = ${name}`)[0];
    let row = await this.guard(find);
    if (!row && options.create) {
      await this.guard(() => this.sql`INSERT INTO theclaw.threads (name, created_at) VALUES (${name}, ${now()}) ON CONFLICT (name) DO NOTHING`);
      row = await this.guard(find);
    }
    if (!row) {
      throw new ClawError('not_found', `${name} is not a thread in ${this.location}`, { suggestion: `create it with: thread init ${JSON.stringify(name)}` });
    }
    return new PostgresThread(this, name, row.thread);
  }

  async list(): Promise<string[]> {
    const rows = await this.guard(() => this.sql<{ name: string }[]>`SELECT name FROM theclaw.threads`);
    return rows.map((row) => row.name).sort();
  }

  async dump(name: string): Promise<ThreadDump> {
    return this.guard(() =>
      this.sql.begin('isolation level repeatable read read only', async (tx) => {
        const [thread] = await tx<{ thread: number; last_id: number }[]>`SELECT thread, last_id FROM theclaw.threads WHERE name = ${name}`;
        if (!thread) throw new ClawError('not_found', `${name} is not a thread in ${this.location}`, { suggestion: 'list the threads to copy again' });
        const events = await tx<StoredEvent[]>`SELECT id, created_at, source, type, subtype, content, idempotency_key FROM theclaw.events WHERE thread = ${thread.thread} ORDER BY id`;
        const consumers = await tx<StoredConsumer[]>`
          SELECT consumer, progress, subscribed, handler, filter, failures, last_error, retry_at, run_on
          FROM theclaw.consumers WHERE thread = ${thread.thread} ORDER BY consumer`;
        return { name, last_id: thread.last_id, events: [...events], consumers: [...consumers] };
      }),
    );
  }

  async load(dump: ThreadDump): Promise<void> {
    await this.guard(() =>
      this.sql.begin(async (tx) => {
        const [row] = await tx<{ thread: number }[]>`
          INSERT INTO theclaw.threads (name, created_at, last_id) VALUES (${dump.name}, ${now()}, ${dump.last_id})
          ON CONFLICT (name) DO NOTHING RETURNING thread`;
        if (!row) throw new ClawError('conflict', `${dump.name} is already a thread in ${this.location}`, { suggestion: 'migrate into a database (or home) that does not hold these threads yet' });
        await insertEvents(tx, row.thread, dump.events);
        const updated = now();
        for (let at = 0; at < dump.consumers.length; at += ROWS_PER_INSERT) {
          const rows = dump.consumers.slice(at, at + ROWS_PER_INSERT).map((c) => ({ ...c, thread: row.thread, updated_at: updated }));
          await tx`INSERT INTO theclaw.consumers ${tx(rows, 'thread', 'consumer', 'progress', 'subscribed', 'handler', 'filter', 'failures', 'last_error', 'retry_at', 'run_on', 'updated_at')}`;
        }
      }),
    );
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }

  /** Runs `fn` against the pool; a lost connection or a server's refusal becomes a ClawError naming the store. */
  async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw postgresFailure(error, this.location);
    }
  }

  transaction<T>(fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
    return this.guard(() => this.sql.begin(fn) as Promise<T>);
  }

  query<T extends object>(text: string, params: (string | number)[]): Promise<T[]> {
    return this.guard(async () => [...(await this.sql.unsafe<T[]>(text, params, { prepare: true }))]);
  }
}

/** Inserts events as they are (a dump's, ids and keys kept). */
async function insertEvents(tx: Tx, thread: number, events: readonly StoredEvent[]): Promise<void> {
  for (let at = 0; at < events.length; at += ROWS_PER_INSERT) {
    const rows = events.slice(at, at + ROWS_PER_INSERT).map((event) => ({ ...event, thread }));
    await tx`INSERT INTO theclaw.events ${tx(rows, 'thread', 'id', 'created_at', 'source', 'type', 'subtype', 'content', 'idempotency_key')}`;
  }
}

class PostgresThread implements StoredThread {
  private readonly filters = new Map<string, CompiledFilter>();
  constructor(
    private readonly store: PostgresStore,
    readonly name: string,
    /** The thread's row key. */
    private readonly thread: number,
  ) {}

  get path(): string {
    return this.name;
  }

  /** One statement (`theclaw.append`, postgres-schema.ts): the row lock, the keys, the ids, the notify and the ack. */
  async append(inputs: readonly PushInput[], options: AppendOptions = {}): Promise<{ id: number; duplicate: boolean }[]> {
    const { ack } = options;
    if (ack) {
      checkConsumer(ack.consumer);
      checkEventId(ack.eventId);
    }
    const events = inputs.map((input, index) => storable(validatePush(input, inputs.length > 1 ? index + 1 : undefined)));
    const column = <K extends 'source' | 'type' | 'subtype' | 'content' | 'idempotency_key'>(key: K) => events.map((event) => event[key] ?? null);
    const params = [this.thread, now(), column('source'), column('type'), column('subtype'), column('content'), column('idempotency_key'), ack?.consumer ?? null, ack?.eventId ?? null];
    return this.guarded(async (sql) => {
      try {
        return [...(await sql.unsafe<{ id: number; duplicate: boolean }[]>(APPEND, params as never[], { prepare: true }))];
      } catch (error) {
        const { code, message } = error as { code?: string; message?: string };
        if (code === 'TC001') throw this.gone();
        if (code === 'TC002') throw missingEvent(this.path, ack!.eventId, Number(message));
        throw error;
      }
    });
  }

  async findByKey(key: string): Promise<number | undefined> {
    const [row] = await this.guarded((sql) => sql<{ id: number }[]>`SELECT id FROM theclaw.events WHERE thread = ${this.thread} AND idempotency_key = ${key}`);
    return row?.id;
  }

  async pop(consumer: string, options: PopOptions = {}): Promise<ThreadEvent[]> {
    checkConsumer(consumer);
    const limit = options.limit ?? DEFAULT_LIMIT;
    if (options.lastEventId === undefined) {
      // Reading acknowledges nothing: two reads, no transaction; a consumer that is none yet is made below.
      const [row] = await this.consumerRows(' AND consumer = $2', [consumer]);
      if (row) return this.guarded((sql) => this.select(sql, row.progress, row.filter, limit, 'ASC'));
    }
    return this.store.transaction(async (tx) => {
      const row = await this.ensureConsumer(tx, consumer);
      const progress = options.lastEventId === undefined ? row.progress : await this.advance(tx, consumer, row.progress, options.lastEventId);
      return this.select(tx, progress, row.filter, limit, 'ASC');
    });
  }

  async ack(consumer: string, eventId: number): Promise<number> {
    checkConsumer(consumer);
    checkEventId(eventId);
    // What an ack almost always is, in one statement: forward, to an event that exists. Anything
    // else (a consumer that is none yet, an id not forward, one past the newest) is the transaction's.
    const moved = await this.store.query(
      `UPDATE theclaw.consumers c SET progress = $3, updated_at = $4 FROM theclaw.threads t
       WHERE c.thread = $1 AND c.consumer = $2 AND t.thread = $1 AND c.progress < $3 AND $3 <= t.last_id RETURNING c.progress`,
      [this.thread, consumer, eventId, now()],
    );
    if (moved.length > 0) return eventId;
    return this.store.transaction(async (tx) => this.advance(tx, consumer, (await this.ensureConsumer(tx, consumer)).progress, eventId));
  }

  async peek(options: PeekOptions = {}): Promise<ThreadEvent[]> {
    const filter = options.filter ?? null;
    if (options.last !== undefined) return (await this.guarded((sql) => this.select(sql, options.afterId ?? 0, filter, options.last!, 'DESC'))).reverse();
    return this.guarded((sql) => this.select(sql, options.afterId ?? 0, filter, options.limit ?? DEFAULT_LIMIT, 'ASC'));
  }

  async subscribe(options: SubscribeOptions): Promise<void> {
    checkConsumer(options.consumer);
    splitCommand(options.handler); // refused now, not at dispatch
    if (options.filter !== undefined) this.compile(options.filter);
    const filter = options.filter ?? null;
    await this.store.transaction(async (tx) => {
      const row = await this.ensureConsumer(tx, options.consumer);
      const renewed = !row.subscribed || row.handler !== options.handler || row.filter !== filter;
      await tx`UPDATE theclaw.consumers SET subscribed = true, handler = ${options.handler}, filter = ${filter}, run_on = ${options.runOn ?? null}, updated_at = ${now()} ${
        renewed ? tx`, failures = 0, last_error = NULL, retry_at = NULL` : tx``
      } WHERE thread = ${this.thread} AND consumer = ${options.consumer}`;
      await this.notify(tx);
    });
  }

  async unsubscribe(consumer: string): Promise<void> {
    checkConsumer(consumer);
    const rows = await this.store.transaction(
      (tx) => tx`UPDATE theclaw.consumers SET subscribed = false, updated_at = ${now()} WHERE thread = ${this.thread} AND consumer = ${consumer} RETURNING consumer`,
    );
    if (rows.length === 0) throw notAConsumer(this.path, consumer);
  }

  async info(): Promise<ThreadInfo> {
    const [counts] = await this.store.query<{ events: number; last_id: number }>(
      'SELECT (SELECT COUNT(*) FROM theclaw.events WHERE thread = $1) AS events, last_id FROM theclaw.threads WHERE thread = $1',
      [this.thread],
    );
    if (!counts) throw this.gone();
    const rows = await this.consumerRows('');
    return { path: this.path, events: counts.events, last_id: counts.last_id, consumers: await Promise.all(rows.map((row) => this.describe(row))) };
  }

  async consumer(name: string): Promise<ConsumerInfo | null> {
    const [row] = await this.consumerRows(' AND consumer = $2', [name]);
    return row ? this.describe(row) : null;
  }

  async subscriptions(): Promise<ConsumerInfo[]> {
    const rows = await this.consumerRows(' AND subscribed');
    return Promise.all(rows.map((row) => this.describe(row)));
  }

  async hasPending(consumer: string): Promise<boolean> {
    const [row] = await this.consumerRows(' AND consumer = $2', [consumer]);
    if (!row || brokenFilter(row.filter, (filter) => this.compile(filter))) return false;
    const { where, params } = this.where(row.progress, row.filter);
    return (await this.store.query(`SELECT 1 FROM theclaw.events WHERE ${where} LIMIT 1`, params)).length > 0;
  }

  async prune(options: { before: string; keep: number; dryRun?: boolean }): Promise<number> {
    return this.store.transaction(async (tx) => {
      const [row] = await tx<{ last_id: number }[]>`SELECT last_id FROM theclaw.threads WHERE thread = ${this.thread} FOR UPDATE`;
      if (!row) throw this.gone();
      const { floor, consumers } = (
        await tx<{ floor: number | null; consumers: number }[]>`SELECT MIN(progress) AS floor, COUNT(*) AS consumers FROM theclaw.consumers WHERE thread = ${this.thread}`
      )[0]!;
      const upTo = Math.min(consumers > 0 ? (floor ?? 0) : row.last_id, row.last_id - options.keep);
      const where = tx`WHERE thread = ${this.thread} AND id <= ${upTo} AND created_at < ${options.before}`;
      if (options.dryRun) return (await tx<{ count: number }[]>`SELECT COUNT(*) AS count FROM theclaw.events ${where}`)[0]!.count;
      return (await tx`DELETE FROM theclaw.events ${where}`).count;
    });
  }

  async takeLease(consumer: string, holder: ProcessIdentity): Promise<boolean> {
    return this.store.transaction(async (tx) => {
      const [row] = await tx<Pick<DispatchColumns, 'lease_pid' | 'lease_start'>[]>`
        SELECT lease_pid, lease_start FROM theclaw.consumers WHERE thread = ${this.thread} AND consumer = ${consumer} FOR UPDATE`;
      if (!row || isHeld(row)) return false;
      await tx`UPDATE theclaw.consumers SET lease_pid = ${holder.pid}, lease_start = ${holder.start}, lease_since = ${now()} WHERE thread = ${this.thread} AND consumer = ${consumer}`;
      return true;
    });
  }

  async transferLease(consumer: string, fromPid: number, to: ProcessIdentity): Promise<void> {
    await this.guarded((sql) => sql`UPDATE theclaw.consumers SET lease_pid = ${to.pid}, lease_start = ${to.start} WHERE thread = ${this.thread} AND consumer = ${consumer} AND lease_pid = ${fromPid}`);
  }

  async releaseLease(consumer: string, pid: number): Promise<void> {
    await this.guarded(
      (sql) => sql`UPDATE theclaw.consumers SET lease_pid = NULL, lease_start = NULL, lease_since = NULL WHERE thread = ${this.thread} AND consumer = ${consumer} AND lease_pid = ${pid}`,
    );
  }

  async recordRun(consumer: string, outcome: RunOutcome): Promise<void> {
    const set = (sql: Sql) =>
      outcome.ok ? sql`failures = 0, last_error = NULL, retry_at = NULL` : sql`failures = failures + 1, last_error = ${outcome.error.slice(0, 2000)}, retry_at = ${outcome.retryAt.getTime()}`;
    await this.guarded((sql) => sql`UPDATE theclaw.consumers SET ${set(sql)}, updated_at = ${now()} WHERE thread = ${this.thread} AND consumer = ${consumer}`);
  }

  async retryNow(consumer: string): Promise<void> {
    await this.guarded((sql) => sql`UPDATE theclaw.consumers SET retry_at = NULL WHERE thread = ${this.thread} AND consumer = ${consumer} AND retry_at IS NOT NULL`);
  }

  async close(): Promise<void> {}

  private guarded<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.store.guard(() => fn(this.store.sql));
  }

  private async select(sql: Tx, afterId: number, filter: string | null, limit: number, order: 'ASC' | 'DESC'): Promise<ThreadEvent[]> {
    const { where, params } = this.where(afterId, filter);
    return [...(await sql.unsafe<ThreadEvent[]>(`SELECT ${EVENT_COLUMNS} FROM theclaw.events WHERE ${where} ORDER BY id ${order} LIMIT $${params.length + 1}`, [...params, limit], { prepare: true }))];
  }

  /** `thread = $1 AND id > $2` and the filter, its parameters numbered from $3. */
  private where(afterId: number, filter: string | null): { where: string; params: (string | number)[] } {
    const own = 'thread = $1 AND id > $2';
    if (filter === null) return { where: own, params: [this.thread, afterId] };
    const compiled = this.compile(filter);
    return { where: `${own} AND ${compiled.sql}`, params: [this.thread, afterId, ...compiled.params] };
  }

  private compile(filter: string): CompiledFilter {
    let compiled = this.filters.get(filter);
    if (!compiled) {
      compiled = compileFilter(parseFilter(filter), POSTGRES_DIALECT, 3);
      this.filters.set(filter, compiled);
    }
    return compiled;
  }

  /**
   * Tells the notifiers that LISTEN (on every host) that this thread has news, when the
   * transaction commits: PostgreSQL's poke, as a push's poke on notifier's socket is SQLite's.
   */
  private async notify(tx: Tx): Promise<void> {
    await tx`SELECT pg_notify(${THREADS_CHANNEL}, ${String(this.thread)})`;
  }

  /** The consumer's row, locked; made first when it is none yet. */
  private async ensureConsumer(tx: Tx, consumer: string): Promise<ConsumerFields> {
    const locked = () => tx<ConsumerFields[]>`SELECT * FROM theclaw.consumers WHERE thread = ${this.thread} AND consumer = ${consumer} FOR UPDATE`;
    const [row] = await locked();
    if (row) return row;
    await tx`INSERT INTO theclaw.consumers (thread, consumer, updated_at) VALUES (${this.thread}, ${consumer}, ${now()}) ON CONFLICT (thread, consumer) DO NOTHING`;
    return (await locked())[0]!;
  }

  /** Moves progress to `eventId` if that is forward; an id past the newest event is refused. */
  private async advance(tx: Tx, consumer: string, progress: number, eventId: number): Promise<number> {
    checkEventId(eventId);
    if (eventId <= progress) return progress;
    const [row] = await tx<{ last_id: number }[]>`SELECT last_id FROM theclaw.threads WHERE thread = ${this.thread}`;
    const last = row?.last_id ?? 0;
    if (eventId > last) throw missingEvent(this.path, eventId, last);
    await tx`UPDATE theclaw.consumers SET progress = ${eventId}, updated_at = ${now()} WHERE thread = ${this.thread} AND consumer = ${consumer}`;
    return eventId;
  }

  private consumerRows(condition: string, params: string[] = []): Promise<ConsumerFields[]> {
    return this.store.query<ConsumerFields>(`SELECT * FROM theclaw.consumers WHERE thread = $1${condition} ORDER BY consumer`, [this.thread, ...params]);
  }

  private async describe(row: ConsumerFields): Promise<ConsumerInfo> {
    const broken = brokenFilter(row.filter, (filter) => this.compile(filter));
    let pending = 0;
    if (!broken) {
      const { where, params } = this.where(row.progress, row.filter);
      pending = (await this.store.query<{ count: number }>(`SELECT COUNT(*) AS count FROM theclaw.events WHERE ${where}`, params))[0]!.count;
    }
    return hostLease(consumerInfo(row, pending, broken), row);
  }

  private gone(): ClawError {
    return new ClawError('not_found', `${this.name} is no longer a thread in ${this.store.location}`, { suggestion: 'it was removed meanwhile; create it again with thread init' });
  }
}

/** PostgreSQL's text holds no NUL character, which SQLite's does: such an event is refused, not changed. */
function storable<T extends PushInput>(event: T): T {
  for (const field of ['content', 'idempotency_key', 'source'] as const) {
    if (event[field]?.includes('\u0000')) {
      throw usageError(`the event's ${field} holds a NUL character (U+0000), which PostgreSQL cannot store as text`, 'encode it (JSON escapes it as \\u0000), or keep this thread on SQLite');
    }
  }
  return event;
}

/**
 * A lease taken by a host (postgres-leases.ts) is held until it expires, whatever its pid does on
 * this machine: the holder may be another host's notifier.
 */
function hostLease(info: ConsumerInfo, row: ConsumerFields & { lease_host?: string | null; lease_expires?: Date | null }): ConsumerInfo {
  if (!row.lease_host || row.lease_pid === null) return info;
  const held = row.lease_expires !== null && row.lease_expires !== undefined && row.lease_expires.getTime() > Date.now();
  return { ...info, lease: held ? { pid: row.lease_pid, start: row.lease_start, since: row.lease_since ?? '', host: row.lease_host } : null };
}

function now(): string {
  return new Date().toISOString();
}
