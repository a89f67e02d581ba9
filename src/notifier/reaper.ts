/**
 * The reaper (`dist/notifier/reaper.js`), forked by notifier when hosts share a PostgreSQL store.
 * There notifier holds the leases of the handlers it runs and renews them; a handler that outlived
 * its notifier would run on unrenewed, and once its lease expired another host would start the
 * same subscription beside it. So handlers (spawned in their own process groups, or warm runners,
 * which are group leaders too) must not outlive notifier: the reaper, in a process group of its
 * own, is told each handler's group as it starts and ends, and when its channel to notifier
 * closes (notifier exited or was killed, even with its whole group) it kills the groups still
 * listed and leaves. The lease then expires with no handler left to run under it.
 */
import type { ReaperCommand } from './reaper-client.js';

const groups = new Set<number>();

process.on('message', (message: ReaperCommand) => {
  if (message.type === 'watch') groups.add(message.pid);
  else groups.delete(message.pid);
});

process.on('disconnect', () => {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  process.exit(0);
});
