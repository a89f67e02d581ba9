import { closeSync, fstatSync, ftruncateSync, openSync, readdirSync, readSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { errnoCode } from '../core/errors.js';
import { watchGroup } from '../core/process.js';
import { spawnLaunch, type Launched, type LaunchResult } from '../thread/index.js';
import { ensureDir } from '../core/home.js';

/** How a handler or timer command ended. */
export interface RunOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  durationMs: number;
  /** Head and tail of what it printed, at most the configured limit. */
  output: string;
}

export function succeeded(outcome: RunOutcome): boolean {
  return outcome.code === 0 && !outcome.timedOut;
}

export function describeOutcome(outcome: RunOutcome): string {
  if (outcome.timedOut) return `timed out after ${outcome.durationMs} ms and was killed`;
  if (outcome.signal) return `killed by ${outcome.signal}`;
  return `exited ${outcome.code}`;
}

/** `<what> exited 0 in 12 ms`, then the run's output, each line marked, for the log. */
export function formatRun(what: string, outcome: RunOutcome, note = ''): string {
  const output = outcome.output.trimEnd();
  return `${what} ${describeOutcome(outcome)} in ${outcome.durationMs} ms${note}${output ? `\n${output.replace(/^/gm, '  | ')}` : ''}`;
}

/**
 * A run's output goes to a file, not a pipe: a handler must not die of SIGPIPE/EPIPE because the
 * daemon that started it was restarted. The file is read (bounded) when the run ends and removed;
 * a warm runner's file is opened for appending and emptied between its jobs instead.
 */
export class OutputFile {
  readonly fd: number;
  private readonly path: string;

  constructor(dir: string, name: string, options: { append?: boolean } = {}) {
    this.path = join(dir, `${name}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2, 8)}.out`);
    // Appending: the runner's writes land at the end even after the file was emptied under it.
    const flags = options.append ? 'a+' : 'w+';
    try {
      this.fd = openSync(this.path, flags, 0o600);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      // The directory was removed under the running daemon (a cleanup of run/): make it again.
      ensureDir(dir);
      this.fd = openSync(this.path, flags, 0o600);
    }
  }

  /** Reads at most `limit` bytes: the head and the tail, with a marker where bytes were left out. */
  read(limit: number): string {
    const size = fstatSync(this.fd).size;
    if (size <= limit) return this.readAt(0, size);
    const half = Math.floor(limit / 2);
    return `${this.readAt(0, half)}\n[... ${size - 2 * half} bytes left out ...]\n${this.readAt(size - half, half)}`;
  }

  /** `read`, for the last time: the file is closed and removed. */
  readAndRemove(limit: number): string {
    try {
      return this.read(limit);
    } finally {
      this.remove();
    }
  }

  /** What `read` said, or why it could not be read: an outcome always has its output. */
  readSafely(limit: number): string {
    try {
      return this.read(limit);
    } catch (error) {
      return `[the output could not be read: ${(error as Error).message}]`;
    }
  }

  empty(): void {
    ftruncateSync(this.fd, 0);
  }

  remove(): void {
    closeSync(this.fd);
    try {
      unlinkSync(this.path);
    } catch {
      // already gone
    }
  }

  private readAt(position: number, length: number): string {
    const buffer = Buffer.alloc(length);
    const read = readSync(this.fd, buffer, 0, length, position);
    return buffer.subarray(0, read).toString('utf8');
  }
}

/**
 * Removes output files older than `maxAgeMs` from `dir`: left by a daemon that was killed while
 * its runs went on. Returns how many went.
 */
export function removeStaleOutput(dir: string, maxAgeMs: number, now = Date.now()): number {
  let removed = 0;
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.out')) continue;
    try {
      if (now - statSync(join(dir, name)).mtimeMs > maxAgeMs) {
        unlinkSync(join(dir, name));
        removed++;
      }
    } catch {
      // removed meanwhile
    }
  }
  return removed;
}

/** How long a command killed for its time gets between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 3_000;

/** A handler or timer command under way: its process, how to end it, and how it ended. */
export interface SupervisedRun extends Launched {
  outcome: Promise<RunOutcome>;
}

/**
 * Runs a command in a process of its own (its own process group), output to a file of its own;
 * past `timeoutMs` the whole group gets SIGTERM, then SIGKILL.
 */
export function spawnRun(command: string, env: NodeJS.ProcessEnv, output: OutputFile, options: RunLimits): LaunchResult<SupervisedRun> {
  const spawned = spawnLaunch(['ignore', output.fd, output.fd])(command, env);
  if (!spawned.ok) {
    output.remove();
    return spawned;
  }
  const { child, pid, kill } = spawned.run;
  const started = Date.now();
  // Whatever the handler left running in its group goes with it once the time is up.
  const watch = watchGroup(pid, { timeoutMs: options.timeoutMs, graceMs: KILL_GRACE_MS });
  const outcome = new Promise<RunOutcome>((resolve) => {
    child.once('exit', (code, signal) => {
      watch.release();
      const text = output.readSafely(options.outputLimitBytes);
      output.remove();
      resolve({ code, signal, timedOut: watch.killedFor === 'timeout', durationMs: Date.now() - started, output: text });
    });
  });
  return { ok: true, run: { pid, kill, outcome } };
}

export interface RunLimits {
  timeoutMs: number;
  outputLimitBytes: number;
}
