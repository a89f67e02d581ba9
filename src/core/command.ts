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
    throw usageError(
      `cannot split the command ${JSON.stringify(command)}: ${(error as Error).message}`,
      'close every quote; quote arguments with spaces as in a POSIX shell',
    );
  }
  const [program, ...args] = argv;
  if (program === undefined || program === '') {
    throw usageError('the command is empty', 'give a program to run, for example "agent run admin"');
  }
  return [program, ...args];
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
