import type { ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { errnoCode } from '../core/errors.js';
import { watchGroup } from '../core/process.js';

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
 * daemon that started it was restarted. The file is read (bounded) when the run ends and removed.
 */
export class OutputFile {
  readonly fd: number;
  private readonly path: string;

  constructor(dir: string, name: string) {
    this.path = join(dir, `${name}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2, 8)}.out`);
    try {
      this.fd = openSync(this.path, 'w+', 0o600);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      // The directory was removed under the running daemon (a cleanup of run/): make it again.
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this.fd = openSync(this.path, 'w+', 0o600);
    }
  }

  /** Reads at most `limit` bytes: the head and the tail, with a marker where bytes were left out. */
  readAndRemove(limit: number): string {
    try {
      const size = fstatSync(this.fd).size;
      if (size <= limit) return this.read(0, size);
      const half = Math.floor(limit / 2);
      return `${this.read(0, half)}\n[... ${size - 2 * half} bytes left out ...]\n${this.read(size - half, half)}`;
    } finally {
      closeSync(this.fd);
      try {
        unlinkSync(this.path);
      } catch {
        // already gone
      }
    }
  }

  private read(position: number, length: number): string {
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

const KILL_GRACE_MS = 3_000;

/**
 * Waits for a detached child (its own process group) to exit; past `timeoutMs` the whole group
 * gets SIGTERM, then SIGKILL.
 */
export function superviseChild(
  child: ChildProcess & { pid: number },
  output: OutputFile,
  options: { timeoutMs: number; outputLimitBytes: number },
): Promise<RunOutcome> {
  const started = Date.now();
  // Whatever the handler left running in its group goes with it once the time is up.
  const watch = watchGroup(child.pid, { timeoutMs: options.timeoutMs, graceMs: KILL_GRACE_MS });
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      watch.release();
      let text: string;
      try {
        text = output.readAndRemove(options.outputLimitBytes);
      } catch (error) {
        text = `[the output could not be read: ${(error as Error).message}]`;
      }
      resolve({ code, signal, timedOut: watch.killedFor === 'timeout', durationMs: Date.now() - started, output: text });
    });
  });
}
