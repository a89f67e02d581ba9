import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent/lifecycle.js';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { Check } from './doctor.js';
import type { SystemStatus } from './status.js';

/**
 * A conversation whose events.db is written over in its middle (its header intact, so it opens and
 * SQLite finds the damage only on reading a page: "database disk image is malformed") is named by
 * `theclaw status`, `status --json` and `doctor` with its path and fix, and the rest is still
 * shown. Before, the first read of it threw and each of them failed whole with "this is unexpected".
 */

let t: TestHome | undefined;

afterEach(() => {
  t?.cleanup();
  t = undefined;
});

/** A conversation of admin's with `events` messages and one error record. */
function conversation(home: string, peer: string, events: number): string {
  const path = join(home, 'agents', 'admin', 'threads', 'peers', `telegram.main.${peer}`);
  const thread = openThread(path, { home, create: true });
  try {
    thread.pushBatch(Array.from({ length: events }, (_, n) => ({ type: 'message', source: `telegram:main:${peer}`, content: JSON.stringify({ text: `${'words '.repeat(40)}${n}` }) })));
    thread.push({ type: 'record', subtype: 'error', source: 'agent:admin', content: JSON.stringify({ stage: 'model', error: `the model failed for ${peer}` }) });
  } finally {
    thread.close();
  }
  return path;
}

describe('a conversation damaged in its middle', () => {
  it('is named by status, status --json and doctor with its path and fix, and the other conversation is still read', async () => {
    t = createTestHome();
    expect((await runTool('agent', ['init', 'admin'], t.env)).code).toBe(0);
    const damagedPath = conversation(t.home, '1', 400);
    conversation(t.home, '2', 10);
    const file = join(damagedPath, 'events.db');
    for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    const fd = openSync(file, 'r+');
    const garbage = Buffer.from('a disk wrote garbage over these pages. '.repeat(4000));
    writeSync(fd, garbage, 0, garbage.length, 4096); // past the header page: it still opens
    closeSync(fd);

    const json = await runTool('theclaw', ['status', '--json'], t.env);
    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout) as SystemStatus;
    const admin = status.agents.find((a) => a.id === 'admin') as AgentStatus;
    expect(admin.damaged).toEqual([
      {
        thread: 'threads/peers/telegram.main.1',
        file,
        error: 'database disk image is malformed',
        fix: `move it away to start the conversation afresh: mv ${JSON.stringify(damagedPath)} ${JSON.stringify(join(t.home, 'agents', 'admin', 'damaged-peers-telegram.main.1'))}`,
      },
    ]);
    // The other conversation is still read.
    expect(status.recent_errors.map((e) => [e.thread, e.error])).toEqual([['threads/peers/telegram.main.2', 'the model failed for 2']]);

    const text = await runTool('theclaw', ['status'], t.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`DAMAGED thread threads/peers/telegram.main.1 is damaged: ${file} (database disk image is malformed) - move it away`);
    expect(text.stdout).toContain('the model failed for 2');

    const doctor = await runTool('theclaw', ['doctor', '--offline', '--json'], t.env);
    expect(doctor.code, doctor.stderr).toBe(1);
    const checks = (JSON.parse(doctor.stdout) as { checks: Check[] }).checks;
    expect(checks.find((check) => check.name === 'threads')).toEqual({
      name: 'threads',
      status: 'fail',
      detail: `damaged, their conversations get no answer: admin/threads/peers/telegram.main.1 (${file}: database disk image is malformed)`,
      fix: admin.damaged[0]!.fix,
    });
    expect(checks.find((check) => check.name === 'errors')).toMatchObject({ status: 'warn', detail: expect.stringContaining('the model failed for 2') as string });
    expect(doctor.stderr).not.toMatch(/unexpected/);
  });
});
