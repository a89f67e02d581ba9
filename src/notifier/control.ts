import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClawError, isClawError } from '../core/errors.js';
import { runDir, socketPath } from '../core/home.js';
import { notify, request } from '../core/ipc.js';
import { readLockHolder } from '../core/lock.js';
import { cliPath } from '../core/package.js';
import { isAlive } from '../core/process.js';
import { openThread } from '../thread/thread.js';
import { listThreads } from '../thread/registry.js';
import { pidFile } from './daemon.js';
import type { SubscriptionStatus } from './dispatcher.js';
import { TimerStore, timerToJson, type Schedule, type TimerJson } from './timers.js';
import type { NotifierRequest, NotifierStatus } from './types.js';

const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 10_000;

function send<T>(home: string, message: NotifierRequest, timeoutMs?: number): Promise<T> {
  return request<T>(socketPath(home, 'notifier'), message, { timeoutMs });
}

/**
 * Starts the daemon in the background and returns once it answers on its socket. The daemon is
 * the same CLI with `start --foreground`, detached into its own session so that it outlives the
 * terminal; what it prints before its log is open goes to `run/notifier.stderr`.
 */
export async function startDaemon(home: string): Promise<{ pid: number }> {
  const running = readLockHolder(pidFile(home));
  if (running) {
    throw new ClawError('conflict', `notifier is already running (pid ${running.pid})`, { suggestion: 'stop it first with: notifier stop' });
  }
  mkdirSync(runDir(home), { recursive: true, mode: 0o700 });
  const stderrPath = join(runDir(home), 'notifier.stderr');
  const stderr = openSync(stderrPath, 'w', 0o600);
  const child = spawn(process.execPath, [cliPath('notifier'), 'start', '--foreground'], {
    detached: true,
    stdio: ['ignore', 'ignore', stderr],
    env: { ...process.env, THECLAW_HOME: home },
  });
  closeSync(stderr);
  child.unref();
  let exited = false;
  child.once('exit', () => (exited = true));
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    try {
      return await send<{ pid: number }>(home, { op: 'ping' }, 1_000);
    } catch (error) {
      if (exited) {
        const said = readFileSync(stderrPath, 'utf8').trim();
        throw new ClawError('io', `notifier did not start${said ? `: ${said.split('\n').at(-1)!.replace(/^Error: /, '')}` : ''}`, {
          suggestion: `see ${stderrPath} and the log`,
        });
      }
      if (!isClawError(error, 'not_found')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  throw new ClawError('timeout', `notifier did not answer within ${START_TIMEOUT_MS / 1000} s of starting`, { suggestion: `see ${stderrPath}` });
}

/** Stops the daemon and waits for its process to end. Returns false if it was not running. */
export async function stopDaemon(home: string): Promise<boolean> {
  const holder = readLockHolder(pidFile(home));
  if (!holder) return false;
  try {
    await send(home, { op: 'stop' }, 3_000);
  } catch {
    process.kill(holder.pid, 'SIGTERM'); // socket gone or hung: the signal does the same
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isAlive(holder)) {
    if (Date.now() > deadline) {
      process.kill(holder.pid, 'SIGKILL');
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

/** The daemon's own status when it runs; otherwise what the stored state tells. */
export async function daemonStatus(home: string): Promise<NotifierStatus> {
  const holder = readLockHolder(pidFile(home));
  if (holder) {
    try {
      return await send<NotifierStatus>(home, { op: 'status' });
    } catch (error) {
      if (!isClawError(error, 'not_found')) throw error; // starting or stopping: fall through
    }
  }
  return { running: false, pid: null, started_at: null, uptime_seconds: null, subscriptions: storedSubscriptions(home), timers: listTimers(home) };
}

function storedSubscriptions(home: string): SubscriptionStatus[] {
  return listThreads(home)
    .sort()
    .flatMap((path) => {
      try {
        const thread = openThread(path, { home });
        try {
          return thread.subscriptions().map((info) => ({ ...info, thread: path }));
        } finally {
          thread.close();
        }
      } catch {
        return []; // deleted since it subscribed
      }
    });
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
  await notify(socketPath(home, 'notifier'), { op: 'timers' } satisfies NotifierRequest);
  return timer;
}

export async function removeTimer(home: string, id: string): Promise<void> {
  withTimers(home, (store) => store.remove(id));
  await notify(socketPath(home, 'notifier'), { op: 'timers' } satisfies NotifierRequest);
}

export function listTimers(home: string): TimerJson[] {
  return withTimers(home, (store) => store.list().map((timer) => timerToJson(timer)));
}
