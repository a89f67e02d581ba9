import { isClawError } from '../core/errors.js';
import { loadWebConfig } from './config.js';
import type { WebContext } from './fetch.js';
import { braveKey, searchWeb } from './search.js';

/** What `theclaw doctor` says of the search provider; its own `Check` is made from this. */
export interface SearchHealth {
  status: 'ok' | 'fail';
  detail: string;
  fix?: string;
}

/**
 * The configured search provider: its key is present and (unless `offline`) it answers one tiny
 * query. Undefined when no provider is configured: search is optional.
 */
export async function checkSearchProvider(context: WebContext, offline: boolean): Promise<SearchHealth | undefined> {
  let provider: string | undefined;
  try {
    const search = loadWebConfig(context.home).search;
    if (!search) return undefined;
    provider = search.provider;
    if (search.provider === 'brave') braveKey(search, context.env);
    if (offline) return { status: 'ok', detail: `${provider} is configured (not asked: --offline)` };
    const started = Date.now();
    await searchWeb('theclaw', { count: 1, timeoutSeconds: 10 }, context);
    return { status: 'ok', detail: `${provider} answered a search in ${Date.now() - started} ms` };
  } catch (error) {
    return {
      status: 'fail',
      detail: provider ? `${provider}: ${(error as Error).message}` : (error as Error).message,
      fix: isClawError(error) && error.suggestion ? error.suggestion : 'check search in $THECLAW_HOME/web/config.yaml',
    };
  }
}
