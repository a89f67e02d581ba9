import type { Argument, Command, Option } from 'commander';
import { examplesOf } from '../core/cli.js';
import { visibleSubcommands } from '../core/reference.js';
import ownCommands from './own-commands.json' with { type: 'json' };
import type { OwnCommand } from './types.js';

/**
 * TheClaw's CLIs as cmds indexes them, from their commander definitions: written by `npm run usage`
 * (scripts/usage.ts) into own-commands.json, which the build bundles into cmds. So cmds knows
 * every tool's commands without importing any tool; cmds/usage.test.ts holds the file to the
 * programs (stale: run npm run usage).
 */
export function loadOwnCommands(): OwnCommand[] {
  // Our own generated file, checked against the programs by a test: no schema to hold it to.
  return ownCommands as OwnCommand[];
}

/** The text of own-commands.json for `programs`, the tools' programs in the order cmds lists them. */
export function renderOwnCommands(programs: readonly Command[]): string {
  return `${JSON.stringify(programs.flatMap(indexProgram), null, 2)}\n`;
}

/** One entry for the program and one per (nested) subcommand, parents first. Hidden ones are left out. */
export function indexProgram(program: Command): OwnCommand[] {
  const entries: OwnCommand[] = [];
  const walk = (command: Command, path: string): void => {
    const children = visibleSubcommands(command);
    entries.push({
      name: path,
      kind: 'theclaw',
      description: oneLine(command.description()),
      usage: usageOf(command, path, children.length > 0),
      arguments: command.registeredArguments.map((argument) => ({
        name: argumentName(argument),
        description: oneLine(argument.description),
        required: argument.required,
      })),
      options: visibleOptions(command).map((option) => ({
        flags: option.flags,
        description: oneLine(option.description),
        required: option.mandatory,
      })),
      examples: examplesOf(command),
      subcommands: children.map((child) => ({ name: `${path} ${child.name()}`, description: oneLine(child.description()) })),
    });
    for (const child of children) walk(child, `${path} ${child.name()}`);
  };
  walk(program, program.name());
  return entries;
}

/**
 * A synopsis that shows what a caller must pass: `thread push --thread <path> [--source <address>]
 * ...`. Commander's own usage (`[options]`) hides the mandatory options an agent needs most.
 */
function usageOf(command: Command, path: string, hasChildren: boolean): string {
  if (hasChildren) return `${path} <command> [options]`;
  const parts = [path, ...command.registeredArguments.map(argumentName)];
  for (const option of visibleOptions(command)) {
    const synopsis = optionSynopsis(option);
    parts.push(option.mandatory ? synopsis : `[${synopsis}]`);
  }
  return parts.join(' ');
}

function optionSynopsis(option: Option): string {
  const value = /\s([<[].*[>\]])$/.exec(option.flags)?.[1];
  const flag = option.long ?? option.short ?? option.flags;
  return value ? `${flag} ${value}` : flag;
}

function argumentName(argument: Argument): string {
  const name = `${argument.name()}${argument.variadic ? '...' : ''}`;
  return argument.required ? `<${name}>` : `[${name}]`;
}

function visibleOptions(command: Command): readonly Option[] {
  return command.options.filter((option) => !option.hidden);
}

function oneLine(text: string | undefined): string {
  return (text ?? '').replace(/\s+/g, ' ').trim();
}
