import { isClawError } from '../core/errors.js';
import { inspectPostgresStore, storeSetting } from '../thread/index.js';
import type { Check } from './doctor-check.js';

/**
 * The thread store, when one is configured (`THECLAW_DATABASE_URL` or `store:` in config.yaml):
 * reachable, and of this version's schema. With none, the threads are the home's SQLite files,
 * which the other checks read.
 */
export async function checkStore(home: string, env: NodeJS.ProcessEnv): Promise<Check[]> {
  try {
    const setting = storeSetting(home, env);
    if (setting.url === null) return [];
    const state = await inspectPostgresStore(setting.url);
    const where = `PostgreSQL ${state.server} at ${state.location} (from ${setting.from})`;
    if (state.schema === null) {
      return [
        { name: 'store', status: 'warn', detail: `${where} holds no thread store yet`, fix: `copy the home's threads there: thread migrate --to ${state.location} (or start afresh: thread init)` },
      ];
    }
    if (state.schema !== state.expected) {
      return [
        {
          name: 'store',
          status: 'fail',
          detail: `${where} has schema version ${state.schema}, this theclaw knows ${state.expected}`,
          fix: state.schema > state.expected ? 'upgrade theclaw' : 'point it at another database',
        },
      ];
    }
    return [{ name: 'store', status: 'ok', detail: `${where}: ${state.threads} threads` }];
  } catch (error) {
    if (!isClawError(error)) throw error;
    return [{ name: 'store', status: 'fail', detail: error.message, fix: error.suggestion ?? 'check THECLAW_DATABASE_URL' }];
  }
}
