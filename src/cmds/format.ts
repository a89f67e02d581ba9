import type { Entry, EntryKind, Info, OwnCommand } from './types.js';

/**
 * Output of `cmds` for people and for LLMs. A terminal gets aligned plain text; a pipe — which is
 * what an agent sees through `bash_exec` — gets compact Markdown. Answers are kept small: a `find`
 * answer fits in 2 KB by default, descriptions are one line of at most 100 characters.
 */

export type TextMode = 'text' | 'markdown';

export const DESCRIPTION_CHARS = 100;
/** The byte budget of a default `find` answer: under 2 KB. */
export const FIND_BUDGET_BYTES = 2000;

const OPTION_CHARS = 160;
const EXAMPLE_CHARS = 200;
const MAX_EXAMPLES = 6;

/** One line of at most `max` characters, cut with an ellipsis. */
export function truncateLine(text: string, max = DESCRIPTION_CHARS): string {
  const line = text.replace(/\s+/g, ' ').trim();
  const chars = [...line];
  return chars.length <= max
    ? line
    : `${chars
        .slice(0, max - 1)
        .join('')
        .trimEnd()}…`;
}

export interface FindFormatOptions {
  /** Drop results that would take the answer past this many bytes. Default: no budget. */
  maxBytes?: number;
}

/** A `find` answer; empty string when nothing matched. */
export function formatFind(entries: readonly Entry[], mode: TextMode, options: FindFormatOptions = {}): string {
  if (entries.length === 0) return '';
  const footer = mode === 'markdown' ? 'Usage, options, examples: `cmds info <name>`' : "'cmds info <name>' shows usage, options and examples";
  const lines = mode === 'markdown' ? entries.map(markdownItem) : alignedRows(entries.map((entry) => [truncateLine(entry.name, 60), entry.kind, truncateLine(entry.description)]));
  return fitLines(lines, footer, options.maxBytes);
}

export interface ListFormatOptions {
  /** Executables on PATH not listed. */
  omittedExecutables?: number;
}

/** A `list` answer: TheClaw commands, skills, executables, each under a heading. */
export function formatList(entries: readonly Entry[], mode: TextMode, options: ListFormatOptions = {}): string {
  const sections: [EntryKind, string][] = [
    ['theclaw', 'TheClaw commands'],
    ['skill', 'Skills'],
    ['executable', 'Executables on PATH'],
  ];
  const out: string[] = [];
  for (const [kind, title] of sections) {
    const group = entries.filter((entry) => entry.kind === kind);
    if (group.length === 0) continue;
    if (out.length > 0) out.push('');
    if (mode === 'markdown') out.push(`## ${title}`, ...group.map(markdownItem));
    else
      out.push(
        `${title}:`,
        ...alignedRows(
          group.map((entry) => [entry.name, truncateLine(entry.description)]),
          '  ',
        ),
      );
  }
  const omitted = options.omittedExecutables ?? 0;
  if (omitted > 0) {
    const more = `${omitted} more executables on PATH: cmds find <words>, or cmds list --all`;
    out.push('', mode === 'markdown' ? `(${more.replace(/cmds [^,]+/g, (command) => `\`${command}\``)})` : `(${more})`);
  }
  return out.length > 0 ? `${out.join('\n')}\n` : '';
}

/** A `cmds info` answer. */
export function formatInfo(info: Info, mode: TextMode): string {
  switch (info.kind) {
    case 'theclaw':
      return mode === 'markdown' ? commandMarkdown(info.command) : commandText(info.command);
    case 'skill': {
      const { skill, body, truncated } = info;
      const head = mode === 'markdown' ? [`# ${skill.name} (skill)`, skill.description, `Path: ${skill.path}`] : [`${skill.name} (skill) - ${skill.description}`, `Path: ${skill.path}`];
      const tail = truncated ? [`… (truncated; read it all: cat ${skill.path})`] : [];
      return `${[...head, '', body.trimEnd(), ...tail].join('\n')}\n`;
    }
    case 'executable': {
      const { executable: e } = info;
      const description = e.description || '(the system has no description of it)';
      const lines =
        mode === 'markdown'
          ? [`# ${e.name} (executable)`, description, `Path: ${e.path}`, `More: \`${e.name} --help\` or \`man ${e.name}\``]
          : [`${e.name} (executable) - ${description}`, `Path: ${e.path}`, `More: ${e.name} --help, or man ${e.name}`];
      return `${lines.join('\n')}\n`;
    }
    default: {
      const never: never = info;
      return never;
    }
  }
}

