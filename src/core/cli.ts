import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { errorToJson, exitCodeOf, formatError, usageError } from './errors.js';
import { isReferenceRequest, renderReference, requestedCommand } from './reference.js';
import { PRIVATE_UMASK } from './private-home.js';
import { closeProcessResources } from './process-resources.js';
import { createRedactor } from './secrets.js';
import { storageError } from './storage-error.js';
import { WARM_LOADER } from './warm-loader.js';

/**
 * The one place where a CLI turns results and errors into output and exit codes. Every tool's
 * `cli.ts` builds its commander program with `createProgram`, keeps its actions thin (parse
 * flags into options, call the library, print), and hands the program to `runCli`.
 */
export function createProgram(name: string, description: string): Command {
  return (
    new Command(name)
      .description(description)
      .showHelpAfterError(false)
      // Set before any subcommand exists, so that every subcommand inherits it.
      .helpOption('-h, --help', 'display help (--verbose: with all subcommands)')
      .exitOverride()
      .configureOutput({
        // Commander's own error line is replaced by ours in runCli.
        outputError: () => {},
      })
  );
}

export type ProgramFactory = () => Command;

type WarmLoader = (factory: ProgramFactory) => void;

/**
 * Every CLI's entry point: runs the program, or, when a warm runner imports the module to run
 * its commands in-process later (notifier's runner pool), hands the program's factory over and
 * starts `warm`: what the module's commands would load on first use (a provider's code), loaded
 * while the runner waits for its first job. `warm` must not throw; what it fails to load is
 * loaded, or reported, by the job that needs it.
 */
export async function main(factory: ProgramFactory, warm?: () => void): Promise<void> {
  const loader = (globalThis as Record<symbol, WarmLoader | undefined>)[WARM_LOADER];
  if (!loader) {
    await runCli(factory());
    // A process of its own leaves once the command is done: a pool it opened must not keep it.
    await closeProcessResources();
    return;
  }
  loader(factory);
  warm?.();
}

let loading: Promise<unknown> = Promise.resolve();

/** Imports a CLI module (`dist/<tool>/cli.js`) without running it; its program's factory. */
export function loadProgram(url: string): Promise<ProgramFactory> {
  // One at a time: the loader is one global, and a module's main() must find its own.
  const load = loading.then(() => importProgram(url));
  loading = load.catch(() => {});
  return load;
}

async function importProgram(url: string): Promise<ProgramFactory> {
  let factory: ProgramFactory | undefined;
  const global = globalThis as Record<symbol, WarmLoader | undefined>;
  global[WARM_LOADER] = (given) => {
    factory = given;
  };
  try {
    await import(url);
  } finally {
    delete global[WARM_LOADER];
  }
  if (!factory) throw new Error(`${url} is not a CLI of this package (it never called main)`);
  return factory;
}

/**
 * Parses argv and runs the chosen action. Sets `process.exitCode` rather than calling
 * `process.exit`, so that work already handed to the event loop (a poke to notifier) completes.
 */
export async function runCli(program: Command, argv: string[] = process.argv): Promise<void> {
  // What any tool creates in THECLAW_HOME (and the daemons and commands it starts) is its user's alone.
  process.umask(PRIVATE_UMASK);
  // Once: a warm runner calls this for every job.
  if (!process.stdout.listeners('error').includes(ignoreBrokenPipe)) process.stdout.on('error', ignoreBrokenPipe);
  // Answered before commander parses, since commander's help shows one command only.
  const args = argv.slice(2);
  if (isReferenceRequest(args)) {
    process.stdout.write(renderReference(requestedCommand(program, args)));
    return;
  }
  const json = argv.includes('--json');
  try {
    if (argv === process.argv) checkArgumentEncoding(argv.length - 2);
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return; // --help, --version
      if (error.code === 'commander.help') {
        // A command group run without its subcommand (`thread`, `notifier timer`): commander
        // printed the help on stderr already; that is the whole answer, as a usage error.
        process.exitCode = 2;
        return;
      }
      // Commander puts its "(Did you mean …?)" on a line of its own; an error is one line.
      reportError(usageError(error.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' '), helpHint(program, argv)), json);
      return;
    }
    reportError(error, json);
  }
}

