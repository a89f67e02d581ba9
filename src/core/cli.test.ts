import type { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createProgram, nonNegativeInt, positiveInt, printJson, printLines, runCli } from './cli.js';
import { ClawError } from './errors.js';

let stdout: string;
let stderr: string;
let errorListeners: ((...args: unknown[]) => void)[];

beforeEach(() => {
  stdout = '';
  stderr = '';
  errorListeners = process.stdout.listeners('error') as typeof errorListeners;
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += chunk.toString();
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += chunk.toString();
    return true;
  });
});

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
  // runCli adds an EPIPE guard to stdout on every call; do not let them pile up across tests.
  for (const listener of process.stdout.listeners('error')) {
    if (!errorListeners.includes(listener as (...args: unknown[]) => void)) {
      process.stdout.off('error', listener as (...args: unknown[]) => void);
    }
  }
});

interface Seen {
  id?: string;
  options?: Record<string, unknown>;
}

/** A tiny tool: `tool get <id> [--json] [--limit <n>]` and `tool fail <kind>`. */
function tinyProgram(seen: Seen = {}): Command {
  const program = createProgram('tool', 'a tiny tool for tests');
  program
    .command('get')
    .description('get a thing')
    .argument('<id>')
    .option('--json', 'print JSON')
    .option('--limit <n>', 'how many', positiveInt('--limit'))
    .option('--after <id>', 'start after', nonNegativeInt('--after'))
    .action((id: string, options: Record<string, unknown>) => {
      seen.id = id;
      seen.options = options;
      if (options.json) printJson({ id, limit: options.limit ?? null });
      else printLines([`got ${id}`]);
    });
  program
    .command('fail')
    .argument('<kind>')
    .option('--json', 'print JSON')
    .action(async (kind: string) => {
      await Promise.resolve();
      if (kind === 'not_found') throw new ClawError('not_found', 'thread "x" does not exist', { suggestion: "create it with 'thread init x'" });
      if (kind === 'usage') throw new ClawError('usage', 'bad input', { suggestion: 'pass good input' });
      throw new TypeError('boom');
    });
  return program;
}

async function run(...args: string[]): Promise<void> {
  await runCli(tinyProgram(), ['node', 'tool', ...args]);
}

