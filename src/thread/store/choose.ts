import { resolve } from 'node:path';
import * as z from 'zod/mini';
import { loadYamlConfig } from '../../core/config.js';
import { usageError } from '../../core/errors.js';
import { homeConfigPath } from '../../core/layout.js';
import { isPostgresUrl } from './postgres-connect.js';
import { createSqliteStore } from './sqlite-store.js';
import type { ThreadStore } from './types.js';

/**
 * Which store a home's threads are in: `THECLAW_DATABASE_URL`, else `store:` in
 * `$THECLAW_HOME/config.yaml`, else the home's own SQLite files. The file may hold other keys
 * (it is the whole system's); only `store` is read here.
 */
const HomeConfigSchema = z.looseObject({ store: z.optional(z.string()) });

export interface StoreSetting {
  /** A PostgreSQL URL, or null for the home's SQLite files. */
  url: string | null;
  /** Where it was set, for messages: `THECLAW_DATABASE_URL`, the config file, or null (the default). */
  from: string | null;
}

export function storeSetting(home: string, env: NodeJS.ProcessEnv = process.env): StoreSetting {
  const fromEnv = env.THECLAW_DATABASE_URL;
  if (fromEnv) return { url: checked(fromEnv, 'THECLAW_DATABASE_URL'), from: 'THECLAW_DATABASE_URL' };
  const file = homeConfigPath(home);
  const { store } = loadYamlConfig(file, HomeConfigSchema);
  if (store === undefined || store === 'sqlite') return { url: null, from: null };
  return { url: checked(store, `store in ${file}`), from: file };
}

function checked(value: string, where: string): string {
  if (isPostgresUrl(value)) return value;
  throw usageError(`${where} is neither sqlite nor a PostgreSQL URL`, "write postgres://user@host:5432/database, or sqlite (the default) for the home's own files");
}

/** The store a home's threads are in (`storeSetting`). */
export async function openThreadStore(home: string, env: NodeJS.ProcessEnv = process.env): Promise<ThreadStore> {
  return openStoreAt(storeSetting(home, env).url ?? home);
}

/** A store by where it is: a PostgreSQL URL, or the path of a home whose threads are SQLite files. */
export async function openStoreAt(target: string, options: { maxConnections?: number } = {}): Promise<ThreadStore> {
  if (!isPostgresUrl(target)) return createSqliteStore(resolve(target));
  const { createPostgresStore } = await import('./postgres-store.js');
  return createPostgresStore(target, options);
}
