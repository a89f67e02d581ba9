import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Fake search providers on loopback, answering in their real wire formats, so `web search` and
 * doctor run their real client:
 *
 *   const brave = await startFakeBrave({ key: 'k' });    // GET /res/v1/web/search?q=&count=
 *   const searx = await startFakeSearxng();              // GET /search?q=&format=json
 *   brave.apiRoot; brave.requests; await brave.close();
 *
 * Brave (Search API): the key in X-Subscription-Token, else 422 SUBSCRIPTION_TOKEN_INVALID as
 * Brave sends it; `web.results[]` of title, url, description (query words in <strong>), age,
 * page_age, meta_url and the rest. SearXNG: `results[]` of url, title, content, publishedDate
 * (null when unknown), engine…; 403 unless `format=json` is enabled (`jsonEnabled`).
 * Both answer `results(query)` results, default three about the query.
 */

export interface FakeResult {
  title: string;
  url: string;
  snippet: string;
  /** ISO date; absent: the result has none. */
  date?: string;
}

export interface FakeSearchServer {
  apiRoot: string;
  /** Each request as received: its path with query, and headers. */
  requests: { url: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

export function defaultResults(query: string): FakeResult[] {
  return [
    { title: `${query} - timetable`, url: 'https://ferries.example/brest', snippet: `Sailings for ${query}, daily at 07:45.`, date: '2026-11-20T08:00:00' },
    { title: `About ${query}`, url: 'https://wiki.example/Brest', snippet: 'Brest is a port city in Brittany.' },
    { title: 'Harbour news', url: 'https://news.example/harbour', snippet: 'Works at pier 3 end in December.', date: '2026-11-25T12:30:00' },
  ];
}

export async function startFakeBrave(options: { key: string; results?: (query: string) => FakeResult[] }): Promise<FakeSearchServer> {
  const results = options.results ?? defaultResults;
  return listen((req, res, url) => {
    if (url.pathname !== '/res/v1/web/search') return json(res, 404, { type: 'ErrorResponse', error: { status: 404, code: 'NOT_FOUND', detail: 'Not found' } });
    if (req.headers['x-subscription-token'] !== options.key) {
      return json(res, 422, {
        type: 'ErrorResponse',
        error: { id: 'b1f3c0e2', status: 422, code: 'SUBSCRIPTION_TOKEN_INVALID', detail: 'The provided subscription token is invalid.', meta: { component: 'authentication' } },
        time: Math.floor(Date.now() / 1000),
      });
    }
    const query = url.searchParams.get('q') ?? '';
    const count = Math.min(Number(url.searchParams.get('count') ?? 20), 20);
    json(res, 200, {
      query: { original: query, show_strict_warning: false, is_navigational: false, spellcheck_off: true, country: 'us', bad_results: false, should_fallback: false, more_results_available: true },
      mixed: { type: 'mixed', main: [], top: [], side: [] },
      type: 'search',
      web: {
        type: 'search',
        family_friendly: true,
        results: results(query)
          .slice(0, count)
          .map((r) => ({
            title: r.title,
            url: r.url,
            is_source_local: false,
            is_source_both: false,
            description: r.snippet.replace(query, `<strong>${query}</strong>`),
            ...(r.date ? { page_age: r.date, age: new Date(r.date).toDateString() } : {}),
            profile: { name: new URL(r.url).hostname, url: r.url, long_name: new URL(r.url).hostname, img: '' },
            language: 'en',
            family_friendly: true,
            type: 'search_result',
            subtype: 'generic',
            is_live: false,
            meta_url: { scheme: 'https', netloc: new URL(r.url).hostname, hostname: new URL(r.url).hostname, favicon: '', path: new URL(r.url).pathname },
          })),
      },
    });
  });
}

export async function startFakeSearxng(options: { jsonEnabled?: boolean; results?: (query: string) => FakeResult[] } = {}): Promise<FakeSearchServer> {
  const results = options.results ?? defaultResults;
  return listen((_req, res, url) => {
    if (url.pathname !== '/search') return text(res, 404, 'Not Found');
    if (url.searchParams.get('format') !== 'json' || options.jsonEnabled === false) return text(res, 403, 'Forbidden');
    const query = url.searchParams.get('q') ?? '';
    json(res, 200, {
      query,
      number_of_results: 0,
      results: results(query).map((r, i) => ({
        url: r.url,
        title: r.title,
        content: r.snippet,
        publishedDate: r.date ?? null,
        thumbnail: '',
        engine: 'duckduckgo',
        template: 'default.html',
        parsed_url: ['https', new URL(r.url).hostname, new URL(r.url).pathname, '', '', ''],
        img_src: '',
        priority: '',
        engines: ['duckduckgo'],
        positions: [i + 1],
        score: 1 / (i + 1),
        category: 'general',
      })),
      answers: [],
      corrections: [],
      infoboxes: [],
      suggestions: [],
      unresponsive_engines: [],
    });
  });
}

async function listen(handle: (req: IncomingMessage, res: ServerResponse, url: URL) => void): Promise<FakeSearchServer> {
  const requests: FakeSearchServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ url: req.url ?? '/', headers: req.headers });
    handle(req, res, new URL(req.url ?? '/', 'http://fake'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    apiRoot: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain' });
  res.end(body);
}
