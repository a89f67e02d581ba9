import type { Sql } from 'postgres';
import { ClawError, isClawError, usageError } from '../../core/errors.js';

/** How long a connection may take before the store says PostgreSQL cannot be reached. */
const CONNECT_TIMEOUT_SECONDS = 10;

/**
 * How long a connection waits before it connects again after failures, in seconds: doubling from
 * 50 ms to at most 2 s, with jitter. postgres.js's own delay grows to 10–20 s, and its count of
 * failures is shared by the pool and its LISTEN connection, which tries again each time it is
 * refused: after an outage of a few seconds every query waited that long for a database that was
 * back (a notifier ran nothing for ~11 s after a restart).
 */
const reconnectDelaySeconds = (failures: number) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** failures, 2);

/** Whether a store setting names PostgreSQL (the rest are homes or `sqlite`). */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}

/**
 * The URL as messages show it: without its password, which belongs in no log or error line
 * (`PGPASSWORD` or `~/.pgpass` keep it out of the URL altogether).
 */
export function describePostgresUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usageError('the database URL is not a URL', 'write it as postgres://user@host:5432/database');
  }
  if (!/^postgres(ql)?:$/.test(parsed.protocol)) throw usageError(`the database URL is not a PostgreSQL URL (${parsed.protocol})`, 'write it as postgres://user@host:5432/database');
  parsed.password = '';
  return parsed.toString();
}

/**
 * A pool of connections to the URL (loaded only here: SQLite's users never load the client).
 * Big integers (ids, counts) come back as numbers: ids stay far below 2^53.
 */
export async function connectPostgres(url: string, options: { maxConnections?: number } = {}): Promise<{ sql: Sql; location: string }> {
  const location = describePostgresUrl(url);
  const { default: postgres } = await import('postgres');
  const sql = postgres(url, {
    max: options.maxConnections ?? 4,
    connect_timeout: CONNECT_TIMEOUT_SECONDS,
    backoff: reconnectDelaySeconds,
    onnotice: () => {},
    connection: { application_name: 'theclaw' },
    types: { bigint: { to: 20, from: [20], serialize: (value: number) => String(value), parse: (value: string) => Number(value) } },
  });
  return { sql, location };
}

/** A failure of PostgreSQL's as a ClawError naming the store (never its password); ours pass through. */
export function postgresFailure(error: unknown, location: string): ClawError {
  if (isClawError(error)) return error;
  const { code, message } = error as { code?: string; message?: string };
  const unreachable = code !== undefined && (/^E[A-Z]+$/.test(code) || code === 'CONNECT_TIMEOUT' || code === 'CONNECTION_CLOSED' || /^(08|28|3D)/.test(code));
  return new ClawError('upstream', `${unreachable ? 'cannot use' : 'PostgreSQL failed at'} ${location}: ${message ?? String(error)}`, {
    suggestion: unreachable
      ? 'check that the server runs and that THECLAW_DATABASE_URL (or store: in config.yaml) names it, with its user and database; theclaw doctor checks it'
      : 'see the server log; theclaw doctor checks the store',
    cause: error,
  });
}
