import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isAlive, type ProcessIdentity } from '../../core/process.js';
import { createTestHome, waitFor, type TestHome } from '../../testing/index.js';
import { spawnLaunch, startHandler } from './handler.js';
import { initThread, type Thread } from '../thread.js';

let t: TestHome;
let thread: Thread;
const strays: number[] = [];

beforeEach(() => {
  t = createTestHome();
  thread = initThread(join(t.home, 'thread'), { home: t.home });
});

afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  thread.close();
  t.cleanup();
});

describe('startHandler', () => {
  it('kills the started handler and frees the lease when the lease cannot be handed to it', async () => {
    thread.subscribe({ consumer: 'worker', handler: 'sleep 300' });
    thread.push({ source: 'self', type: 'message', content: 'x' });
    let handler: ProcessIdentity | undefined;
    // As if the database failed at that moment (disk full, I/O error).
    thread.dispatch.transferLease = (_consumer, _from, to) => {
      handler = to;
      strays.push(to.pid);
      throw new Error('disk I/O error');
    };
    const result = startHandler(thread, thread.consumer('worker')!, { home: t.home, launch: spawnLaunch() });
    expect(result).toEqual({ started: false, reason: 'spawn_failed', error: 'cannot hand the lease to the handler: disk I/O error' });
    expect(handler).toBeDefined();
    await waitFor(() => !isAlive(handler!), 'the handler to be killed', 5_000);
    expect(thread.consumer('worker')!.lease).toBeNull();
  });
});