describe('runCli', () => {
  it('runs the action and prints its output, leaving the exit code unset', async () => {
    const seen: Seen = {};
    await runCli(tinyProgram(seen), ['node', 'tool', 'get', 'abc', '--limit', '3']);
    expect(seen).toEqual({ id: 'abc', options: { limit: 3 } });
    expect(stdout).toBe('got abc\n');
    expect(stderr).toBe('');
    expect(process.exitCode).toBeUndefined();
  });

  it('gives exit code 2 and an Error line with a help hint for an unknown option', async () => {
    await run('get', 'abc', '--bogus');
    expect(process.exitCode).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^Error: unknown option '--bogus' - see 'tool get --help'\n$/);
  });

  it('points to the top-level help for an unknown command', async () => {
    await run('bogus');
    expect(process.exitCode).toBe(2);
    expect(stderr).toMatch(/^Error: unknown command 'bogus'.* - see 'tool --help'\n$/);
  });

  it('prints the help on stderr with exit code 2 and no Error line when no command is given', async () => {
    await run();
    expect(process.exitCode).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^Usage: tool /);
    expect(stderr).not.toMatch(/Error:|outputHelp/);
  });

  it('gives exit code 2 for a missing argument', async () => {
    await run('get');
    expect(process.exitCode).toBe(2);
    expect(stderr).toBe("Error: missing required argument 'id' - see 'tool get --help'\n");
  });

  it('prints the error as JSON on stdout with --json', async () => {
    await run('get', 'abc', '--json', '--bogus');
    expect(process.exitCode).toBe(2);
    expect(stderr).toBe('');
    expect(stdout.endsWith('\n')).toBe(true);
    expect(stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(stdout)).toEqual({ error: "unknown option '--bogus'", suggestion: "see 'tool get --help'" });
  });

  it('gives exit code 1 when an action throws a not_found ClawError', async () => {
    await run('fail', 'not_found');
    expect(process.exitCode).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(`Error: thread "x" does not exist - create it with 'thread init x'\n`);
  });

  it('gives the not_found error as JSON with --json', async () => {
    await run('fail', 'not_found', '--json');
    expect(process.exitCode).toBe(1);
    expect(stderr).toBe('');
    expect(JSON.parse(stdout)).toEqual({ error: 'thread "x" does not exist', suggestion: "create it with 'thread init x'" });
  });

  it('gives exit code 2 when an action throws a usage ClawError', async () => {
    await run('fail', 'usage');
    expect(process.exitCode).toBe(2);
    expect(stderr).toBe('Error: bad input - pass good input\n');
  });

  it('gives exit code 1 and a report-it hint for an unexpected error', async () => {
    await run('fail', 'other');
    expect(process.exitCode).toBe(1);
    expect(stderr).toMatch(/^Error: boom - this is unexpected; .*\n$/);
  });

  it('gives exit code 2 when an option parser rejects a value', async () => {
    await run('get', 'abc', '--limit', '0');
    expect(process.exitCode).toBe(2);
    expect(stderr).toBe('Error: --limit must be a positive integer, got "0" - pass --limit 1 or more\n');
  });

  it('prints help without setting an error exit code', async () => {
    await run('--help');
    expect(process.exitCode).toBeUndefined();
    expect(stdout).toContain('Usage: tool');
    expect(stdout).toContain('get');
    expect(stdout).toMatch(/-h, --help +display help \(--verbose: with all subcommands\)\n/);
    expect(stderr).toBe('');
  });

  it('prints the reference of every command for --help --verbose, without an exit code', async () => {
    await run('--help', '--verbose');
    expect(process.exitCode).toBeUndefined();
    expect(stderr).toBe('');
    expect(stdout.match(/^#+ .+$/gm)).toEqual(['# tool', '## tool get', '## tool fail']);
  });

  it("prints only a subcommand's reference for <command> --help --verbose, whatever flags come with it", async () => {
    await run('get', '--bogus', '--verbose', '-h');
    expect(process.exitCode).toBeUndefined();
    expect(stdout).toMatch(/^# tool get\n\n```text\nUsage: tool get \[options\] <id>\n/);
    expect(stdout).not.toContain('## ');
  });
});

describe('option parsers', () => {
  it('positiveInt rejects 0, negatives, fractions, words and unsafe integers with a usage error', () => {
    const parse = positiveInt('--limit');
    for (const value of ['0', '-1', '1.5', 'abc', '', ' 1', '1e3', '0x10', '+1', '99999999999999999999']) {
      let thrown: unknown;
      try {
        parse(value);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, value).toBeInstanceOf(ClawError);
      expect((thrown as ClawError).kind).toBe('usage');
      expect((thrown as ClawError).message).toBe(`--limit must be a positive integer, got ${JSON.stringify(value)}`);
    }
  });

  it('positiveInt accepts positive whole numbers', () => {
    const parse = positiveInt('--limit');
    expect(parse('1')).toBe(1);
    expect(parse('42')).toBe(42);
    expect(parse('007')).toBe(7);
    expect(parse(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('nonNegativeInt accepts 0 and rejects negatives and fractions', () => {
    const parse = nonNegativeInt('--after');
    expect(parse('0')).toBe(0);
    expect(parse('15')).toBe(15);
    for (const value of ['-1', '1.5', 'x', '']) {
      expect(() => parse(value)).toThrow(ClawError);
    }
  });
});

describe('printers', () => {
  it('printJson writes one JSON line and printLines one write of lines', () => {
    printJson({ a: 1 });
    printLines(['x', 'y']);
    printLines([]);
    expect(stdout).toBe('{"a":1}\nx\ny\n');
  });
});
