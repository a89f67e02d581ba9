import { ClawError } from '../core/errors.js';
import { cacheDir, cachedPage, cachePage } from './cache.js';
import { loadWebConfig } from './config.js';
import { checkUrl, createAddressGuard } from './guard.js';
import { getGuarded } from './http.js';
import { readResponse } from './reader.js';
import type { FetchOptions, Page } from './types.js';

/** Sized for a model's context: ~5k tokens of a page, the gist of most articles. */
export const DEFAULT_MAX_CHARS = 20_000;
export const DEFAULT_MAX_BYTES = 5_000_000;
export const DEFAULT_TIMEOUT_SECONDS = 30;

/** Where `web` runs: the home (its config and cache) and the environment (an agent's dir, keys). */
export interface WebContext {
  home: string;
  env: NodeJS.ProcessEnv;
}

/** `web fetch`: the page at `url`, readable, through the guard and the cache. */
export async function fetchPage(url: string, options: FetchOptions, context: WebContext): Promise<Page> {
  const config = loadWebConfig(context.home);
  const guard = createAddressGuard(config.allow_private);
  const href = checkUrl(url, guard).href;
  const raw = options.raw ?? false;
  const dir = cacheDir(context.home, context.env);
  const maxAgeMs = config.cache_minutes * 60_000;
  let page = options.fresh || maxAgeMs === 0 ? undefined : cachedPage(dir, href, raw, maxAgeMs);
  if (!page) {
    const response = await getGuarded(href, guard, {
      timeoutMs: (options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000,
      maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
      signal: options.signal,
    });
    if (response.status >= 400) {
      throw new ClawError('upstream', `${response.url.href} answered ${response.status}`, { status: response.status, suggestion: 'check the address, or try again later' });
    }
    const { title, byline, text } = await readResponse(response, raw);
    page = { url: href, final_url: response.url.href, status: response.status, content_type: response.mediaType, title, byline, text, truncated_chars: 0 };
    if (maxAgeMs > 0) cachePage(dir, page, raw, maxAgeMs);
  }
  return truncate(page, options.maxChars ?? DEFAULT_MAX_CHARS);
}

function truncate(page: Page, maxChars: number): Page {
  if (page.text.length <= maxChars) return page;
  return { ...page, text: page.text.slice(0, maxChars), truncated_chars: page.text.length - maxChars };
}
