import { type Command, Option } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProgram, withExamples } from '../core/cli.js';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import { formatInfo } from './format.js';
import { indexProgram, loadOwnCommands } from './own-commands.js';

describe('indexProgram', () => {
  function demoProgram(): Command {
    const program = createProgram('demo', 'A demo tool.');
    withExamples(program, ['demo run x']);
    withExamples(
      program
        .command('run')
        .description('run   a\n  thing')
        .argument('<target>', 'what to run')
        .argument('[extra...]', 'more targets')
        .requiredOption('--mode <mode>', 'how to run')
        .option('-v, --verbose', 'say more')
        .addOption(new Option('--secret', 'internal').hideHelp()),
      ['demo run x --mode fast'],
    );
    const group = program.command('group').description('a group');
    group.command('leaf').description('a leaf').option('--json', 'print JSON');
    program.command('hidden', { hidden: true }).description('not for agents');
    return program;
  }

  it('gives one entry per tool and (nested) subcommand, with options, arguments and examples', () => {
    const entries = indexProgram(demoProgram());
    expect(entries.map((e) => e.name)).toEqual(['demo', 'demo run', 'demo group', 'demo group leaf']);
    expect(entries[0]).toMatchObject({
      kind: 'theclaw',
      description: 'A demo tool.',
      usage: 'demo <command> [options]',
      examples: ['demo run x'],
      subcommands: [
        { name: 'demo run', description: 'run a thing' },
        { name: 'demo group', description: 'a group' },
      ],
    });
    expect(entries[1]).toEqual({
      name: 'demo run',
      kind: 'theclaw',
      description: 'run a thing',
      usage: 'demo run <target> [extra...] --mode <mode> [--verbose]',
      arguments: [
        { name: '<target>', description: 'what to run', required: true },
        { name: '[extra...]', description: 'more targets', required: false },
      ],
      options: [
        { flags: '--mode <mode>', description: 'how to run', required: true },
        { flags: '-v, --verbose', description: 'say more', required: false },
      ],
      examples: ['demo run x --mode fast'],
      subcommands: [],
    });
    expect(entries[3]).toMatchObject({ usage: 'demo group leaf [--json]', examples: [] });
  });
});

describe("TheClaw's own commands", () => {
  it('come from the real CLI definitions, cmds included', async () => {
    const names = (await loadOwnCommands()).map((e) => e.name);
    expect(names).toEqual(expect.arrayContaining(['thread', 'thread push', 'notifier timer add', 'cmds', 'cmds find', 'cmds info', 'cmds list']));
  });

  it('describe thread push with its idempotency key and an example', async () => {
    const push = (await loadOwnCommands()).find((e) => e.name === 'thread push')!;
    expect(push.options.map((o) => o.flags)).toContain('--idempotency-key <key>');
    expect(push.options.find((o) => o.flags === '--thread <path>')?.required).toBe(true);
    expect(push.examples[0]).toMatch(/^thread push --thread /);
  });

  it('each fit a cmds info answer under 2 KB, in both text forms', async () => {
    for (const command of await loadOwnCommands()) {
      for (const mode of ['text', 'markdown'] as const) {
        const bytes = Buffer.byteLength(formatInfo({ kind: 'theclaw', command }, mode));
        expect(bytes, `${command.name} (${mode})`).toBeLessThan(2048);
      }
    }
  });

  it('each have a description and, for runnable commands, an example', async () => {
    for (const command of await loadOwnCommands()) {
      expect(command.description, command.name).not.toBe('');
      if (command.subcommands.length === 0) expect(command.examples.length, command.name).toBeGreaterThan(0);
    }
  });
});

describe('cmds find, for the web tool', () => {
  let test: TestHome;
  beforeAll(() => {
    test = createTestHome();
  });
  afterAll(() => test.cleanup());

  it.each([
    ['read a web page', 'web fetch'],
    ['search the web', 'web search'],
  ])('ranks the command that does it first for %j, among every command, skill and executable', async (query, command) => {
    const result = await runTool('cmds', ['find', query, '--json'], test.env);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { name: string }[])[0]?.name).toBe(command);
  });
});
