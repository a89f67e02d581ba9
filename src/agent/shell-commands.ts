import parse from '@ericcornelissen/bash-parser';
import { split } from 'shlex';

/**
 * The simple commands a bash command line runs, found anywhere in it: pipelines, lists,
 * subshells, loops, functions, `$(...)` and backticks. It errs towards seeing more commands,
 * never fewer (a here-document's lines are read as commands).
 */
export interface ShellCommand {
  /**
   * Its name and arguments as written: quotes removed where the word has no expansion (`'a b'` →
   * `a b`), the word's text as is where it has one (`"$HOME"/x`). Empty for an assignment alone.
   */
  words: string[];
  /** How many of `words`, from the first, are literal (no expansion, nor a redirection before them). */
  literal: number;
  /** Its redirections: the operator as written (`>`, `>>`, `<`, `>&`) and the file. */
  redirects: { op: string; file: string }[];
  /** Whether its name is computed when it runs (`$cmd`) or it runs with a changed environment (`PATH=. ls`). */
  computed: boolean;
  /** The commands of the pipeline stage before it: their output is its input. */
  pipedFrom: ShellCommand[];
  /** The command one of whose words it is, as `$(...)` or backticks: its output becomes that word. */
  within: ShellCommand | null;
}

/** The line's commands, or null for a syntax error. */
export function shellCommands(line: string): ShellCommand[] | null {
  return readLine(line)?.commands ?? null;
}

/**
 * The line's commands, each as its literal words (`git status -s` → ["git", "status", "-s"]), up
 * to the first word that is not literal. Null when the line cannot be read this way: a syntax
 * error, or a command whose name is computed when it runs (`$cmd`, `$(which rm)`), which no
 * pattern can be said to match, one that runs with a changed environment (`PATH=. ls`), or an
 * arithmetic expansion (bash runs `$((a);(b))` as commands). So a policy that allows only listed
 * programs asks about what it cannot read.
 */
export function commandsOf(line: string): string[][] | null {
  const read = readLine(line);
  if (read === null || read.unreadable || read.commands.some((command) => command.computed)) return null;
  return read.commands.filter((command) => command.words.length > 0).map((command) => command.words.slice(0, command.literal));
}

type Node = Record<string, unknown>;
/** A word or a redirection of a command, as the parser gives it. */
type Part = { type?: unknown; text?: unknown; expansion?: unknown; op?: { text?: unknown }; file?: { text?: unknown } };

