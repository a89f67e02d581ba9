import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { ClawError, errnoCode, isClawError } from './errors.js';
import { ensureDir, socketPath } from './home.js';
import { listenSocket, request, type Handler } from './ipc.js';
import { daemonLogFile, daemonPidFile, daemonStderrFile, runDir, type DaemonName } from './layout.js';
import { readLockHolder, tryLock, type LockHolder } from './lock.js';
import { cliPath } from './package.js';
import { isAlive, killGroup, processEnvironment } from './process.js';
import { sleep } from './retry.js';

/**
 * The life of a resident daemon (notifier, xgw), written once: one per home, guarded by a
 * pid-aware lock in `run/<name>.pid`; a control socket `run/<name>.sock` (mode 0600, loopback
 * by nature); started in the background as `<name> start --foreground`; stopped over the socket
 * or by SIGTERM.
 */
export type { DaemonName } from './layout.js';

/** A daemon that is alive but does not answer this long is stopped: slow starts on a loaded machine take seconds. */
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const POLL_MS = 25;

export function daemonHolder(home: string, name: DaemonName): LockHolder | null {
  return readLockHolder(daemonPidFile(home, name));
}

/**
 * The environment a running daemon was started with (read from /proc), else `shellEnv`: what
 * the daemon does depends on its own (the keys agents get, the bot tokens), not on the shell's.
 */
export function daemonEnvironment(home: string, name: DaemonName, shellEnv: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; daemon: boolean } {
  const holder = daemonHolder(home, name);
  const env = holder && processEnvironment(holder.pid);
  return env ? { env, daemon: true } : { env: shellEnv, daemon: false };
}

export function askDaemon<T>(home: string, name: DaemonName, message: unknown, timeoutMs?: number): Promise<T> {
  return request<T>(socketPath(home, name), message, { timeoutMs });
}

export interface RunningDaemon {
  /** Answers the control socket's requests (`ping`, `stop` are answered before it is asked). */
  handle: Handler;
  /**
   * Called once the control socket answers: work that may be slow starts here, so that `ping`
   * and status requests are answered meanwhile.
   */
  listening?(): void;
  /** Releases what the daemon holds; called once, on stop or SIGTERM. */
  shutdown(): Promise<void> | void;
}

/**
 * Runs a daemon in this process until `stop` or SIGTERM/SIGINT. `setup` starts the daemon's work
 * once the lock is held; a failure there or in opening the socket stops that work, releases the
 * lock and is thrown to the caller.
 */
export async function runDaemon(home: string, name: DaemonName, setup: () => Promise<RunningDaemon>): Promise<void> {
  ensureDir(runDir(home));
  const attempt = tryLock(daemonPidFile(home, name));
  if (!attempt.acquired) {
    throw new ClawError('conflict', `${name} is already running (pid ${attempt.holder.pid})`, { suggestion: `stop it first with: ${name} stop` });
  }
  const lock = attempt.lock;
  let daemon: RunningDaemon;
  let server: Awaited<ReturnType<typeof listenSocket>>;
  let stopping = false;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    server.close();
    await daemon.shutdown();
    lock.release();
    resolveStopped();
  };
  let started: RunningDaemon | undefined;
  try {
    const path = socketPath(home, name); // refused before any work starts
    daemon = started = await setup();
    server = await listenSocket(path, (message) => {
      const op = (message as { op?: unknown } | null)?.op;
      if (op === 'ping') return { pid: process.pid };
      if (op === 'stop') {
        setImmediate(() => void shutdown());
        return { stopping: true };
      }
      return daemon.handle(message);
    });
  } catch (error) {
    // The work setup started (timers, connections) would keep this process alive for nothing.
    await started?.shutdown();
    lock.release();
    throw error;
  }
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
  // Its output is a file on the data disk: a write that fails there (full, read-only) must not
  // come back as an unhandled 'error' event and kill the daemon. It says what is wrong in its log.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  daemon.listening?.();
  await stopped;
}

