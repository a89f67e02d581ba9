import * as z from 'zod/mini';
import { ClawError } from '../core/errors.js';
import { webConfigPath } from '../core/layout.js';
import { loadWebConfig } from './config.js';
import type { WebContext } from './fetch.js';
import type { SearchConfig, SearchOptions, SearchResult } from './types.js';

/**
 * `web search`: one query to the provider the owner chose in web/config.yaml — Brave's Search API
 * (a key, in the variable `api_key_env` names) or a SearXNG instance (its JSON API, no key). The
 * provider's address is the owner's, so it is not put through the SSRF guard (a SearXNG on the
 * home network is the usual case); the result links are, when the agent fetches them.
 */

export const DEFAULT_COUNT = 5;
export const MAX_COUNT = 20;
export const BRAVE_API_ROOT = 'https://api.search.brave.com';
export const DEFAULT_BRAVE_KEY_ENV = 'BRAVE_API_KEY';
const TIMEOUT_SECONDS = 20;

export async function searchWeb(query: string, options: SearchOptions, context: WebContext): Promise<SearchResult[]> {
  const search = loadWebConfig(context.home).search;
  if (!search) {
    throw new ClawError('invalid', 'no search provider', {
      suggestion: `set search: { provider: brave } in ${webConfigPath(context.home)} and export ${DEFAULT_BRAVE_KEY_ENV} (a Brave Search API key), or search: { provider: searxng, api_root: <your SearXNG URL> }`,
    });
  }
  const count = Math.min(options.count ?? DEFAULT_COUNT, MAX_COUNT);
  const { url, headers } = searchRequest(search, query, count, context.env);
  const timeout = AbortSignal.timeout((options.timeoutSeconds ?? TIMEOUT_SECONDS) * 1000);
  let body: unknown;
  try {
    const response = await fetch(url, { headers, signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout });
    if (response.status !== 200) throw refusal(search, response.status, await errorDetail(response));
    body = await response.json();
  } catch (error) {
    if (error instanceof ClawError) throw error;
    if (options.signal?.aborted) throw new ClawError('aborted', 'the search was stopped', { cause: error });
    const what = timeout.aborted ? `did not answer within ${options.timeoutSeconds ?? TIMEOUT_SECONDS} s` : `cannot be reached (${(error as Error).message})`;
    throw new ClawError(timeout.aborted ? 'timeout' : 'upstream', `the search provider ${search.provider} at ${url.origin} ${what}`, {
      suggestion: 'try again later, or check search.api_root in web/config.yaml',
      cause: error,
    });
  }
  return parseResults(search.provider, body).slice(0, count);
}

/** The request a search sends (the key in a header, never in the URL). */
export function searchRequest(search: SearchConfig, query: string, count: number, env: NodeJS.ProcessEnv): { url: URL; headers: Record<string, string> } {
  switch (search.provider) {
    case 'brave': {
      const url = endpoint(search.api_root ?? BRAVE_API_ROOT, 'res/v1/web/search');
      url.search = new URLSearchParams({ q: query, count: String(count) }).toString();
      return { url, headers: { accept: 'application/json', 'x-subscription-token': braveKey(search, env) } };
    }
    case 'searxng': {
      if (!search.api_root)
        throw new ClawError('invalid', 'search.provider searxng has no api_root', { suggestion: 'set search.api_root to your SearXNG instance in web/config.yaml (http://host:8080)' });
      const url = endpoint(search.api_root, 'search');
      url.search = new URLSearchParams({ q: query, format: 'json' }).toString();
      return { url, headers: { accept: 'application/json' } };
    }
    default: {
      const never: never = search.provider;
      throw new Error(`unknown search provider ${never}`);
    }
  }
}

/** Brave's key, from the variable the config names. */
export function braveKey(search: SearchConfig, env: NodeJS.ProcessEnv): string {
  const variable = search.api_key_env ?? DEFAULT_BRAVE_KEY_ENV;
  const key = env[variable]?.trim();
  if (!key) {
    throw new ClawError('invalid', `the search provider brave has no key: ${variable} is not set`, {
      suggestion: `export ${variable}=... (a Brave Search API key) where web search runs (for an agent's turns: where notifier starts, which runs the agent; the key stays outside the sandbox)`,
    });
  }
  return key;
}

function endpoint(root: string, path: string): URL {
  return new URL(path, root.endsWith('/') ? root : `${root}/`);
}

/** Brave's `error.detail`, when its error body has one. */
async function errorDetail(body: { text(): Promise<string> }): Promise<string | undefined> {
  try {
    const detail = (JSON.parse(await body.text()) as { error?: { detail?: unknown } }).error?.detail;
    return typeof detail === 'string' ? detail.slice(0, 200) : undefined;
  } catch {
    return undefined;
  }
}

function refusal(search: SearchConfig, status: number, detail: string | undefined): ClawError {
  // Brave answers a wrong key with 422 SUBSCRIPTION_TOKEN_INVALID, not 401.
  const why =
    status === 401 || status === 403 || (status === 422 && search.provider === 'brave' && /token/i.test(detail ?? ''))
      ? search.provider === 'brave'
        ? { message: 'refused the key', suggestion: `check ${search.api_key_env ?? DEFAULT_BRAVE_KEY_ENV} (a Brave Search API subscription token)` }
        : { message: 'refused the JSON API', suggestion: "enable it in SearXNG's settings.yml: search: formats: [html, json]" }
      : status === 429
        ? { message: 'is rate limiting this key', suggestion: 'wait a little, or raise the plan' }
        : { message: `answered ${status}`, suggestion: 'try again later, or check search.api_root in web/config.yaml' };
  return new ClawError('upstream', `the search provider ${search.provider} ${why.message}${detail ? ` (${detail})` : ''}`, { status, suggestion: why.suggestion });
}

// The providers' answers, as much of them as a result needs; anything else in them is ignored.
const BraveResponse = z.object({
  web: z.optional(
    z.object({
      results: z.array(z.object({ title: z.string(), url: z.string(), description: z.optional(z.string()), age: z.optional(z.string()), page_age: z.optional(z.string()) })),
    }),
  ),
});
const SearxngResponse = z.object({
  results: z.array(z.object({ title: z.optional(z.string()), url: z.string(), content: z.optional(z.nullable(z.string())), publishedDate: z.optional(z.nullable(z.string())) })),
});

export function parseResults(provider: SearchConfig['provider'], body: unknown): SearchResult[] {
  const fail = () => new ClawError('upstream', `the search provider ${provider} answered in an unknown form`, { suggestion: 'check search.provider and search.api_root in web/config.yaml' });
  if (provider === 'brave') {
    const parsed = BraveResponse.safeParse(body);
    if (!parsed.success) throw fail();
    return (parsed.data.web?.results ?? []).map((r) => ({ title: stripTags(r.title), url: r.url, snippet: stripTags(r.description ?? ''), date: r.page_age ?? r.age ?? null }));
  }
  const parsed = SearxngResponse.safeParse(body);
  if (!parsed.success) throw fail();
  return parsed.data.results.map((r) => ({ title: stripTags(r.title ?? ''), url: r.url, snippet: stripTags(r.content ?? ''), date: r.publishedDate ?? null }));
}

/** Brave marks the query's words in snippets with <strong>; the entities come along. */
function stripTags(text: string): string {
  return text.replace(/<[^>]*>/g, '').replace(/&(amp|lt|gt|quot|#39);/g, (_, name: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[name]!);
}
