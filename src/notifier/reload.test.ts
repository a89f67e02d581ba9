import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { createTestHome, fixture, runTool, waitFor, type TestHome } from '../testing/index.js';
import type { NotifierReloadResult, NotifierStatus } from './types.js';

// `notifier reload` against the real daemon (`notifier start`) and real handler processes in a
// temp THECLAW_HOME.

let t: TestHome;
let threadDir: string;
let seen: string;
const BASE = 'sweep_interval_seconds: 0.5\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\n';

beforeEach(async () => {
  t = createTestHome();
  mkdirSync(join(t.home, 'notifier'), { recursive: true });
  writeConfig(`${BASE}handler_timeout_seconds: 20\nmax_concurrent_runs: 2\nrunners: { enabled: false }\n`);
  threadDir = join(t.home, 'work');
  seen = join(t.home, 'seen.txt');
  expect((await runTool('thread', ['init', threadDir], t.env)).code).toBe(0);
});

afterEach(async () => {
  await runTool('notifier', ['stop'], t.env);
  t.cleanup();
});

const configFile = () => join(t.home, 'notifier', 'config.yaml');
const writeConfig = (text: string) => writeFileSync(configFile(), text);
const notifier = (args: string[]) => runTool('notifier', args, t.env);
const status = async () => JSON.parse((await notifier(['status', '--json'])).stdout) as NotifierStatus;
const seenIds = () => (existsSync(seen) ? readFileSync(seen, 'utf8').trim().split('\n').filter(Boolean).map(Number) : []);

async function push(content: string): Promise<void> {
  const result = await runTool('thread', ['push', '--thread', threadDir, '--source', 'self', '--type', 'message', '--content', content], t.env);
  expect(result.code, result.stderr).toBe(0);
}

describe('notifier reload', () => {
  it('applies a changed config to the running daemon: its run limit, warm runners and the time limit of the next run', async () => {
    expect((await notifier(['start'])).code).toBe(0);
    const handler = joinCommand([process.execPath, fixture('handler.mjs'), seen, '--delay-ms', '3000']);
    expect((await runTool('thread', ['subscribe', '--thread', threadDir, '--consumer', 'worker', '--handler', handler], t.env)).code).toBe(0);
    expect((await status()).runs).toMatchObject({ limit: 2, runners: 0 });

    writeConfig(`${BASE}handler_timeout_seconds: 1\nmax_concurrent_runs: 5\nrunners: { enabled: true, idle: 2 }\n`);
    expect((await notifier(['status'])).stdout).toContain(`${configFile()} changed since notifier loaded it - apply it with: notifier reload`);
    const reload = await notifier(['reload', '--json']);
    expect(reload.code, reload.stderr).toBe(0);
    expect(JSON.parse(reload.stdout) as NotifierReloadResult).toMatchObject({ changed: ['handler_timeout_seconds', 'max_concurrent_runs', 'runners'] });
    expect((await notifier(['status'])).stdout).not.toContain('changed since');
    expect((await status()).runs?.limit).toBe(5);
    await waitFor(async () => (await status()).runs?.runners === 2, 'the two warm runners');

    // The next run gets the new time limit: 1 s, which the handler's 3 s outlast.
    await push('slow');
    await waitFor(async () => (await status()).subscriptions[0]?.last_error?.includes('timed out after'), 'the run killed for its time', 20_000);
    expect(seenIds()).toEqual([]);
  });

  it('refuses a config that does not load, and runs on with the one it had', async () => {
    expect((await notifier(['start'])).code).toBe(0);
    writeConfig(`${BASE}max_concurrent_runs: many\n`);
    const reload = await notifier(['reload']);
    expect(reload.code).toBe(1);
    expect(reload.stderr).toMatch(/^Error: invalid .*notifier\/config\.yaml: max_concurrent_runs: must be a number, got "many" - fix the listed fields or remove them to use the defaults\n$/);
    expect((await status()).runs?.limit).toBe(2);
    expect((await notifier(['status'])).stdout).toContain('changed since notifier loaded it');

    const handler = joinCommand([process.execPath, fixture('handler.mjs'), seen]);
    expect((await runTool('thread', ['subscribe', '--thread', threadDir, '--consumer', 'worker', '--handler', handler], t.env)).code).toBe(0);
    await push('still dispatched');
    await waitFor(() => seenIds().length === 1, 'the event handled');
  });

  it('says so when the daemon is not running', async () => {
    const reload = await notifier(['reload']);
    expect(reload.code).toBe(1);
    expect(reload.stderr).toBe('Error: notifier is not running - start it with notifier start; it reads its config when it starts\n');
  });
});
