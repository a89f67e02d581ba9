import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { split } from 'shlex';
import { usageError } from './errors.js';

/**
 * Commands stored as strings (subscription handlers, timers) are split with shell-words rules
 * and spawned as argv, never through a shell: a `;`, `$(...)` or quote in an argument stays a
 * literal character of that argument (DESIGN §2).
 */
export function splitCommand(command: string): [string, ...string[]] {
  let argv: string[];
  try {
    argv = split(command);
  } catch (error) {
    throw usageError(`cannot split the command ${JSON.stringify(command)}: ${(error as Error).message}`, 'close every quote; quote arguments with spaces as in a POSIX shell');
  }
  const [program, ...args] = argv;
  if (program === undefined || program === '') {
    throw usageError('the command is empty', 'give a program to run, for example "agent run admin"');
  }
  return [program, ...args];
}

export type SpawnCommandResult = { ok: true; child: ChildProcess & { pid: number } } | { ok: false; error: string };

/**
 * Starts a stored command (a handler, a timer): split with `splitCommand`, spawned without a
 * shell, detached in its own process group so that it can be killed with its children. A command
 * that cannot be split or started is reported, not thrown.
 */
export function spawnCommand(command: string, options: { env: NodeJS.ProcessEnv; stdio: StdioOptions }): SpawnCommandResult {
  let child: ChildProcess;
  try {
    const [program, ...args] = splitCommand(command);
    child = spawn(program, args, { detached: true, stdio: options.stdio, env: options.env });
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
  if (child.pid === undefined) {
    // spawn reports ENOENT/EACCES asynchronously; swallow that event, the result says it.
    child.once('error', () => {});
    return { ok: false, error: `cannot run ${JSON.stringify(command)}: program not found or not executable` };
  }
  return { ok: true, child: child as ChildProcess & { pid: number } };
}

/** Quotes argv into a command string that `splitCommand` turns back into the same argv. */
export function joinCommand(argv: readonly string[]): string {
  return argv.map(quoteArg).join(' ');
}

// Not shlex's `join`: it quotes a `'` as `'"'"'`, and shlex's `split` then applies double-quote
// escapes to the whole word, so `\\'` came back as `\'`. A `'` is written as an escaped `\'`
// outside quotes instead, and no double quotes are produced.
function quoteArg(arg: string): string {
  if (/^[\w@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replaceAll("'", "'\\''")}'`;
}
