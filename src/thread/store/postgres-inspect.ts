import { connectPostgres, postgresFailure } from './postgres-connect.js';
import { readSchemaVersion, SCHEMA_VERSION } from './postgres-schema.js';

/** What `theclaw doctor` says of a PostgreSQL store. */
export interface PostgresStoreState {
  /** The URL without its password. */
  location: string;
  /** The server's version number, e.g. `15.18`. */
  server: string;
  /** The thread store's schema version there, or null before the first thread is made. */
  schema: number | null;
  /** The version this tool writes. */
  expected: number;
  /** Threads in the store (0 without a schema). */
  threads: number;
}

/** Connects and reads the store's state, writing nothing; a failure is a ClawError naming the store. */
export async function inspectPostgresStore(url: string): Promise<PostgresStoreState> {
  const { sql, location } = await connectPostgres(url, { maxConnections: 1 });
  try {
    // `15.18 (Debian 15.18-0+deb12u1)`: the number is what matters.
    const server = (await sql<{ server: string }[]>`SELECT current_setting('server_version') AS server`)[0]!.server.split(' ')[0]!;
    const schema = await readSchemaVersion(sql);
    const threads = schema === null ? 0 : (await sql<{ count: number }[]>`SELECT COUNT(*) AS count FROM theclaw.threads`)[0]!.count;
    return { location, server, schema, expected: SCHEMA_VERSION, threads };
  } catch (error) {
    throw postgresFailure(error, location);
  } finally {
    await sql.end({ timeout: 1 });
  }
}
