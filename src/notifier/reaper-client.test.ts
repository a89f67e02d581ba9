import { describe, expect, it } from 'vitest';
import type { Logger } from '../core/logger.js';
import { waitFor } from '../testing/index.js';
import { Reaper, reaperMayRun } from './reaper-client.js';

// A notifier started after another one of its host died frees that one's leases only once its
// reaper is gone (pg-dispatcher.ts): until then the dead notifier's handlers may still be running.
// That the reaper kills them is src/notifier/postgres.test.ts's to show.

describe("notifier's reaper", () => {
  it('is found by the pid of the notifier it serves while it runs, and no longer once it left', async () => {
    expect(reaperMayRun(process.pid)).toBe(false);
    const errors: string[] = [];
    const log = (message: string) => void errors.push(message);
    const reaper = new Reaper({ debug: () => {}, info: () => {}, warn: log, error: log } satisfies Logger);
    try {
      await waitFor(() => reaperMayRun(process.pid), 'the reaper to run', 10_000);
      expect(reaperMayRun(process.pid + 1_000_000)).toBe(false); // another notifier's
    } finally {
      reaper.stop(); // as notifier's end closes its channel
    }
    await waitFor(() => !reaperMayRun(process.pid), 'the reaper to leave', 10_000);
    expect(errors).toEqual([]);
  });
});
