import { afterAll } from 'vitest';

/**
 * Run before every test file (vitest.config.ts `setupFiles`). The files of a worker share one
 * process (`isolate: false`), so what a file changes process-wide must not reach the next one.
 * The umask is the one the code itself changes: `runCli` makes what a tool creates private
 * (0o077), as a CLI's process should, and a test that runs a CLI in-process leaves it so; a later
 * file that hands files to another user (the mail servers' test setup) then writes them unreadable.
 */
const umask = process.umask();
afterAll(() => {
  process.umask(umask);
});