/**
 * Arguments are text, and Node hands them over decoded as UTF-8 with every invalid byte replaced
 * by U+FFFD: `thread push --content $'\xff'` would store something else than it was given, with
 * no word said. The raw bytes are in /proc/self/cmdline (Linux; elsewhere Node's decoding
 * stands): an argument that is not UTF-8 is refused, since nothing can store it losslessly as
 * text. `count` is the number of arguments after the script (the end of the command line).
 */
function checkArgumentEncoding(count: number): void {
  if (count <= 0) return;
  let raw: Buffer;
  try {
    raw = readFileSync('/proc/self/cmdline');
  } catch {
    return;
  }
  const args = raw
    .subarray(0, raw.at(-1) === 0 ? -1 : undefined)
    .toString('latin1')
    .split('\0')
    .slice(-count);
  if (args.length !== count) return;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  args.forEach((arg, index) => {
    try {
      decoder.decode(Buffer.from(arg, 'latin1'));
    } catch {
      const flag = /^--?[\w-]+=/.test(arg) ? arg.slice(0, arg.indexOf('=')) : args[index - 1]?.startsWith('-') ? args[index - 1] : undefined;
      throw usageError(`${flag ? `the value of ${flag}` : `argument ${index + 1}`} is not valid UTF-8`, 'pass text encoded as UTF-8 (binary data must be encoded first, e.g. as base64 text)');
    }
  });
}

function reportError(raw: unknown, json: boolean): void {
  // A full or read-only disk reads the same from every tool, whichever module met it.
  const error = storageError(raw) ?? raw;
  // Upstream messages can quote what was sent (a provider echoing part of a key): never print a secret.
  const redact = createRedactor();
  if (json) process.stdout.write(redact(JSON.stringify(errorToJson(error))) + '\n');
  else process.stderr.write(redact(formatError(error)) + '\n');
  process.exitCode = exitCodeOf(error);
}

function helpHint(program: Command, argv: string[]): string {
  const sub = program.commands.find((command) => argv.slice(2).includes(command.name()));
  return `see '${program.name()}${sub ? ` ${sub.name()}` : ''} --help'`;
}

const EXAMPLES = new WeakMap<Command, string[]>();

/**
 * Attaches examples to a command: shown under `--help` and kept for `cmds`, which indexes the
 * CLIs from these same definitions so that its descriptions never drift from the tools.
 */
export function withExamples<T extends Command>(command: T, examples: string[]): T {
  EXAMPLES.set(command, examples);
  command.addHelpText('after', `\nExamples:\n${examples.map((line) => `  ${line}`).join('\n')}`);
  return command;
}

export function examplesOf(command: Command): string[] {
  return EXAMPLES.get(command) ?? [];
}

/** The `--json` flag every data-printing command takes. */
export function jsonOption(description = 'print JSON (and errors as JSON on stdout)'): Option {
  return new Option('--json', description);
}

/** Prints one JSON document on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/** Prints lines on stdout in one write (NDJSON, ids). */
export function printLines(lines: readonly string[]): void {
  if (lines.length > 0) process.stdout.write(lines.join('\n') + '\n');
}

/** Commander option parser for positive integers, with a usage error naming the flag. */
export function positiveInt(flag: string): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) <= 0 || !Number.isSafeInteger(Number(value))) {
      throw usageError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`, `pass ${flag} 1 or more`);
    }
    return Number(value);
  };
}

/** Like `positiveInt` but 0 is allowed (event ids, where 0 means "before the first event"). */
export function nonNegativeInt(flag: string): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
      throw usageError(`${flag} must be a whole number, got ${JSON.stringify(value)}`, `pass ${flag} 0 or more`);
    }
    return Number(value);
  };
}

/**
 * Reads all of stdin. `ifTerminal` is thrown when stdin is a terminal: the command wanted piped
 * input, and waiting for the user to type it and press Ctrl-D is never what was meant.
 */
export async function readStdin(ifTerminal: Error): Promise<Buffer> {
  if (process.stdin.isTTY) throw ifTerminal;
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function ignoreBrokenPipe(error: NodeJS.ErrnoException): void {
  if (error.code !== 'EPIPE') throw error;
}
