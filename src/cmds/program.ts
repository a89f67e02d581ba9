import { Option, type Command } from 'commander';
import { createProgram, positiveInt, withExamples, jsonOption } from '../core/cli.js';

// The work is in commands.ts, imported only when a command runs.
const commands = () => import('./commands.js');
const skillsDir = () => new Option('--skills-dir <dir>', 'also read skills from <dir>/*/SKILL.md (repeatable)').argParser((dir: string, previous: string[] | undefined) => [...(previous ?? []), dir]);

/** The `cmds` CLI's definition; cmds indexes itself from it too. */
export function createCmdsProgram(): Command {
  const program = createProgram('cmds', 'Find the command or skill for a task: TheClaw tools, skills, and executables on PATH, with usage and examples.')
    .version('0.1.0')
    .addHelpText(
      'after',
      `
Sources: TheClaw's own commands (read from their definitions), skills (<dir>/SKILL.md with name and
description front matter) in $THECLAW_HOME/skills/, $THECLAW_AGENT_DIR/skills/ and --skills-dir,
and the executables on PATH (descriptions from apropos, cached in $THECLAW_HOME/cmds/).
Output: aligned text on a terminal, compact Markdown when piped, JSON with --json.`,
    );
  withExamples(program, ['cmds find "list files"', 'cmds find "push an event to a thread"', 'cmds info thread push', 'cmds list']);

  withExamples(
    program
      .command('find')
      .description('the commands and skills best matching what you want to do, best first')
      .argument('<query...>', 'what you want to do, in a few words')
      .option('--limit <n>', 'most results (default 8)', positiveInt('--limit'))
      .addOption(skillsDir())
      .addOption(jsonOption())
      .action(async (query: string[], options) => (await commands()).find(query, options)),
    ['cmds find "list files"', 'cmds find compress a directory --limit 3', 'cmds find timer --json'],
  );

  withExamples(
    program
      .command('info')
      .description("how to use one command or skill: usage, options and examples, or the skill's instructions")
      .argument('<name...>', 'a tool, a subcommand path (thread push), a skill or an executable')
      .addOption(skillsDir())
      .addOption(jsonOption())
      .action(async (name: string[], options) => (await commands()).info(name, options)),
    ['cmds info thread push', 'cmds info notifier timer add', 'cmds info jq'],
  );

  withExamples(
    program
      .command('list')
      .description('TheClaw commands, skills, and the everyday executables on PATH (--all: every executable)')
      .option('--all', 'list every executable on PATH')
      .addOption(skillsDir())
      .addOption(jsonOption())
      .action(async (options) => (await commands()).list(options)),
    ['cmds list', 'cmds list --all --json'],
  );
  return program;
}
