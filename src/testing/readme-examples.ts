/**
 * The examples of a Markdown document: every fenced block whose info string is `sh`, `bash` or
 * `shell`, cut into commands as a reader would type them, and every `yaml` block (a config file,
 * or a part of one) as one example, each with the heading it sits under and the line it starts
 * on. `src/e2e/readme-examples.test.ts` runs the commands against the built tools and has the
 * configs checked by the tools' schemas.
 *
 * An example that cannot run in a test (it needs a real account, a browser, root...) is marked just
 * before its fence with an HTML comment, which a rendered page does not show:
 *
 *   <!-- example: not run (needs a Telegram bot token) -->              the whole block
 *   <!-- example: not run `xgw pair approve` (needs a stranger's code) -->   the commands that start so
 *
 * A marker that does not parse, is not followed by an example block, or names no command of it is an
 * error, so a typo or a stale marker cannot silently stop an example from running.
 */

export interface ExampleCommand {
  /** 1-based line of the document the command starts on. */
  line: number;
  /** As written, continuation lines (`\` at the end) joined with newlines; a yaml block's whole text. */
  text: string;
  /** Why it is not run, when its block's marker names it (or the whole block). */
  notRun?: string;
}

export interface ExampleBlock {
  /** The nearest heading above the block, as written (`` `thread` — durable event streams ``). */
  section: string;
  /** 1-based line of the opening fence. */
  line: number;
  language: 'shell' | 'yaml';
  commands: ExampleCommand[];
}

const SHELL_LANGUAGES = new Set(['sh', 'bash', 'shell']);
const EXAMPLE_BLOCKS = 'sh, bash, shell or yaml';
const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;
const MARKER_START = /^\s*<!--\s*example\s*:/;
const MARKER = /^\s*<!--\s*example\s*:\s*not run\s*((?:`[^`]+`\s*,?\s*)*)\(([^)]+)\)\s*-->\s*$/;

interface Marker {
  line: number;
  reason: string;
  /** Command prefixes; empty: the whole block. */
  prefixes: string[];
}

export function extractExamples(markdown: string): ExampleBlock[] {
  const lines = markdown.split(/\r?\n/);
  const blocks: ExampleBlock[] = [];
  let section = '';
  let marker: Marker | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const [, indent, opening, language] = fence as unknown as [string, string, string, string];
      const end = closingFence(lines, i + 1, opening);
      const body = lines.slice(i + 1, end).map((text) => (text.startsWith(indent) ? text.slice(indent.length) : text.trimStart()));
      if (SHELL_LANGUAGES.has(language)) {
        blocks.push({ section, line: i + 1, language: 'shell', commands: applyMarker(splitCommands(body, i + 2), marker) });
      } else if (language === 'yaml') {
        blocks.push({ section, line: i + 1, language: 'yaml', commands: applyMarker([{ line: i + 2, text: body.join('\n') }], marker) });
      } else if (marker) {
        throw new Error(`line ${marker.line}: an example marker must stand just before a ${EXAMPLE_BLOCKS} block (this one is followed by a ${language || 'plain'} block)`);
      }
      marker = undefined;
      i = end;
      continue;
    }
    if (line.trim() === '') continue;
    if (marker) throw new Error(`line ${marker.line}: an example marker must stand just before a ${EXAMPLE_BLOCKS} block`);
    if (MARKER_START.test(line)) {
      marker = parseMarker(line, i + 1);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) section = heading[1]!;
  }
  if (marker) throw new Error(`line ${marker.line}: an example marker must stand just before a ${EXAMPLE_BLOCKS} block`);
  return blocks;
}

/** The index of the line that closes a fence opened with `opening` (or the end: an unclosed fence runs to it). */
function closingFence(lines: string[], from: number, opening: string): number {
  const closing = new RegExp(`^\\s*${opening[0] === '`' ? '`' : '~'}{${opening.length},}\\s*$`);
  for (let i = from; i < lines.length; i++) if (closing.test(lines[i]!)) return i;
  return lines.length;
}

function parseMarker(line: string, number: number): Marker {
  const match = MARKER.exec(line);
  if (!match) throw new Error(`line ${number}: unreadable example marker ${line.trim()} - write <!-- example: not run (why) --> or <!-- example: not run \`command\` (why) -->`);
  const prefixes = [...match[1]!.matchAll(/`([^`]+)`/g)].map((prefix) => prefix[1]!.trim());
  return { line: number, reason: match[2]!.trim(), prefixes };
}

/** One command per line, but a line ending in `\` goes on; blank lines and comment lines are no commands. */
function splitCommands(body: string[], firstLine: number): ExampleCommand[] {
  const commands: ExampleCommand[] = [];
  let current: ExampleCommand | undefined;
  body.forEach((text, index) => {
    if (current) current.text += `\n${text}`;
    else if (text.trim() === '' || text.trimStart().startsWith('#')) return;
    else current = { line: firstLine + index, text };
    if (!/\\$/.test(text)) {
      commands.push(current);
      current = undefined;
    }
  });
  if (current) commands.push(current);
  return commands;
}

function applyMarker(commands: ExampleCommand[], marker: Marker | undefined): ExampleCommand[] {
  if (!marker) return commands;
  if (marker.prefixes.length === 0) return commands.map((command) => ({ ...command, notRun: marker.reason }));
  for (const prefix of marker.prefixes) {
    if (!commands.some((command) => command.text.startsWith(prefix))) {
      throw new Error(`line ${marker.line}: the example marker names \`${prefix}\`, which no command of the block below starts with`);
    }
  }
  return commands.map((command) => (marker.prefixes.some((prefix) => command.text.startsWith(prefix)) ? { ...command, notRun: marker.reason } : command));
}
