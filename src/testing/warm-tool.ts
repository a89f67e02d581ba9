import { type ChildProcess, fork } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../core/package.js';
import type { RunnerCommand, RunnerMessage } from '../notifier/runner-protocol.js';

/**
 * The tests' CLI runs, warm: one of notifier's runners (`dist/notifier/runner.js`, which runs a
 * command of this package's CLIs in its process with the modules loaded once, as notifier runs
 * handlers) per test process, instead of a Node start per command. A Node start costs ~0.2 CPU-s on
 * the CI machine, and the suite runs thousands of commands: most of its CPU was spent starting Node.
 *
 * A command is what it would have been in a process of its own: its argv, its environment, its
 * exit code, its stdout and stderr apart (a file each, read after the job), a `process.exit` (the
 * runner dies with its code, and the next command gets a new runner). What only a process of its
 * own can give is spawned as before: standard input, and a second command while one runs (tests of
 * commands at once stay at once).
 */
export interface WarmResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A runner takes this many commands, then a new one starts: what commands leave behind stays small. */
const JOBS_PER_RUNNER = 40;

interface Runner {
  child: ChildProcess;
  dir: string;
  stdout: { fd: number; read: number };
  stderr: { fd: number; read: number };
  jobs: number;
  busy: boolean;
  /** Settles the job under way when the runner dies in it (a command's `process.exit`). */
  onExit?: (code: number | null) => void;
}

let current: Runner | undefined;
let nextId = 1;

function start(): Runner {
  const dir = mkdtempSync(join(tmpdir(), 'theclaw-warm-'));
  const stdout = { fd: openSync(join(dir, 'stdout'), 'a+'), read: 0 };
  const stderr = { fd: openSync(join(dir, 'stderr'), 'a+'), read: 0 };
  const child = fork(join(packageRoot(), 'dist', 'notifier', 'runner.js'), [], { stdio: ['ignore', stdout.fd, stderr.fd, 'ipc'], execArgv: [] });
  const runner: Runner = { child, dir, stdout, stderr, jobs: 0, busy: false };
  child.once('exit', (code, signal) => {
    if (current === runner) current = undefined;
    runner.onExit?.(code ?? (signal ? 128 : null));
    finish(runner);
  });
  // An idle runner does not keep the test process alive.
  idle(runner);
  return runner;
}

function idle(runner: Runner): void {
  runner.child.unref();
  (runner.child.channel as { unref?: () => void } | undefined)?.unref?.();
}

function busy(runner: Runner): void {
  runner.child.ref();
  (runner.child.channel as { ref?: () => void } | undefined)?.ref?.();
}

function finish(runner: Runner): void {
  closeSync(runner.stdout.fd);
  closeSync(runner.stderr.fd);
  rmSync(runner.dir, { recursive: true, force: true });
}

/** What a file got since it was last read. */
function unread(runner: Runner, which: 'stdout' | 'stderr'): string {
  const file = readFileSync(join(runner.dir, which));
  const text = file.subarray(runner[which].read).toString('utf8');
  runner[which].read = file.length;
  return text;
}

/**
 * Runs `cli args` in the warm runner; undefined when it is busy with another command (the caller
 * spawns the command instead).
 */
export function runWarm(cli: string, args: string[], env: NodeJS.ProcessEnv): Promise<WarmResult> | undefined {
  if (current?.busy) return undefined;
  const runner = current ?? start();
  current = runner;
  runner.busy = true;
  busy(runner);
  const id = nextId++;
  const jobEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) jobEnv[key] = value;
  return new Promise((resolve) => {
    const settle = (code: number | null) => {
      runner.child.off('message', onMessage);
      runner.onExit = undefined;
      resolve({ code, stdout: unread(runner, 'stdout'), stderr: unread(runner, 'stderr') });
    };
    const onMessage = (message: RunnerMessage) => {
      if (message.type !== 'done' || message.id !== id) return;
      runner.busy = false;
      runner.jobs++;
      settle(message.code);
      if (runner.jobs >= JOBS_PER_RUNNER) {
        current = undefined;
        runner.child.send({ type: 'leave' } satisfies RunnerCommand);
      }
      idle(runner);
    };
    runner.onExit = (code) => settle(code);
    runner.child.on('message', onMessage);
    runner.child.send({ type: 'job', id, cli, args, env: jobEnv } satisfies RunnerCommand);
  });
}
