import type { Argument, Command, Option } from 'commander';
import { examplesOf } from '../core/cli.js';
import { visibleSubcommands } from '../core/reference.js';
import type { OwnCommand } from './types.js';

/** Builds a tool's commander program without running it. */
export type ProgramFactory = () => Command | Promise<Command>;

/**
 * TheClaw's CLIs as cmds indexes them: one line per tool. Each `program.ts` imports only commander
 * and core/cli (its command implementations load lazily when an action runs), so building every
 * program here costs a few milliseconds and never opens SQLite or an LLM client.
 */
export const THECLAW_PROGRAMS: readonly ProgramFactory[] = [
  async () => (await import('../thread/program.js')).createThreadProgram(),
  async () => (await import('../notifier/program.js')).createNotifierProgram(),
  async () => (await import('../pai/program.js')).createPaiProgram(),
  async () => (await import('../xgw/program.js')).createXgwProgram(),
  async () => (await import('../agent/program.js')).createAgentProgram(),
  async () => (await import('./program.js')).createCmdsProgram(),
  async () => (await import('../web/program.js')).createWebProgram(),
  async () => (await import('../browser/program.js')).createBrowserProgram(),
  async () => (await import('../theclaw/program.js')).createTheclawProgram(),
];

/** Builds the programs of `factories` (default: all of TheClaw's) and indexes them. */
export async function loadOwnCommands(factories: readonly ProgramFactory[] = THECLAW_PROGRAMS): Promise<OwnCommand[]> {
  const programs = await Promise.all(factories.map((factory) => factory()));
  return programs.flatMap((program) => indexProgram(program));
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
