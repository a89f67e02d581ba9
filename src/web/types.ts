import * as z from 'zod/mini';

/**
 * The nouns of `web`: a page fetched and made readable, a search and its results, and the config
 * in `$THECLAW_HOME/web/config.yaml` that says which private hosts may be fetched and which
 * search provider answers.
 */

export const SEARCH_PROVIDERS = ['brave', 'searxng'] as const;
export type SearchProviderName = (typeof SEARCH_PROVIDERS)[number];

export const WebConfigSchema = z.strictObject({
  /**
   * Private addresses `web fetch` may reach after all: an IP, a CIDR (`192.168.1.0/24`) or a host
   * name (whatever private addresses it resolves to). The cloud metadata address stays refused.
   */
  allow_private: z._default(z.array(z.string().check(z.minLength(1))), []),
  /** How long a fetched page is answered from the cache; 0: never cached. */
  cache_minutes: z._default(z.number().check(z.nonnegative(), z.maximum(24 * 60)), 15),
  search: z.optional(
    z.strictObject({
      provider: z.enum(SEARCH_PROVIDERS),
      /** Brave: default https://api.search.brave.com; SearXNG: the instance's URL (required). */
      api_root: z.optional(z.url({ protocol: /^https?$/ })),
      /** The variable holding Brave's key (never the key itself: the config is readable in a sandbox). */
      api_key_env: z.optional(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/))),
    }),
  ),
});
export type WebConfig = z.output<typeof WebConfigSchema>;
export type SearchConfig = NonNullable<WebConfig['search']>;

export interface FetchOptions {
  /** Print the body as it came (decoded to text), without the reader. Default: false. */
  raw?: boolean;
  /** At most this many characters of text; the rest is cut with a note. Default: 20000 (~5k tokens). */
  maxChars?: number;
  /** Whole request, redirects included. Default: 30. */
  timeoutSeconds?: number;
  /** The body's size cap, before and after decompression. Default: 5 MB. */
  maxBytes?: number;
  /** Fetch again even when the cache has the page. Default: false. */
  fresh?: boolean;
  signal?: AbortSignal;
}

/** What `web fetch` read; its `--json` form. */
export interface Page {
  /** As asked. */
  url: string;
  /** After redirects. */
  final_url: string;
  status: number;
  content_type: string;
  title: string | null;
  byline: string | null;
  /** Markdown (HTML), the body as it came (text, JSON, Markdown, `--raw`) or the text of a PDF. */
  text: string;
  /** Characters cut by `--max-chars`; 0 when the whole text is there. */
  truncated_chars: number;
}

export interface SearchOptions {
  /** Results wanted. Default: 5; at most 20. */
  count?: number;
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

/** One search result; its `--json` form. */
export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
  /** As the provider gives it (an ISO date, or Brave's "3 days ago"); null when it gives none. */
  date: string | null;
}