function commandMarkdown(command: OwnCommand): string {
  const out = [`# ${command.name}`, command.description, '', `Usage: \`${command.usage}\``];
  if (command.arguments.length > 0) {
    out.push('', 'Arguments:', ...command.arguments.map((a) => `- \`${a.name}\`${a.description ? ` — ${truncateLine(a.description, OPTION_CHARS)}` : ''}`));
  }
  if (command.options.length > 0) {
    out.push('', 'Options:', ...command.options.map((o) => `- \`${o.flags}\`${o.required ? ' (required)' : ''}${o.description ? ` — ${truncateLine(o.description, OPTION_CHARS)}` : ''}`));
  }
  if (command.subcommands.length > 0) {
    out.push('', 'Commands:', ...command.subcommands.map((s) => `- \`${s.name}\` — ${truncateLine(s.description)}`));
  }
  const examples = boundedExamples(command.examples);
  if (examples.length > 0) out.push('', 'Examples:', '```sh', ...examples, '```');
  return `${out.join('\n')}\n`;
}

function commandText(command: OwnCommand): string {
  const out = [`${command.name} - ${command.description}`, '', `Usage: ${command.usage}`];
  if (command.arguments.length > 0) {
    out.push(
      '',
      'Arguments:',
      ...alignedRows(
        command.arguments.map((a) => [a.name, truncateLine(a.description, OPTION_CHARS)]),
        '  ',
      ),
    );
  }
  if (command.options.length > 0) {
    const rows = command.options.map((o) => [o.flags, truncateLine(`${o.description}${o.required ? ' (required)' : ''}`, OPTION_CHARS)]);
    out.push('', 'Options:', ...alignedRows(rows, '  '));
  }
  if (command.subcommands.length > 0) {
    out.push(
      '',
      'Commands:',
      ...alignedRows(
        command.subcommands.map((s) => [s.name, truncateLine(s.description)]),
        '  ',
      ),
    );
  }
  const examples = boundedExamples(command.examples);
  if (examples.length > 0) out.push('', 'Examples:', ...examples.map((example) => `  ${example}`));
  return `${out.join('\n')}\n`;
}

function boundedExamples(examples: readonly string[]): string[] {
  return examples.slice(0, MAX_EXAMPLES).map((example) => truncateLine(example, EXAMPLE_CHARS));
}

function markdownItem(entry: Entry): string {
  const label = entry.kind === 'skill' ? ' (skill)' : '';
  const description = truncateLine(entry.description);
  return `- \`${truncateLine(entry.name, 60)}\`${label}${description ? ` — ${description}` : ''}`;
}

/** Columns padded to the widest cell (the first columns capped at 32, so one long name does not push everything right). */
function alignedRows(rows: readonly string[][], indent = ''): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.slice(0, -1).forEach((cell, i) => {
      widths[i] = Math.min(32, Math.max(widths[i] ?? 0, cell.length));
    });
  }
  return rows.map((row) => `${indent}${row.map((cell, i) => (i < row.length - 1 ? cell.padEnd(widths[i] ?? 0) : cell)).join('  ')}`.trimEnd());
}

function fitLines(lines: readonly string[], footer: string, maxBytes: number | undefined): string {
  const kept: string[] = [];
  let bytes = Buffer.byteLength(footer) + 2;
  for (const line of lines) {
    const size = Buffer.byteLength(line) + 1;
    if (maxBytes !== undefined && bytes + size > maxBytes) break;
    kept.push(line);
    bytes += size;
  }
  return `${[...kept, '', footer].join('\n')}\n`;
}
