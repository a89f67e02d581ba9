import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { daemonHolder, startDaemonProcess, stopDaemonProcess } from '../core/daemon.js';
import { isAlive } from '../core/process.js';
import { createTestHome, waitFor, type TestHome } from '../testing/index.js';
import { browserServiceStatus } from './client.js';

// The browser service's own life, without a browser open (no Chromium needed).

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
});
afterEach(async () => {
  await stopDaemonProcess(t.home, 'browser').catch(() => {});
  t.cleanup();
});

describe('browser service', () => {
  it('answers status with no browser open, and stops itself once its home is removed', async () => {
    const { pid } = await startDaemonProcess(t.home, 'browser', t.env);
    expect(await browserServiceStatus(t.home)).toEqual({ pid, browsers: [] });
    const holder = daemonHolder(t.home, 'browser')!;
    rmSync(t.home, { recursive: true, force: true });
    await waitFor(() => !isAlive(holder), 'the service stopped after its home went', 30_000);
  });

  it('is no service at all in status when it does not run', async () => {
    expect(await browserServiceStatus(t.home)).toBeNull();
  });
});
