import type { Sql } from 'postgres';
import { compileFilter, parseFilter, type FilterExpr } from '../filter.js';
import { POSTGRES_DIALECT } from './postgres-filter.js';
import { postgresFailure } from './postgres-connect.js';

/**
 * The dispatch side of a PostgreSQL store shared by several hosts (issue 26 §2): which
 * subscriptions are due, and leases that name a host and end at `lease_expires` unless their
 * holder renews them. A lease is taken in one statement that locks the consumer's row with
 * `FOR UPDATE SKIP LOCKED` and re-checks that it is due, so of two notifiers reaching for one
 * subscription at once exactly one gets it; a dead host's lease is taken over once it expired.
 *
 * Due means: subscribed with a handler, events pending after its progress that match its filter,
 * not waiting out a backoff (`retry_at`), no lease or an expired one, and `run_on` null or a
 * placement of that key on this host that has not expired.
 */
export const THREADS_CHANNEL = 'theclaw_threads';

/** A subscription a host may run now, as the look before the take found it. */
export interface DueSubscription {
  /** The thread's row key (what a NOTIFY on THREADS_CHANNEL carries). */
  thread: number;
  /** The thread's name (`threadName`). */
  name: string;
  consumer: string;
  filter: string | null;
}

/** What a taken lease gives its holder: the row as it was taken. */
export interface TakenLease {
  handler: string;
  progress: number;
  failures: number;
}

/** A lease this host holds, to renew or release. */
export interface HeldLease {
  thread: number;
  consumer: string;
  pid: number;
}

export interface LeaseHolder {
  host: string;
  pid: number;
  /** How long a lease lasts unless renewed. */
  ttlMs: number;
}

/** The due clause over `consumers c`; $1 is the host, $2 the time in epoch ms (retry_at's unit). */
const DUE = `c.subscribed AND c.handler IS NOT NULL
  AND (c.retry_at IS NULL OR c.retry_at <= $2::bigint)
  AND (c.lease_expires IS NULL OR c.lease_expires < now())
  AND (c.run_on IS NULL OR EXISTS (
    SELECT 1 FROM theclaw.placements p WHERE p.key = c.run_on AND p.host = $1 AND (p.expires_at IS NULL OR p.expires_at > now())))`;

const CLEAR_LEASE = 'lease_host = NULL, lease_pid = NULL, lease_start = NULL, lease_since = NULL, lease_expires = NULL';

/** Filters a look checks itself (`due`): a few are in use (the agents' two); past this many, the take checks the rest. */
const MAX_KNOWN_FILTERS = 32;

/** An event after the consumer's progress (`consumers c`), matching `filter` if one is given. */
function pendingClause(filter: { sql: string } | null): string {
  return `EXISTS (SELECT 1 FROM theclaw.events e WHERE e.thread = c.thread AND e.id > c.progress${filter ? ` AND (${filter.sql})` : ''})`;
}

export class PostgresLeases {
  /** The filters met in looks and takes, by their text. */
  private readonly filters = new Map<string, FilterExpr>();

  constructor(
    private readonly sql: Sql,
    private readonly location: string,
  ) {}

  /**
   * Subscriptions due for `host` with an event after their progress that matches their filter, in
   * `threads` or in all. The filters this holder has met are checked here (a CASE over their
   * texts); one not met before counts any event as pending, and the take checks it.
   */
  async due(host: string, threads: number[] | null = null): Promise<DueSubscription[]> {
    const params: unknown[] = [host, Date.now()];
    if (threads) params.push(threads);
    const cases = [...this.filters].map(([text, parsed]) => {
      params.push(text);
      const filter = compileFilter(parsed, POSTGRES_DIALECT, params.length + 1);
      params.push(...filter.params);
      return `WHEN $${params.length - filter.params.length} THEN ${pendingClause(filter)}`;
    });
    const pending = cases.length > 0 ? `CASE c.filter ${cases.join(' ')} ELSE ${pendingClause(null)} END` : pendingClause(null);
    const rows = await this.query<DueSubscription>(
      `SELECT c.thread, t.name, c.consumer, c.filter FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
       WHERE ${DUE} ${threads ? 'AND c.thread = ANY($3::bigint[])' : ''} AND ${pending}
       ORDER BY c.retry_at NULLS FIRST, c.thread, c.consumer`,
      params,
    );
    for (const { filter } of rows) {
      try {
        if (filter !== null) this.meet(filter);
      } catch {
        // One that does not parse fails its own take, as it did before: never the look.
      }
    }
    return rows;
  }