export interface StartDaemonOptions {
  /** How long the daemon may take to answer on its socket before it is stopped and the start fails. Default: 30000 (30 s). */
  timeoutMs?: number;
}

/**
 * Starts the daemon in the background and returns once it answers on its socket. It is the same
 * CLI with `start --foreground`, detached so that it outlives the terminal; what it prints before
 * its log is open goes to `run/<name>.stderr`, and is quoted if it fails to start. A start that
 * fails leaves no daemon behind: one still alive is killed (it would run on, unknown to the
 * caller told that it did not start, and hold the home's lock against the next start).
 */
export async function startDaemonProcess(home: string, name: DaemonName, env: NodeJS.ProcessEnv = process.env, options: StartDaemonOptions = {}): Promise<{ pid: number }> {
  const running = daemonHolder(home, name);
  if (running) throw new ClawError('conflict', `${name} is already running (pid ${running.pid})`, { suggestion: `stop it first with: ${name} stop` });
  ensureDir(runDir(home));
  const stderrPath = daemonStderrFile(home, name);
  const stderr = openSync(stderrPath, 'w', 0o600);
  const child = spawn(process.execPath, [cliPath(name), 'start', '--foreground'], {
    detached: true,
    stdio: ['ignore', 'ignore', stderr],
    env: { ...env, THECLAW_HOME: home },
  });
  closeSync(stderr);
  child.unref();
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    return await untilAnswering(home, name, stderrPath, options.timeoutMs ?? START_TIMEOUT_MS, () => exited);
  } catch (error) {
    if (!exited) killGroup(child.pid!, 'SIGKILL');
    throw error;
  }
}

/** Asks the starting daemon until it answers; fails once it exited or did not answer within `timeoutMs`. */
async function untilAnswering(home: string, name: DaemonName, stderrPath: string, timeoutMs: number, exited: () => boolean): Promise<{ pid: number }> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      // A daemon that just started may be busy for a moment (its first sweep starts many runs on
      // a loaded machine): the ping waits as long as the start may take, not a fixed second.
      return await askDaemon<{ pid: number }>(home, name, { op: 'ping' }, Math.max(POLL_MS, deadline - Date.now()));
    } catch (error) {
      if (exited()) {
        const said = readFileSync(stderrPath, 'utf8')
          .trim()
          .split('\n')
          .at(-1)
          ?.replace(/^Error: /, '');
        throw new ClawError('io', `${name} did not start${said ? `: ${said}` : ''}`, { suggestion: `see ${stderrPath} and ${daemonLogFile(home, name)}` });
      }
      if (!isClawError(error, 'not_found') && !isClawError(error, 'timeout') && !isResetWhileStarting(error)) throw error;
      await sleep(POLL_MS);
    }
  }
  throw new ClawError('timeout', `${name} did not answer within ${timeoutMs / 1000} s of starting, and was stopped`, { suggestion: `see ${stderrPath}` });
}

/**
 * A connection the starting daemon reset (ECONNRESET; seen after a SIGKILLed predecessor, while
 * the new one takes over its socket): the daemon has not exited (checked first), so it is asked
 * again, as when nothing listened yet.
 */
function isResetWhileStarting(error: unknown): boolean {
  return isClawError(error, 'io') && errnoCode((error as ClawError).cause) === 'ECONNRESET';
}

/** Stops the daemon and waits for its process to end. Returns false if it was not running. */
export async function stopDaemonProcess(home: string, name: DaemonName): Promise<boolean> {
  const holder = daemonHolder(home, name);
  if (!holder) return false;
  try {
    await askDaemon(home, name, { op: 'stop' }, 3_000);
  } catch {
    signalIfAlive(holder.pid, 'SIGTERM'); // socket gone or hung: the signal does the same
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isAlive(holder)) {
    if (Date.now() > deadline) {
      signalIfAlive(holder.pid, 'SIGKILL');
      break;
    }
    await sleep(POLL_MS);
  }
  return true;
}

/** `process.kill`, where a process that exited meanwhile (ESRCH) is what was wanted anyway. */
function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if (errnoCode(error) !== 'ESRCH') throw error;
  }
}
