import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { socketPath } from '../core/home.js';
import { listenSocket, request } from '../core/ipc.js';
import { validate } from '../core/validate.js';
import { daemonLogFile } from '../core/layout.js';
import { startFixtureSite, type FixtureSite } from '../testing/fixture-site.js';
import { createTestHome, rejection, runTool, runToolAlone, type TestHome } from '../testing/index.js';
import { thinFetchRequest } from '../web/index.js';
import { serveBrowserProxy } from './proxy.js';
import { ServiceRequestSchema } from './types.js';

// `web fetch` as a thin client of the browser service: through a run's proxy (as in a turn) and
// through the service's own socket (the owner's terminal), against the loopback fixture site
// that web/config.yaml allows (127.0.0.1 only). Each CLI runs in a process of its own: the warm
// runner of runTool imports the full CLI, which the thin client is not.
let site: FixtureSite;
let test: TestHome;
let proxy: Awaited<ReturnType<typeof serveBrowserProxy>>;

const web = (args: string[], env: NodeJS.ProcessEnv = test.env) => runToolAlone('web', args, env);
const inTurn = () => ({ ...test.env, THECLAW_BROWSER_SOCKET: proxy.socket });
const serviceFetches = () => (existsSync(daemonLogFile(test.home, 'browser')) ? (readFileSync(daemonLogFile(test.home, 'browser'), 'utf8').match(/: web fetch$/gm)?.length ?? 0) : 0);

describe('web fetch through the browser service', { timeout: 60_000 }, () => {
  beforeAll(async () => {
    site = await startFixtureSite();
    test = createTestHome();
    mkdirSync(join(test.home, 'web'), { recursive: true });
    writeFileSync(join(test.home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
    mkdirSync(join(test.home, 'agents', 'a1'), { recursive: true });
    writeFileSync(join(test.home, 'agents', 'a1', 'config.yaml'), '{}\n');
    proxy = await serveBrowserProxy(test.home, 'a1', test.env);
  });
  afterAll(async () => {
    await proxy?.close();
    await runTool('browser', ['stop'], test.env);
    await site?.close();
    test?.cleanup();
  });

  it("in a turn is done by the service, into the turn's own agent's cache, printing what the CLI prints", async () => {
    const url = site.url('/article');
    const alone = await web(['fetch', url, '--max-chars', '300']); // no service yet: the full CLI
    const turn = await web(['fetch', url, '--max-chars=300'], inTurn());
    expect(turn).toEqual(alone);
    expect(alone.code).toBe(0);
    expect(serviceFetches()).toBe(1);
    // Cached for agent a1 (the proxy's), though the command's environment named no agent directory.
    expect(readdirSync(join(test.home, 'agents', 'a1', 'workdir', '.cache', 'web'))).toHaveLength(1);
    const json = await web(['fetch', url, '--json', '--raw'], inTurn());
    expect(json).toEqual(await web(['fetch', url, '--json', '--raw']));
  });

  it('refuses through the service what the guard refuses, in the words and exit code of the CLI', async () => {
    const private2 = `http://127.0.0.2:${new URL(site.url('/')).port}/article`;
    for (const args of [
      ['fetch', site.url(`/redirect?to=${encodeURIComponent(private2)}`)],
      ['fetch', 'http://169.254.169.254/latest', '--json'],
    ]) {
      const before = serviceFetches();
      const turn = await web(args, inTurn());
      expect(serviceFetches()).toBe(before + 1);
      // An agent's directory named outside a turn's proxy: the full CLI, in this process.
      expect(turn).toEqual(await web(args, { ...test.env, THECLAW_AGENT_DIR: join(test.home, 'agents', 'a1') }));
      expect(turn.code).toBe(2);
      expect(turn.stdout + turn.stderr).toMatch(/refused to fetch from (127\.0\.0\.2|169\.254\.169\.254)/);
    }
  });

  it("tells the sandbox a failed fetch's error without the run's secrets", async () => {
    const secret = 'sk-run-secret-0123456789';
    const run = await serveBrowserProxy(test.home, 'a1', { ...test.env, MODEL_API_KEY: secret });
    try {
      const answer = await rejection(request(run.socket, { op: 'fetch', url: site.url(`/status/404?key=${secret}`) }, { timeoutMs: 60_000 }));
      expect(answer.message).toBe(`${site.url('/status/404?key=[redacted]')} answered 404`);
    } finally {
      await run.close();
    }
  });

  it("takes from a turn no agent's name but the proxy's", async () => {
    const asked = request(proxy.socket, { op: 'fetch', url: site.url('/article'), agent: 'admin' });
    expect((await rejection(asked)).message).toMatch(/invalid fetch request: .*agent/);
  });

  it("from the owner's terminal goes to the running service, and to the CLI itself when the service's socket is stale", async () => {
    const before = serviceFetches();
    const through = await web(['fetch', site.url('/plain')]);
    expect(through.code).toBe(0);
    expect(serviceFetches()).toBe(before + 1);
    // A home whose service died and left its socket file: nothing listens, the full CLI answers.
    const stale = createTestHome();
    try {
      mkdirSync(join(stale.home, 'web'), { recursive: true });
      writeFileSync(join(stale.home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
      mkdirSync(join(socketPath(stale.home, 'browser'), '..'), { recursive: true });
      writeFileSync(socketPath(stale.home, 'browser'), '');
      expect(await web(['fetch', site.url('/plain')], stale.env)).toEqual(through);
    } finally {
      stale.cleanup();
    }
  });

  it('is done by the CLI itself when the running service predates fetches (an upgrade meanwhile)', async () => {
    const older = createTestHome();
    // The service as it was: every request but status read as a browser command.
    const server = await listenSocket(socketPath(older.home, 'browser'), (raw) =>
      validate(ServiceRequestSchema, raw, { what: 'browser request', kind: 'usage', suggestion: 'send {"op":"command","agent":<id>,"command":{...}}' }),
    );
    try {
      mkdirSync(join(older.home, 'web'), { recursive: true });
      writeFileSync(join(older.home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
      const result = await web(['fetch', site.url('/plain')], older.env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain(`[web content from ${site.url('/plain')}`);
    } finally {
      server.close();
      older.cleanup();
    }
  });
});

describe('thinFetchRequest', () => {
  it('takes a plain fetch with its flags as commander takes them, and leaves anything else to the full CLI', () => {
    expect(thinFetchRequest(['fetch', 'https://example.org/', '--max-chars', '50', '--raw', '--timeout=5', '--json', '--fresh', '--max-bytes', '9', '--max-chars', '60'])).toEqual({
      op: 'fetch',
      url: 'https://example.org/',
      max_chars: 60,
      raw: true,
      timeout_seconds: 5,
      json: true,
      fresh: true,
      max_bytes: 9,
    });
    for (const args of [
      ['search', 'ferry'],
      ['fetch'],
      ['fetch', 'https://example.org/', '--help'],
      ['fetch', 'https://example.org/', 'two'],
      ['fetch', 'https://example.org/', '--max-chars', '0'],
      ['fetch', 'https://example.org/', '--max-chars', '-5'],
      ['fetch', 'https://example.org/', '--max-chars'],
      ['fetch', 'https://example.org/', '--raw=yes'],
      ['fetch', 'https://example.org/', '--unknown'],
      ['fetch', '--', 'https://example.org/'],
      ['fetch', 'https://example.org/\uFFFD'],
      ['--verbose', 'fetch', 'https://example.org/'],
    ]) {
      expect(thinFetchRequest(args), args.join(' ')).toBeUndefined();
    }
  });
});
