import { spawnSync, type ChildProcess } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectClawError } from '../testing/index.js';
import { joinCommand, spawnCommand, splitCommand } from './command.js';

/** Arguments full of the characters quoting has to get right. */
const trickyArg = fc
  .array(fc.constantFrom("'", '"', '\\', '$', '`', ';', '&', '|', '(', ')', '$(', "$'", '$"', '\\\\', "\\'", '\\"', ' ', '\t', '\n', '\r', '*', '~', '#', '!', 'a', 'é', '😀', '%', '=', '-'), {
    maxLength: 12,
  })
  .map((parts) => parts.join(''));

const arg = fc.oneof(
  trickyArg,
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }).filter((s) => !s.includes('\0')),
);

const argv = fc
  .tuple(
    fc.oneof(trickyArg, arg).filter((s) => s !== ''),
    fc.array(arg, { maxLength: 6 }),
  )
  .map(([program, args]) => [program, ...args]);

describe('splitCommand', () => {
  it('splits on whitespace like a POSIX shell', () => {
    expect(splitCommand('agent run admin')).toEqual(['agent', 'run', 'admin']);
    expect(splitCommand('  agent\trun \n admin  ')).toEqual(['agent', 'run', 'admin']);
    expect(splitCommand('a\\ b c')).toEqual(['a b', 'c']);
  });

  it('keeps ;, $(...), backticks and quotes as literal characters inside quoted args', () => {
    expect(splitCommand(`notify --text "a; rm -rf /" '$(whoami)' "\`id\`" "it's" 'say "hi"'`)).toEqual(['notify', '--text', 'a; rm -rf /', '$(whoami)', '`id`', "it's", 'say "hi"']);
    expect(splitCommand(`echo "$(cat /etc/passwd)" '&&' "|" '>' out`)).toEqual(['echo', '$(cat /etc/passwd)', '&&', '|', '>', 'out']);
    expect(splitCommand(`echo "a\\"b" 'c\\d'`)).toEqual(['echo', 'a"b', 'c\\d']);
  });

  it('never interprets shell operators even when unquoted', () => {
    expect(splitCommand('echo a;b')).toEqual(['echo', 'a;b']);
    expect(splitCommand('echo a && b')).toEqual(['echo', 'a', '&&', 'b']);
    expect(splitCommand('echo $HOME `id`')).toEqual(['echo', '$HOME', '`id`']);
  });

  it('keeps empty quoted arguments', () => {
    expect(splitCommand(`cmd '' ""`)).toEqual(['cmd', '', '']);
  });

  it('throws a usage error for unbalanced quotes and a trailing escape', () => {
    for (const command of [`echo "abc`, `echo 'abc`, `echo "it's`, `echo abc\\`, `'`]) {
      const error = expectClawError(() => splitCommand(command), 'usage');
      expect(error.message).toContain(JSON.stringify(command));
      expect(error.suggestion).toBeTruthy();
    }
  });

  it('throws a usage error for an empty command or an empty program', () => {
    for (const command of ['', '   ', '\n\t', "''", '"" arg']) {
      const error = expectClawError(() => splitCommand(command), 'usage');
      expect(error.message).toBe('the command is empty');
    }
  });
});

describe('joinCommand', () => {
  it('leaves plain words unquoted and quotes the rest', () => {
    expect(joinCommand(['agent', 'run', 'admin', '--limit=5', 'a/b.c'])).toBe('agent run admin --limit=5 a/b.c');
    expect(joinCommand(['echo', 'a b', "it's", ''])).toBe(`echo 'a b' 'it'\\''s' ''`);
  });

  it('round-trips through splitCommand for arbitrary argv', () => {
    fc.assert(
      fc.property(argv, (words) => {
        expect(splitCommand(joinCommand(words))).toEqual(words);
      }),
      { numRuns: 1000 },
    );
  });

  it('round-trips arguments mixing backslashes, double quotes and single quotes', () => {
    for (const words of [
      ['x', "\\\\'"],
      ['x', `\\"'`],
      ['x', `"'\\\\"`],
      ['x', "\\'"],
      ['x', `$'a'`],
      ['x', `$"a"`],
    ]) {
      expect(splitCommand(joinCommand(words))).toEqual(words);
    }
  });

  it('means the same argv to a real POSIX shell', () => {
    fc.assert(
      fc.property(fc.array(trickyArg, { minLength: 1, maxLength: 4 }), (args) => {
        const command = joinCommand(['printf', '%s\\0', ...args]);
        const result = spawnSync('sh', ['-c', command], { encoding: 'utf8' });
        expect(result.status).toBe(0);
        expect(result.stdout.split('\0').slice(0, -1)).toEqual(args);
      }),
      { numRuns: 50 },
    );
  });

  it('produces a command splitCommand rejects when the program is empty', () => {
    expectClawError(() => splitCommand(joinCommand(['', 'x'])), 'usage');
  });
});

describe('spawnCommand', () => {
  const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  it('starts the argv without a shell, leading its own process group', async () => {
    const spawned = spawnCommand(joinCommand([process.execPath, '-e', 'process.exit(process.pid === Number(process.argv[1]) ? 7 : 1)', '$$; true']), { env: process.env, stdio: 'ignore' });
    expect(spawned.ok).toBe(true);
    if (!spawned.ok) return;
    expect(await exited(spawned.child)).toBe(1); // '$$; true' reached the program as it was
    const leader = spawnCommand(joinCommand(['bash', '-c', 'test "$(ps -o pgid= -p $$ | tr -d " ")" = "$$"']), { env: process.env, stdio: 'ignore' });
    expect(leader.ok && (await exited(leader.child))).toBe(0);
  });

  it('reports a program that cannot be found or a command that cannot be split, without throwing', () => {
    expect(spawnCommand('no-such-program-anywhere --flag', { env: process.env, stdio: 'ignore' })).toEqual({
      ok: false,
      error: 'cannot run "no-such-program-anywhere --flag": program not found or not executable',
    });
    const unsplittable = spawnCommand('handler "unclosed', { env: process.env, stdio: 'ignore' });
    expect(unsplittable.ok).toBe(false);
    expect(!unsplittable.ok && unsplittable.error).toMatch(/cannot split the command/);
  });
});
