import { spawn } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentDir, initAgent } from '../agent/index.js';
import { cliPath } from '../core/package.js';
import { followLogs } from './logs.js';
import { createTestHome, runTool, waitFor, type TestHome } from '../testing/index.js';

let t: TestHome;

beforeEach(async () => {
  t = createTestHome();
  await initAgent(t.home, 'helper');
  mkdirSync(join(t.home, 'logs'), { recursive: true });
  writeFileSync(
    join(t.home, 'logs', 'notifier.log'),
    '[2026-11-23T10:00:01.000Z] [INFO] notifier started\n[2026-11-23T10:00:04.000Z] [ERROR] outbound on t exited 1\nfailure 1; retrying at 2026-11-23T10:00:05.000Z\n',
  );
  writeFileSync(join(t.home, 'logs', 'xgw.log'), '[2026-11-23T10:00:02.000Z] [INFO] xgw started\n');
  writeFileSync(agentDir(t.home, 'helper').log, '[2026-11-23T10:00:03.000Z] [INFO] run: 1 message(s) from the inbox\n');
});

afterEach(() => t.cleanup());

describe('theclaw logs', () => {
  it('merges every log by time, each line prefixed with its log, an entry of several lines kept whole; one component, the newest n, or those since a time', async () => {
    const all = await runTool('theclaw', ['logs'], t.env);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout.split('\n').filter(Boolean)).toEqual([
      'notifier [2026-11-23T10:00:01.000Z] [INFO] notifier started',
      'xgw      [2026-11-23T10:00:02.000Z] [INFO] xgw started',
      'helper   [2026-11-23T10:00:03.000Z] [INFO] run: 1 message(s) from the inbox',
      'notifier [2026-11-23T10:00:04.000Z] [ERROR] outbound on t exited 1',
      'notifier failure 1; retrying at 2026-11-23T10:00:05.000Z',
    ]);
    expect((await runTool('theclaw', ['logs', 'xgw'], t.env)).stdout).toBe('xgw      [2026-11-23T10:00:02.000Z] [INFO] xgw started\n');
    expect((await runTool('theclaw', ['logs', '-n', '1'], t.env)).stdout.split('\n').filter(Boolean)).toHaveLength(2);
    // Everything above is older than a minute: nothing is left since then.
    expect((await runTool('theclaw', ['logs', '--since', '1m'], t.env)).stdout).toBe('');
    const unknown = await runTool('theclaw', ['logs', 'nobody'], t.env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('Error: there is no component nobody - choose one of: notifier, xgw, helper\n');
    const badSince = await runTool('theclaw', ['logs', '--since', 'soon'], t.env);
    expect(badSince.code).toBe(2);
    expect(badSince.stderr).toContain('is not a duration - pass e.g. --since 10m');
  });

  it('-f keeps one abort listener however long it follows', async () => {
    const stop = new AbortController();
    const log = agentDir(t.home, 'helper').log;
    let printed = 0;
    const following = followLogs([{ name: 'helper', file: log }], () => printed++, stop.signal, 1);
    // A line a poll at most: 30 printed lines are 30 polls or more.
    await waitFor(() => {
      appendFileSync(log, '[2026-11-23T10:00:09.000Z] [INFO] more\n');
      return printed >= 30;
    }, '30 polls');
    expect(getEventListeners(stop.signal, 'abort').length).toBeLessThanOrEqual(1);
    stop.abort();
    await following;
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('-f prints what a log gains until interrupted', async () => {
    const child = spawn(process.execPath, [cliPath('theclaw'), 'logs', 'helper', '-f', '-n', '1'], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      // Appended until the follower shows it: it may start reading after the first append.
      await waitFor(
        () => {
          appendFileSync(agentDir(t.home, 'helper').log, '[2026-11-23T10:00:09.000Z] [INFO] a new line: é\n');
          return stdout.includes('helper   [2026-11-23T10:00:09.000Z] [INFO] a new line: é');
        },
        'the appended line',
        10_000,
      );
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  });
});
