import type { Command } from 'commander';
import { split } from 'shlex';
import { THECLAW_PROGRAMS } from './programs.js';

/**
 * Whether an example command line of TheClaw's tools is one its program accepts: the subcommand
 * exists, every option is known and has its value, required options and arguments are there, no
 * argument is left over, and the options' own parsers take the values. The program's commander
 * definition parses it with every action replaced by nothing, so nothing runs. For examples that
 * cannot run in a test (USAGE.md's, the README's marked ones): at least what they say is a command.
 */

/** The words of the tool's part of a shell line: after a pipe or `VAR=value`, without redirections or a trailing comment. */
export function toolWords(line: string): string[] {
  const segments = [[]] as string[][];
  for (const word of split(withoutComment(line.replaceAll('\\\n', ' ')))) {
    if (word === '|') segments.push([]);
    else if (!/^\d*[<>]/.test(word)) segments.at(-1)!.push(word);
  }
  const last = segments.at(-1)!;
  const command = last.findIndex((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word));
  return command === -1 ? [] : last.slice(command);
}

/** The line up to a `#` that starts a word outside quotes. */
function withoutComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const char = line[i]!;
    if (quote) {
      if (char === quote) quote = undefined;
      else if (char === '\\' && quote === '"') i++;
    } else if (char === '\\') i++;
    else if (char === "'" || char === '"') quote = char;
    else if (char === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i);
  }
  return line;
}

/** `undefined` when `line` is a command line its tool accepts (or not one of TheClaw's tools); otherwise why not. */
export async function checkCommandLine(line: string): Promise<string | undefined> {
  const [tool, ...args] = toolWords(line);
  const program = await ownProgram(tool ?? '');
  if (!program) return undefined;
  try {
    await program.parseAsync(args, { from: 'user' });
    return undefined;
  } catch (error) {
    return (error as Error).message.replace(/^error: /, '');
  }
}

/** A fresh program (commander keeps what it parsed) whose commands do nothing and print nothing. */
async function ownProgram(tool: string): Promise<Command | undefined> {
  for (const factory of THECLAW_PROGRAMS) {
    const program = await factory();
    if (program.name() !== tool) continue;
    const silence = (command: Command): void => {
      command.configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} });
      if (command.commands.length === 0) command.action(() => {});
      command.commands.forEach(silence);
    };
    silence(program);
    return program;
  }
  return undefined;
}