  /**
   * Whether a run that ended left its subscription stuck: its progress where the take found it
   * while events matching its filter wait (a handler that exits 0 so would be started again at
   * once, forever).
   */
  async leftPending(subscription: DueSubscription, progress: number): Promise<boolean> {
    const filter = this.compile(subscription.filter, 4);
    const [row] = await this.query<{ stuck: boolean }>(`SELECT c.progress = $3 AND ${pendingClause(filter)} AS stuck FROM theclaw.consumers c WHERE c.thread = $1 AND c.consumer = $2`, [
      subscription.thread,
      subscription.consumer,
      progress,
      ...(filter?.params ?? []),
    ]);
    return row?.stuck === true;
  }

  /**
   * Takes the subscription's lease for `holder` if it is (still) due, with the filter the look
   * saw (a subscribe that changed it meanwhile makes this miss; the next look sees the new one).
   * Null when it is not due or another host holds or is taking it.
   */
  async take(subscription: DueSubscription, holder: LeaseHolder): Promise<TakenLease | null> {
    const filter = this.compile(subscription.filter, 9);
    const rows = await this.query<TakenLease>(
      `WITH due AS (
         SELECT c.thread, c.consumer FROM theclaw.consumers c
         WHERE c.thread = $3 AND c.consumer = $4 AND c.filter IS NOT DISTINCT FROM $5::text AND ${DUE} AND ${pendingClause(filter)}
         FOR UPDATE OF c SKIP LOCKED)
       UPDATE theclaw.consumers u SET lease_host = $1, lease_pid = $6, lease_start = NULL, lease_since = $7,
         lease_expires = now() + $8::bigint * interval '1 millisecond'
       FROM due WHERE u.thread = due.thread AND u.consumer = due.consumer
       RETURNING u.handler, u.progress, u.failures`,
      [holder.host, Date.now(), subscription.thread, subscription.consumer, subscription.filter, holder.pid, new Date().toISOString(), holder.ttlMs, ...(filter?.params ?? [])],
    );
    return rows[0] ?? null;
  }

  /** Moves the held leases' expiry on; returns the ones still held (a lease missing was lost). */
  async renew(host: string, leases: readonly HeldLease[], ttlMs: number): Promise<HeldLease[]> {
    if (leases.length === 0) return [];
    return this.query<HeldLease>(
      `UPDATE theclaw.consumers c SET lease_expires = now() + $2::bigint * interval '1 millisecond'
       FROM unnest($3::bigint[], $4::text[], $5::int[]) AS held(thread, consumer, pid)
       WHERE c.thread = held.thread AND c.consumer = held.consumer AND c.lease_host = $1 AND c.lease_pid = held.pid
       RETURNING c.thread, c.consumer, c.lease_pid AS pid`,
      [host, ttlMs, leases.map((l) => l.thread), leases.map((l) => l.consumer), leases.map((l) => l.pid)],
    );
  }

  /**
   * The unexpired leases `host` holds under another pid than `pid`: an earlier notifier of this
   * host's, which the caller can tell dead or alive (host names are unique among the hosts).
   */
  async heldByOthers(host: string, pid: number): Promise<HeldLease[]> {
    return this.query<HeldLease>('SELECT thread, consumer, lease_pid AS pid FROM theclaw.consumers WHERE lease_host = $1 AND lease_pid <> $2 AND lease_expires >= now()', [host, pid]);
  }

  /** Gives the lease back if this holder still has it. */
  async release(host: string, lease: HeldLease): Promise<void> {
    await this.query(`UPDATE theclaw.consumers SET ${CLEAR_LEASE} WHERE thread = $1 AND consumer = $2 AND lease_host = $3 AND lease_pid = $4`, [lease.thread, lease.consumer, host, lease.pid]);
  }

  /** Ends every backoff (a wake): their failure counts stay. */
  async retryAllNow(): Promise<void> {
    await this.query('UPDATE theclaw.consumers SET retry_at = NULL WHERE retry_at IS NOT NULL', []);
  }

  /** The names of the threads with a subscription, sorted. */
  async subscribedThreads(): Promise<string[]> {
    const rows = await this.query<{ name: string }>('SELECT DISTINCT t.name FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread WHERE c.subscribed ORDER BY t.name', []);
    return rows.map((row) => row.name);
  }

  /** A filter compiled with its parameters numbered from `firstParam` (null: none); met, so that looks check it. */
  private compile(text: string | null, firstParam: number): { sql: string; params: (string | number)[] } | null {
    return text === null ? null : compileFilter(this.meet(text), POSTGRES_DIALECT, firstParam);
  }

  /** The filter parsed (it throws on one that does not parse), kept for `due` while there is room. */
  private meet(text: string): FilterExpr {
    const known = this.filters.get(text);
    if (known) return known;
    const parsed = parseFilter(text);
    if (this.filters.size < MAX_KNOWN_FILTERS) this.filters.set(text, parsed);
    return parsed;
  }

  private async query<T extends object>(text: string, params: unknown[]): Promise<T[]> {
    try {
      return [...(await this.sql.unsafe<T[]>(text, params as never[], { prepare: true }))];
    } catch (error) {
      throw postgresFailure(error, this.location);
    }
  }
}
