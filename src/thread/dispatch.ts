import type { ChildProcess, StdioOptions } from 'node:child_process';
import { spawnCommand } from '../core/command.js';
import { identify, killGroup } from '../core/process.js';
import type { Thread } from './thread.js';
import type { ConsumerInfo } from './types.js';

export interface StartHandlerOptions {
  home: string;
  /** Environment of the handler, before the THECLAW_* variables. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where the handler's output goes. Default: ignored. */
  stdio?: StdioOptions;
}

export type StartResult =
  | { started: true; child: ChildProcess & { pid: number } }
  /** Nothing pending, not subscribed, or another live process holds the lease. */
  | { started: false; reason: 'idle' | 'leased' }
  /** The handler could not be started (program not found, not executable). */
  | { started: false; reason: 'spawn_failed'; error: string };

/**
 * Starts a subscription's handler when events are pending and nobody holds its lease. The lease
 * is taken in the dispatcher's name first and handed to the handler once it runs, so no moment
 * exists in which a second dispatcher (another `thread dispatch`, a restarted notifier) could
 * start the same consumer. The handler runs in its own process group (so a timeout can kill it
 * with its children), as argv without a shell, with THECLAW_HOME, THECLAW_THREAD and
 * THECLAW_CONSUMER set.
 */
export function startHandler(thread: Thread, subscription: ConsumerInfo, options: StartHandlerOptions): StartResult {
  const { consumer, handler } = subscription;
  if (!subscription.subscribed || handler === null || !thread.hasPending(consumer)) return { started: false, reason: 'idle' };
  const dispatcher = identify(process.pid);
  if (!thread.takeLease(consumer, dispatcher)) return { started: false, reason: 'leased' };
  const spawned = spawnCommand(handler, {
    stdio: options.stdio ?? 'ignore',
    env: { ...(options.env ?? process.env), THECLAW_HOME: options.home, THECLAW_THREAD: thread.path, THECLAW_CONSUMER: consumer },
  });
  if (!spawned.ok) {
    thread.releaseLease(consumer, dispatcher.pid);
    return { started: false, reason: 'spawn_failed', error: spawned.error };
  }
  const { child } = spawned;
  try {
    thread.transferLease(consumer, dispatcher.pid, identify(child.pid));
  } catch (error) {
    // A handler whose lease is not its own must not run: once this dispatcher lets go, another
    // one could start the same consumer beside it.
    killGroup(child.pid, 'SIGKILL');
    try {
      thread.releaseLease(consumer, dispatcher.pid);
    } catch {
      // The database fails; the lease of a dispatcher that exits is reclaimed as a dead holder's.
    }
    return { started: false, reason: 'spawn_failed', error: `cannot hand the lease to the handler: ${(error as Error).message}` };
  }
  return { started: true, child };
}
