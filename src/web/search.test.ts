import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeBrave, startFakeSearxng, type FakeSearchServer } from '../testing/fake-search.js';
import { createTestHome, expectRefused, rejection, runTool, type TestHome } from '../testing/index.js';
import { request } from '../core/ipc.js';
import { searchWeb } from './search.js';
import { searchFromHere, serveWebSearch, WEB_SEARCH_SOCKET_ENV } from './search-door.js';
import { checkSearchProvider } from './search-check.js';

const KEY = 'BSA-test-key-0123456789';
let brave: FakeSearchServer;
let searx: FakeSearchServer;
let home: string;

beforeAll(async () => {
  [brave, searx] = await Promise.all([startFakeBrave({ key: KEY }), startFakeSearxng()]);
});
afterAll(() => Promise.all([brave.close(), searx.close()]));
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'theclaw-web-'));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

function configure(home: string, search: string): void {
  mkdirSync(join(home, 'web'), { recursive: true });
  writeFileSync(join(home, 'web', 'config.yaml'), `search: ${search}\n`);
}

describe('searchWeb', () => {
  it('asks Brave with the key in X-Subscription-Token and the count, and reads web.results', async () => {
    configure(home, `{ provider: brave, api_root: "${brave.apiRoot}", api_key_env: MY_BRAVE }`);
    const results = await searchWeb('brest ferry', { count: 2 }, { home, env: { MY_BRAVE: KEY } });
    expect(results).toEqual([
      { title: 'brest ferry - timetable', url: 'https://ferries.example/brest', snippet: 'Sailings for brest ferry, daily at 07:45.', date: '2026-11-20T08:00:00' },
      { title: 'About brest ferry', url: 'https://wiki.example/Brest', snippet: 'Brest is a port city in Brittany.', date: null },
    ]);
    const request = brave.requests.at(-1)!;
    expect(request.url).toBe('/res/v1/web/search?q=brest+ferry&count=2');
    expect(request.headers['x-subscription-token']).toBe(KEY);
  });

  it('says Brave refused the key, and that a missing key is missing, without sending it', async () => {
    configure(home, `{ provider: brave, api_root: "${brave.apiRoot}" }`);
    const refused = await rejection(searchWeb('x', {}, { home, env: { BRAVE_API_KEY: 'wrong' } }));
    expect([refused.kind, refused.status, refused.message]).toEqual(['upstream', 422, 'the search provider brave refused the key (The provided subscription token is invalid.)']);
    const before = brave.requests.length;
    const missing = await rejection(searchWeb('x', {}, { home, env: {} }));
    expect(missing.message).toBe('the search provider brave has no key: BRAVE_API_KEY is not set');
    expect(brave.requests.length).toBe(before);
  });

  it("asks SearXNG's JSON API and reads results[], at most count of them", async () => {
    configure(home, `{ provider: searxng, api_root: "${searx.apiRoot}/" }`);
    const results = await searchWeb('brest', { count: 3 }, { home, env: {} });
    expect(searx.requests.at(-1)!.url).toBe('/search?q=brest&format=json');
    expect(results.map((r) => [r.url, r.date])).toEqual([
      ['https://ferries.example/brest', '2026-11-20T08:00:00'],
      ['https://wiki.example/Brest', null],
      ['https://news.example/harbour', '2026-11-25T12:30:00'],
    ]);
    expect(await searchWeb('brest', { count: 1 }, { home, env: {} })).toHaveLength(1);
  });

  it('tells how to enable the JSON API of a SearXNG that refuses it', async () => {
    const closed = await startFakeSearxng({ jsonEnabled: false });
    try {
      configure(home, `{ provider: searxng, api_root: "${closed.apiRoot}" }`);
      const error = await rejection(searchWeb('x', {}, { home, env: {} }));
      expect(error.message).toBe('the search provider searxng refused the JSON API');
      expect(error.suggestion).toMatch(/formats: \[html, json\]/);
    } finally {
      await closed.close();
    }
  });

  it('refuses with how to set one when no provider is configured', async () => {
    const error = await rejection(searchWeb('x', {}, { home, env: {} }));
    expect(error.message).toBe('no search provider');
    expect(error.suggestion).toMatch(/search: \{ provider: brave \}.*BRAVE_API_KEY.*provider: searxng/);
  });
});

describe('checkSearchProvider', () => {
  it('is silent without a provider, asks one tiny query unless offline, and fails a missing key', async () => {
    expect(await checkSearchProvider({ home, env: {} }, false)).toBeUndefined();
    configure(home, `{ provider: brave, api_root: "${brave.apiRoot}" }`);
    const before = brave.requests.length;
    expect(await checkSearchProvider({ home, env: { BRAVE_API_KEY: KEY } }, true)).toMatchObject({ status: 'ok', detail: 'brave is configured (not asked: --offline)' });
    expect(brave.requests.length).toBe(before);
    expect(await checkSearchProvider({ home, env: { BRAVE_API_KEY: KEY } }, false)).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^brave answered a search in \d+ ms$/) });
    expect(brave.requests.at(-1)!.url).toBe('/res/v1/web/search?q=theclaw&count=1');
    expect(await checkSearchProvider({ home, env: {} }, true)).toMatchObject({ status: 'fail', detail: 'brave: the search provider brave has no key: BRAVE_API_KEY is not set' });
  });
});

describe("web search from a turn, through its run's socket", () => {
  it('searches with the key of the run, the caller having none, and refuses a request of another shape', async () => {
    configure(home, `{ provider: brave, api_root: "${brave.apiRoot}" }`);
    const door = await serveWebSearch(home, { BRAVE_API_KEY: KEY });
    try {
      const results = await searchFromHere('brest ferry', { count: 1 }, { home, env: { [WEB_SEARCH_SOCKET_ENV]: door.socket } });
      expect(results.map((result) => result.url)).toEqual(['https://ferries.example/brest']);
      expect(brave.requests.at(-1)!.headers['x-subscription-token']).toBe(KEY);
      expect(await rejection(request(door.socket, { op: 'search', query: 'x', api_key_env: 'HOME' }))).toMatchObject({ kind: 'usage', message: expect.stringMatching(/^invalid search request/) });
    } finally {
      await door.close();
    }
  });
});

describe('web search (the CLI)', () => {
  let test: TestHome;
  beforeEach(() => {
    test = createTestHome();
  });
  afterEach(() => test.cleanup());

  it('prints numbered results with their URLs, or JSON, from SearXNG', async () => {
    configure(test.home, `{ provider: searxng, api_root: "${searx.apiRoot}" }`);
    const text = await runTool('web', ['search', 'brest', 'ferry', '--count', '2'], test.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('1. brest ferry - timetable (2026-11-20T08:00:00)\n   https://ferries.example/brest\n   Sailings for brest ferry, daily at 07:45.\n');
    expect(text.stdout).toContain('2. About brest ferry\n   https://wiki.example/Brest\n');
    const json = await runTool('web', ['search', 'brest', '--json'], test.env);
    expect(JSON.parse(json.stdout)).toHaveLength(3);
  });

  it('refuses with one error line when no provider is configured', async () => {
    expectRefused(await runTool('web', ['search', 'x'], test.env), 1, /^Error: no search provider - set search: \{ provider: brave \}/);
  });
});
