import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, waitFor, type TestHome } from '../testing/index.js';
import { daemonHolder, startDaemonProcess } from './daemon.js';
import { isAlive } from './process.js';

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

describe('a daemon start that fails', () => {
  it('leaves no daemon behind when the daemon does not answer in time', async () => {
    // A daemon stuck before it listens: Node runs this before the CLI, and it blocks.
    const hang = join(t.home, 'hang.cjs');
    const pidFile = join(t.home, 'hung.pid');
    writeFileSync(hang, `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 120000);\n`);
    const start = startDaemonProcess(t.home, 'notifier', { ...t.env, NODE_OPTIONS: `--require ${hang}` }, { timeoutMs: 1_500 });
    await expect(start).rejects.toThrow(/^notifier did not answer within 1.5 s of starting, and was stopped$/);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    await waitFor(() => !isAlive({ pid, start: null }), 'the daemon that did not answer to be gone', 5_000);
    expect(daemonHolder(t.home, 'notifier')).toBeNull();
  });
});
