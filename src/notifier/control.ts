import { relative } from 'node:path';
import { askDaemon, daemonHolder, startDaemonProcess, stopDaemonProcess } from '../core/daemon.js';
import { ClawError, isClawError } from '../core/errors.js';
import { withStoredSecrets } from '../core/secrets-file.js';
import { socketPath } from '../core/home.js';
import { resolveHomeRef } from '../core/layout.js';
import { notify } from '../core/ipc.js';
import { listThreads, openStoreAt, openThread, storeSetting, type PostgresLeases, type Thread, type ThreadStore } from '../thread/index.js';
import { storedSubscriptions as postgresSubscriptions } from './pg-dispatcher.js';
import { loadConfig } from './config.js';
import { subscriptionStatus } from './dispatcher.js';
import { TimerStore, timerToJson, type Schedule, type TimerJson } from './timers.js';
import type { NotifierReloadResult, NotifierRequest, NotifierStatus, SubscriptionStatus } from './types.js';

/**
 * Starts the daemon in the background with `env` and the keys of secrets.env (which its handlers
 * inherit); returns once it answers. The config is read here first, so that a bad one is reported as itself (file, key,
 * fix) rather than as a daemon that died.
 */
export function startDaemon(home: string, env: NodeJS.ProcessEnv = process.env): Promise<{ pid: number }> {
  loadConfig(home);
  return startDaemonProcess(home, 'notifier', withStoredSecrets(home, env));
}

/** Stops the daemon; false if it was not running. Running handlers finish their batch. */
export function stopDaemon(home: string): Promise<boolean> {
  return stopDaemonProcess(home, 'notifier');
}

/** Asks the running daemon to apply its config file again (see runNotifier). */
export async function reloadNotifier(home: string): Promise<NotifierReloadResult> {
  try {
    return await askDaemon<NotifierReloadResult>(home, 'notifier', { op: 'reload' } satisfies NotifierRequest);
  } catch (error) {
    if (isClawError(error, 'not_found') && !daemonHolder(home, 'notifier')) {
      throw new ClawError('io', 'notifier is not running', { suggestion: 'start it with notifier start; it reads its config when it starts', cause: error });
    }
    throw error;
  }
}

/** What a reload did, for a person. */
export function describeNotifierReload(result: NotifierReloadResult): string[] {
  return [`notifier reloaded ${result.file}: ${result.changed.length ? `applied ${result.changed.join(', ')}` : 'nothing changed'}`];
}

/**
 * A subscription's thread as a path of `home`: the status names a thread by its path on SQLite and
 * by its name in the store, relative to the home, on PostgreSQL (thread/store/name.ts). Whoever
 * compares it with a path of the home or shows it resolves it here.
 */
export function subscribedPath(home: string, sub: Pick<SubscriptionStatus, 'thread'>): string {
  return resolveHomeRef(home, sub.thread);
}

/** A subscription's thread relative to the home, as theclaw shows it. */
export function subscribedThread(home: string, sub: Pick<SubscriptionStatus, 'thread'>): string {
  return relative(home, subscribedPath(home, sub));
}

/** The daemon's own status when it runs; otherwise what the stored state tells. */
export async function daemonStatus(home: string): Promise<NotifierStatus> {
  if (daemonHolder(home, 'notifier')) {
    try {
      return await askDaemon<NotifierStatus>(home, 'notifier', { op: 'status' } satisfies NotifierRequest);
    } catch (error) {
      if (!isClawError(error, 'not_found')) throw error; // starting or stopping: fall through
    }
  }
  const { url } = storeSetting(home);
  const subscriptions = url === null ? storedSubscriptions(home) : await withPostgresStore(url, (store, leases) => postgresSubscriptions(store, leases));
  return { running: false, pid: null, started_at: null, uptime_seconds: null, subscriptions, timers: listTimers(home) };
}

async function withPostgresStore<T>(url: string, use: (store: ThreadStore, leases: PostgresLeases) => Promise<T>): Promise<T> {
  const store = await openStoreAt(url, { maxConnections: 1 });
  try {
    return await use(store, store.leases!);
  } finally {
    await store.close();
  }
}

function storedSubscriptions(home: string): SubscriptionStatus[] {
  return listThreads(home)
    .sort()
    .flatMap((path) =>
      subscriptionStatus(path, () => {
        let thread: Thread;
        try {
          thread = openThread(path, { home });
        } catch (error) {
          if (isClawError(error, 'not_found')) return []; // deleted since it subscribed
          throw error;
        }
        try {
          return thread.subscriptions();
        } finally {
          thread.close();
        }
      }),
    );
}

function withTimers<T>(home: string, fn: (store: TimerStore) => T): T {
  const store = new TimerStore(home);
  try {
    return fn(store);
  } finally {
    store.close();
  }
}

export async function addTimer(home: string, id: string, schedule: Schedule, command: string): Promise<TimerJson> {
  const timer = withTimers(home, (store) => timerToJson(store.add(id, schedule, command)));
  await pokeTimers(home);
  return timer;
}

export async function removeTimer(home: string, id: string): Promise<void> {
  withTimers(home, (store) => store.remove(id));
  await pokeTimers(home);
}

/** Tells a running daemon to re-read the timers; the change is stored already, so this never fails. */
async function pokeTimers(home: string): Promise<void> {
  let path: string;
  try {
    path = socketPath(home, 'notifier');
  } catch {
    return; // no safe socket directory: no daemon listens there
  }
  await notify(path, { op: 'timers' } satisfies NotifierRequest);
}

export function listTimers(home: string): TimerJson[] {
  return withTimers(home, (store) => store.list().map((timer) => timerToJson(timer)));
}
