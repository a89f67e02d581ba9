import type { ChildProcess, StdioOptions } from 'node:child_process';
import { spawnCommand } from '../../core/command.js';
import { identify, killGroup } from '../../core/process.js';
import type { Thread } from '../thread.js';
import type { ConsumerInfo } from '../types.js';

/** A handler that runs: its process (whose pid holds the lease), and how to end it at once. */
export interface Launched {
  pid: number;
  kill(): void;
}

export type LaunchResult<T extends Launched> = { ok: true; run: T } | { ok: false; error: string };

/** Starts a handler command with its environment; reports a command that cannot start. */
export type Launcher<T extends Launched> = (command: string, env: NodeJS.ProcessEnv) => LaunchResult<T>;

export interface StartHandlerOptions<T extends Launched> {
  home: string;
  /** Environment of the handler, before the THECLAW_* variables. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  launch: Launcher<T>;
}

export type StartResult<T extends Launched> =
  | { started: true; run: T }
  /** Nothing pending, not subscribed, or another live process holds the lease. */
  | { started: false; reason: 'idle' | 'leased' }
  /** The handler could not be started (program not found, not executable). */
  | { started: false; reason: 'spawn_failed'; error: string };

export type SpawnedHandler = Launched & { child: ChildProcess & { pid: number } };

/**
 * The plain launch: the command spawned as argv without a shell, in its own process group (so
 * that a timeout can kill it with its children), its output to `stdio`.
 */
export function spawnLaunch(stdio: StdioOptions = 'ignore'): Launcher<SpawnedHandler> {
  return (command, env) => {
    const spawned = spawnCommand(command, { stdio, env });
    if (!spawned.ok) return spawned;
    const { child } = spawned;
    return { ok: true, run: { pid: child.pid, child, kill: () => killGroup(child.pid, 'SIGKILL') } };
  };
}

/**
 * Starts a subscription's handler when events are pending and nobody holds its lease. The lease
 * is taken in the dispatcher's name first and handed to the handler once it runs, so no moment
 * exists in which a second dispatcher (another `thread dispatch`, a restarted notifier) could
 * start the same consumer. The handler gets THECLAW_HOME, THECLAW_THREAD and THECLAW_CONSUMER.
 */
export function startHandler<T extends Launched>(thread: Thread, subscription: ConsumerInfo, options: StartHandlerOptions<T>): StartResult<T> {
  const { consumer, handler } = subscription;
  if (!subscription.subscribed || handler === null || !thread.hasPending(consumer)) return { started: false, reason: 'idle' };
  const dispatcher = identify(process.pid);
  if (!thread.dispatch.takeLease(consumer, dispatcher)) return { started: false, reason: 'leased' };
  const launched = options.launch(handler, { ...(options.env ?? process.env), THECLAW_HOME: options.home, THECLAW_THREAD: thread.path, THECLAW_CONSUMER: consumer });
  if (!launched.ok) {
    thread.dispatch.releaseLease(consumer, dispatcher.pid);
    return { started: false, reason: 'spawn_failed', error: launched.error };
  }
  const { run } = launched;
  try {
    thread.dispatch.transferLease(consumer, dispatcher.pid, identify(run.pid));
  } catch (error) {
    // A handler whose lease is not its own must not run: once this dispatcher lets go, another
    // one could start the same consumer beside it.
    run.kill();
    try {
      thread.dispatch.releaseLease(consumer, dispatcher.pid);
    } catch {
      // The database fails; the lease of a dispatcher that exits is reclaimed as a dead holder's.
    }
    return { started: false, reason: 'spawn_failed', error: `cannot hand the lease to the handler: ${(error as Error).message}` };
  }
  return { started: true, run };
}
