import postgres from 'postgres';
import { openStoreAt, type ThreadStore } from '../thread/index.js';
import { createTestHome, type TestHome } from './index.js';
import { startPostgres } from './postgres.js';

export type HostName = 'a' | 'b';

/**
 * Two "hosts" on one throwaway PostgreSQL database, as the tests of work spread over hosts run
 * them: two homes on this machine, with THECLAW_HOST `a` and `b` and the database's URL in their
 * environments, the store to read what they did, and a plain connection (`admin`) to its rows.
 * One per test file, started in `beforeAll` (its cluster costs seconds).
 */
export interface TwoHosts {
  homes: Record<HostName, TestHome>;
  envs: Record<HostName, NodeJS.ProcessEnv>;
  store: ThreadStore;
  admin: postgres.Sql;
  /** Closes the connections, removes the homes and stops the cluster. */
  stop(): Promise<void>;
}

/** Starts them on a new database `database`; `env` adds to a host's environment (a channel's token). */
export async function startTwoHosts(database: string, env: Partial<Record<HostName, NodeJS.ProcessEnv>> = {}): Promise<TwoHosts> {
  const cluster = await startPostgres();
  const homes: Partial<Record<HostName, TestHome>> = {};
  let store: ThreadStore | undefined;
  let admin: postgres.Sql | undefined;
  const stop = async () => {
    await admin?.end();
    await store?.close();
    for (const home of Object.values(homes)) home.cleanup();
    await cluster.stop();
  };
  try {
    const url = await cluster.createDatabase(database);
    for (const host of ['a', 'b'] as const) homes[host] = createTestHome();
    const envOf = (host: HostName) => ({ ...homes[host]!.env, THECLAW_DATABASE_URL: url, THECLAW_HOST: host, ...env[host] });
    store = await openStoreAt(url);
    admin = postgres(url, { max: 1, onnotice: () => {} });
    return { homes: homes as Record<HostName, TestHome>, envs: { a: envOf('a'), b: envOf('b') }, store, admin, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