function readLine(line: string): { commands: ShellCommand[]; unreadable: boolean } | null {
  let script: unknown;
  try {
    script = parse(line, { mode: 'bash' });
  } catch {
    return null;
  }
  const commands: ShellCommand[] = [];
  let unreadable = false;
  /** Reads `node`'s commands into `commands` and returns them, in order. */
  const visit = (node: unknown, within: ShellCommand | null): ShellCommand[] => {
    if (Array.isArray(node)) return node.flatMap((item) => visit(item, within));
    if (node === null || typeof node !== 'object') return [];
    const record = node as Node;
    // Bash runs `$((a);(b))` as commands when it is no arithmetic, and the parser reads
    // arithmetic by other rules than bash: what is in one is not known.
    if (record.type === 'ArithmeticExpansion') unreadable = true;
    // The parser leaves `${x:-$(cmd)}` unread: a command hidden there is not seen.
    if (typeof record.text === 'string' && Array.isArray(record.expansion) && /\$\(|`/.test(record.text)) {
      if (record.expansion.some((part: { type?: unknown }) => part.type === 'ParameterExpansion')) unreadable = true;
    }
    if (record.type === 'Command') {
      const command = readCommand(record, within);
      commands.push(command);
      // What runs inside its words ($(...), backticks) is within it.
      const inner = Object.entries(record).flatMap(([key, value]) => (key === 'name' || key === 'prefix' || key === 'suffix' ? visit(value, command) : []));
      return [command, ...inner];
    }
    if (record.type === 'Pipeline' && Array.isArray(record.commands)) {
      const stages = record.commands.map((stage) => visit(stage, within));
      stages.forEach((stage, i) => {
        for (const command of stage) if (i > 0 && command.pipedFrom.length === 0 && command.within === within) command.pipedFrom = stages[i - 1]!;
      });
      return stages.flat();
    }
    return Object.values(record).flatMap((value) => visit(value, within));
  };
  visit(script, null);
  return { commands, unreadable };
}

function readCommand(record: Node, within: ShellCommand | null): ShellCommand {
  const name = record.name as { text?: unknown; expansion?: unknown } | undefined;
  // `PATH=. ls` runs another ls than the one a pattern names.
  const assigns = Array.isArray(record.prefix) && record.prefix.some((part: { type?: unknown }) => part.type === 'AssignmentWord');
  const command: ShellCommand = { words: [], literal: 0, redirects: [], computed: false, pipedFrom: [], within };
  const redirect = (part: Part) => command.redirects.push({ op: String(part.op?.text ?? ''), file: String(part.file?.text ?? '') });
  for (const part of (Array.isArray(record.prefix) ? record.prefix : []) as Part[]) if (part.type === 'Redirect') redirect(part);
  if (name === undefined) return command;
  command.computed = typeof name.text !== 'string' || name.expansion !== undefined || assigns;
  let literal = !command.computed;
  for (const part of [name, ...(Array.isArray(record.suffix) ? record.suffix : [])] as Part[]) {
    if (part.type === 'Redirect') {
      redirect(part);
      literal = false;
    } else if (typeof part.text === 'string' && part.type === 'Word') {
      literal &&= part.expansion === undefined;
      command.words.push(part.text);
      if (literal) command.literal++;
    } else {
      literal = false;
    }
  }
  return command;
}

/**
 * A rough reading of a line the parser cannot read (a process substitution `<(...)`, which it
 * does not know, or quotes nested in a substitution it gets wrong), for a reader that must see
 * something rather than nothing: split at the shell's operators, then into words with shell
 * quoting. A `$(...)`, `<(...)` or backtick substitution is a command within the one whose word
 * it is, and that word becomes what bash passes for a process substitution (`/dev/fd/63`).
 */
export function roughCommands(line: string): ShellCommand[] {
  // Innermost first, each replaced by a token naming it, until none is left.
  const substitutions: string[] = [];
  let text = line;
  for (let before = ''; before !== text; ) {
    before = text;
    text = text.replace(/[$<]\(([^()]*)\)|`([^`]*)`/g, (_, group?: string, backticks?: string) => `${SUBSTITUTION}${substitutions.push(group ?? backticks ?? '') - 1}_`);
  }
  return roughLine(text, substitutions);
}

const SUBSTITUTION = '__theclaw_substitution_';
const SUBSTITUTION_TOKEN = new RegExp(`${SUBSTITUTION}(\\d+)_`, 'g');

function roughLine(text: string, substitutions: readonly string[]): ShellCommand[] {
  const commands: ShellCommand[] = [];
  for (const statement of text.split(/&&|\|\||[;&\n]/)) {
    let previous: ShellCommand[] = [];
    for (const stage of statement.split(/(?<![|>])\|(?!\|)/)) {
      const words = roughWords(stage);
      if (words.length === 0) continue;
      const command: ShellCommand = { words: [], literal: 0, redirects: [], computed: true, pipedFrom: previous, within: null };
      const inner: ShellCommand[] = [];
      words.forEach((word, i) => {
        for (const [, index] of word.matchAll(SUBSTITUTION_TOKEN)) inner.push(...roughLine(substitutions[Number(index)] ?? '', substitutions));
        const plain = word.replace(SUBSTITUTION_TOKEN, '/dev/fd/63');
        const redirect = /^\d*([<>]+&?|&>+)(.*)$/.exec(plain);
        if (redirect) command.redirects.push({ op: redirect[1]!, file: redirect[2] || (words[i + 1] ?? '').replace(SUBSTITUTION_TOKEN, '/dev/fd/63') });
        else command.words.push(plain);
      });
      for (const found of inner) found.within ??= command;
      commands.push(command, ...inner);
      previous = [command];
    }
  }
  return commands;
}

function roughWords(text: string): string[] {
  try {
    return split(text);
  } catch {
    return text.split(/\s+/).filter(Boolean); // an unclosed quote
  }
}
