import type { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { createProgram, withExamples } from './cli.js';
import { commandPath, isReferenceRequest, renderReference, requestedCommand, visibleSubcommands } from './reference.js';

/** `demo` with a leaf, a group with two leaves, a hidden command and examples on both levels. */
function demoProgram(): Command {
  const program = createProgram('demo', 'A demo tool whose description is long enough to need wrapping on a narrow terminal.');
  withExamples(program, ['demo run x']);
  withExamples(program.command('run').description('run a thing').option('--mode <mode>', 'how to run'), ['demo run x --mode fast']);
  const group = program.command('group').alias('g').description('a group');
  withExamples(group.command('leaf').description('a leaf'), ['demo group leaf']);
  group.command('other').description('another leaf');
  program.command('secret', { hidden: true }).description('not listed');
  return program;
}

const headings = (text: string) => text.match(/^#+ .+$/gm);

describe('renderReference', () => {
  const { columns, isTTY } = process.stdout;
  afterEach(() => Object.assign(process.stdout, { columns, isTTY }));

  it('gives the help of the program and of every visible subcommand, parents first, with their examples', () => {
    const reference = renderReference(demoProgram());
    expect(headings(reference)).toEqual(['# demo', '## demo run', '## demo group', '## demo group leaf', '## demo group other']);
    expect(reference).toContain('## demo run\n\n```text\nUsage: demo run [options]\n\nrun a thing\n');
    expect(reference).toContain('Examples:\n  demo run x --mode fast\n```\n');
    expect(reference).toContain('Examples:\n  demo group leaf\n```\n');
    expect(reference).not.toContain('## demo help');
  });

  it('does not depend on the width or colours of the terminal', () => {
    Object.assign(process.stdout, { isTTY: true, columns: 40 });
    const narrow = renderReference(demoProgram());
    Object.assign(process.stdout, { isTTY: true, columns: 250 });
    expect(renderReference(demoProgram())).toBe(narrow);
    expect(narrow).toContain('A demo tool whose description is long enough to need wrapping on a narrow terminal.');
  });

  it('leaves the command printing its ordinary help afterwards', () => {
    const program = demoProgram();
    const before = program.helpInformation();
    renderReference(program);
    expect(program.helpInformation()).toBe(before);
  });
});

describe('requestedCommand', () => {
  const path = (args: string[]) => commandPath(requestedCommand(demoProgram(), args));

  it('follows the leading subcommand names, by name or alias, and stops at anything else', () => {
    expect(path(['--help', '--verbose'])).toBe('demo');
    expect(path(['group', '--help', '--verbose'])).toBe('demo group');
    expect(path(['g', 'leaf', '--verbose', '-h'])).toBe('demo group leaf');
    expect(path(['run', 'group', '--help'])).toBe('demo run');
    expect(path(['secret', '--help'])).toBe('demo');
  });
});

describe('isReferenceRequest', () => {
  it('needs both a help flag and --verbose', () => {
    expect(isReferenceRequest(['--help', '--verbose'])).toBe(true);
    expect(isReferenceRequest(['run', '--verbose', '-h'])).toBe(true);
    expect(isReferenceRequest(['--help'])).toBe(false);
    expect(isReferenceRequest(['run', '--verbose'])).toBe(false);
  });
});

describe('visibleSubcommands', () => {
  it('leaves out hidden commands and the implicit help command', () => {
    expect(visibleSubcommands(demoProgram()).map((command) => command.name())).toEqual(['run', 'group']);
  });
});
