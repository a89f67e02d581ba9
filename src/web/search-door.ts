import * as z from 'zod/mini';
import { listenPrivateSocket, request } from '../core/ipc.js';
import { validate } from '../core/validate.js';
import type { WebContext } from './fetch.js';
import { MAX_COUNT, searchWeb } from './search.js';
import type { SearchOptions, SearchResult } from './types.js';

/**
 * `web search` from an agent's turn. The provider's key (Brave's) must never enter the sandbox,
 * so an agent run serves its turns this socket (bound into the sandbox, as the browser's is):
 * the sandboxed `web search` sends the query, and the run, outside with the owner's environment,
 * asks the provider and answers the results. The key stays in the run's memory.
 */
export const WEB_SEARCH_SOCKET_ENV = 'THECLAW_WEB_SEARCH_SOCKET';

const SearchRequestSchema = z.strictObject({
  op: z.literal('search'),
  query: z.string().check(z.minLength(1), z.maxLength(2000)),
  count: z.optional(z.number().check(z.int(), z.positive(), z.maximum(MAX_COUNT))),
});

/** A provider's slowest answer, and some. */
const SEARCH_TIMEOUT_MS = 60_000;

/** The run's side: searches for its turns with its own environment (`env`, which holds the key). */
export function serveWebSearch(home: string, env: NodeJS.ProcessEnv): Promise<{ socket: string; close: () => Promise<void> }> {
  return listenPrivateSocket('search', async (raw) => {
    const { query, count } = validate(SearchRequestSchema, raw, { what: 'search request', kind: 'usage', suggestion: 'send {"op":"search","query":"..."}' });
    return searchWeb(query, { count }, { home, env });
  });
}

/** A search from wherever `web search` runs: in a turn through the run's socket, else here. */
export function searchFromHere(query: string, options: SearchOptions, context: WebContext): Promise<SearchResult[]> {
  const socket = context.env[WEB_SEARCH_SOCKET_ENV];
  if (!socket) return searchWeb(query, options, context);
  return request<SearchResult[]>(socket, { op: 'search', query, ...(options.count ? { count: Math.min(options.count, MAX_COUNT) } : {}) }, { timeoutMs: SEARCH_TIMEOUT_MS, signal: options.signal });
}
