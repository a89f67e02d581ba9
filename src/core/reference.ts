import type { Command } from 'commander';

/**
 * `<tool> [command...] --help --verbose`: the help of a command and of every subcommand below it,
 * as one Markdown document. It is what each tool's USAGE.md holds, so it must not vary with the
 * machine: the width is fixed, colours are off, and nothing in it is read from the environment.
 */
export const REFERENCE_WIDTH = 100;

/** Whether argv asks for the reference rather than for one command's help. */
export function isReferenceRequest(args: readonly string[]): boolean {
  return args.includes('--verbose') && (args.includes('--help') || args.includes('-h'));
}

/**
 * The command whose reference `args` (argv without node and script) asks for: the deepest
 * subcommand named by the leading words, so `notifier timer --help --verbose` covers `timer`.
 */
export function requestedCommand(program: Command, args: readonly string[]): Command {
  let command = program;
  for (const arg of args) {
    if (arg.startsWith('-')) continue;
    const sub = visibleSubcommands(command).find((child) => child.name() === arg || child.aliases().includes(arg));
    if (!sub) break;
    command = sub;
  }
  return command;
}

/** `# <path>` and the command's help, then a `## <path>` section per subcommand, parents first. */
export function renderReference(command: Command): string {
  const sections: string[] = [];
  const walk = (current: Command): void => {
    const heading = current === command ? '#' : '##';
    sections.push(`${heading} ${commandPath(current)}\n\n\`\`\`text\n${helpText(current).trimEnd()}\n\`\`\`\n`);
    for (const child of visibleSubcommands(current)) walk(child);
  };
  walk(command);
  return sections.join('\n');
}

/** The subcommands `--help` lists, without commander's implicit `help` command. */
export function visibleSubcommands(command: Command): Command[] {
  return command
    .createHelp()
    .visibleCommands(command)
    .filter((child) => command.commands.includes(child));
}

/** `notifier timer add`: the names from the program down to `command`. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let current: Command | null = command; current; current = current.parent) names.unshift(current.name());
  return names.join(' ');
}

/**
 * Exactly what `--help` prints for `command`, texts added with `addHelpText` (examples) included,
 * captured by pointing the command's output at a string for the duration of one `outputHelp`.
 */
function helpText(command: Command): string {
  let text = '';
  const output = command.configureOutput();
  command.configureOutput({
    writeOut: (chunk) => (text += chunk),
    getOutHelpWidth: () => REFERENCE_WIDTH,
    getOutHasColors: () => false,
  });
  try {
    command.outputHelp();
  } finally {
    command.configureOutput(output);
  }
  return text;
}
