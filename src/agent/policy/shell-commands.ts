import { createRequire } from 'node:module';
import { split } from 'shlex';
import { runsOf, type Run } from './command-wrappers.js';
import { hidesCode } from './shell-names.js';

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
  /** For each of `words`, whether it has an expansion: its value is known only when it runs. */
  expands: boolean[];
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
 * to the first word that is not literal, and what each runs in turn (command-wrappers.ts: `sudo
 * rm x` runs `rm x`, `sh -c 'curl y'` runs `curl y`). Null when the line cannot be read this way:
 * a syntax error, or a command whose name is computed when it runs (`$cmd`, `$(which rm)`), which
 * no pattern can be said to match, one that runs with a changed environment (`PATH=. ls`), an
 * arithmetic expansion or command (bash runs `$((a);(b))` as commands), a parameter expansion
 * that may run code (`${x@P}`, `${!x}`, `${a[i]}`), a name that may (shell-names.ts), or what
 * a wrapper runs that cannot be read. So a policy that allows only listed programs asks about
 * what it cannot read.
 */
export function commandsOf(line: string): string[][] | null {
  return commandsWithin(line, 0, { scripts: MAX_SCRIPTS });
}

/**
 * How deep `eval` and `sh -c` are read within each other, and how many of them a line may have
 * (the parser starts anew for each, a millisecond or more), before the line counts as unreadable.
 */
const MAX_SCRIPT_DEPTH = 8;
const MAX_SCRIPTS = 100;

function commandsWithin(line: string, depth: number, budget: { scripts: number }): string[][] | null {
  const read = depth > MAX_SCRIPT_DEPTH || budget.scripts-- < 0 ? null : readLine(line);
  if (read === null || read.unreadable) return null;
  const found: string[][] = [];
  for (const command of read.commands) {
    if (command.computed) return null;
    if (command.words.length > 0 && !readRuns(command, { start: 0, end: command.words.length }, depth, budget, found)) return null;
  }
  return found;
}

/** Adds the words of the run and of all it runs to `found`; false when some cannot be read. */
function readRuns(command: ShellCommand, run: Run, depth: number, budget: { scripts: number }, found: string[][]): boolean {
  if ('script' in run) {
    const inner = commandsWithin(run.script, depth + 1, budget);
    if (inner === null) return false;
    for (const words of inner) found.push(words);
    return true;
  }
  const { words, literal, expands } = command;
  // `find -exec {} ;` runs the files it finds.
  if (run.start >= literal || words[run.start] === '{}' || hidesCode(words.slice(run.start, run.end), expands.slice(run.start, run.end))) return false;
  found.push(words.slice(run.start, Math.min(run.end, literal)));
  const runs = runsOf(words, literal, run.start, run.end);
  return runs?.every((inner) => readRuns(command, inner, depth, budget, found)) === true;
}

type Node = Record<string, unknown>;
/** A word or a redirection of a command, as the parser gives it. */
type Part = { type?: unknown; text?: unknown; expansion?: unknown; op?: { text?: unknown }; file?: { text?: unknown } };

type BashParse = typeof import('@ericcornelissen/bash-parser').default;
let bashParse: BashParse | undefined;

/**
 * The parser, loaded on the first command line rather than with this module: it and its
 * dependencies cost ~0.2 CPU-s to load, which every command that only imports the policy
 * (`theclaw status`, `theclaw down`) paid.
 */
function parse(...args: Parameters<BashParse>): ReturnType<BashParse> {
  bashParse ??= createRequire(import.meta.url)('@ericcornelissen/bash-parser') as BashParse;
  return bashParse(...args);
}

function readLine(line: string): { commands: ShellCommand[]; unreadable: boolean } | null {
  // The parser's time grows with the square of the nesting (a second for 4000 subshells in 16 KB),
  // and it starts itself anew for each substitution (a millisecond each).
  if (nestingDepth(line) > MAX_NESTING || substitutionCount(line) > MAX_SUBSTITUTIONS) return null;
  let script: unknown;
  try {
    script = parse(line, { mode: 'bash', insertLOC: true });
  } catch {
    return null;
  }
  const commands: ShellCommand[] = [];
  // Bash runs `((x))` as arithmetic, which the parser reads as two subshells (see shell-names.ts).
  let unreadable = line.includes('((');
  /** Reads `node`'s commands into `commands`, in order. */
  const visit = (node: unknown, within: ShellCommand | null): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item, within);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const record = node as Node;
    // Bash runs `$((a);(b))` as commands when it is no arithmetic, and the parser reads
    // arithmetic by other rules than bash: what is in one is not known.
    if (record.type === 'ArithmeticExpansion') unreadable = true;
    if (typeof record.text === 'string' && Array.isArray(record.expansion)) {
      // The parser leaves `${x:-$(cmd)}` unread: a command hidden there is not seen.
      if (/\$\(|`/.test(record.text) && record.expansion.some((part: { type?: unknown }) => part.type === 'ParameterExpansion')) unreadable = true;
      if (!record.expansion.every((part: Expansion) => part.type !== 'ParameterExpansion' || isPlainParameter(record.text as string, part))) unreadable = true;
    }
    if (misquoted(line, record)) unreadable = true;
    if (record.type === 'Command') {
      const command = readCommand(record, within);
      commands.push(command);
      // What runs inside its words ($(...), backticks) is within it.
      for (const [key, value] of Object.entries(record)) if (key === 'name' || key === 'prefix' || key === 'suffix') visit(value, command);
      return;
    }
    if (record.type === 'Pipeline' && Array.isArray(record.commands)) {
      let before: ShellCommand[] = [];
      for (const [i, stage] of record.commands.entries()) {
        const first = commands.length;
        visit(stage, within);
        const current = commands.slice(first);
        for (const command of current) if (i > 0 && command.pipedFrom.length === 0 && command.within === within) command.pipedFrom = before;
        before = current;
      }
      return;
    }
    for (const value of Object.values(record)) visit(value, within);
  };
  try {
    visit(script, null);
  } catch (error) {
    if (error instanceof RangeError) return null; // nested too deep to read
    throw error;
  }
  return { commands, unreadable };
}

/** Deeper, and more, than any command a person writes: a line past them is not read. */
const MAX_NESTING = 100;
const MAX_SUBSTITUTIONS = 100;

/** How many `$(...)` and backticks the line may have, quoted ones counted too. */
function substitutionCount(line: string): number {
  let count = 0;
  for (let i = line.indexOf('$('); i !== -1; i = line.indexOf('$(', i + 2)) count++;
  for (let i = line.indexOf('`'); i !== -1; i = line.indexOf('`', i + 1)) count++;
  return count;
}

/** How deep the line's brackets nest, quoted ones counted too: the most it can be, cheaply. */
function nestingDepth(line: string): number {
  let depth = 0;
  let deepest = 0;
  for (const char of line) {
    if (char === '(' || char === '{') deepest = Math.max(deepest, ++depth);
    else if ((char === ')' || char === '}') && depth > 0) depth--;
  }
  return deepest;
}

/**
 * Whether the parser may have removed a word's quotes otherwise than bash (it reads `\\\'` as
 * `'`, bash as `\'`), so that a name or the code given to `eval` is not what runs: a quoted or
 * escaped literal word must read the same with shell quoting (shlex), and a substitution's
 * words, whose place in the line the parser does not give, must have no backslash.
 */
function misquoted(line: string, record: Node): boolean {
  if (record.type === 'CommandExpansion') return typeof record.command !== 'string' || record.command.includes('\\');
  if (record.type !== 'Word' || record.expansion !== undefined || typeof record.text !== 'string') return false;
  const { start, end } = (record.loc ?? {}) as { start?: { char?: unknown }; end?: { char?: unknown } };
  if (typeof start?.char !== 'number' || typeof end?.char !== 'number') return /['"\\]/.test(record.text);
  const raw = line.slice(start.char, end.char + 1);
  if (!/['"\\]/.test(raw)) return false;
  const words = roughWords(raw);
  return words.length !== 1 || words[0] !== record.text;
}

type Expansion = { type?: unknown; loc?: { start?: unknown; end?: unknown } };

/**
 * A parameter expansion that runs nothing: `$x`, `${x}`, `${#x}`, `${a[@]}`, `${a[0]}`, and the
 * operators on a plain name whose word holds no expansion but `$x` (`${x:-/tmp}`, `${x%.*}`,
 * `${x:1:2}`). Not a transformation (`${x@P}` expands `$(...)` in x's value), an indirection
 * (`${!x}` may name `a[$(cmd)]`), a subscript bash evaluates (`${a[i]}`), nor a computed offset.
 */
function isPlainParameter(text: string, part: Expansion): boolean {
  const { start, end } = part.loc ?? {};
  return typeof start === 'number' && typeof end === 'number' && PLAIN_PARAMETER.test(text.slice(start, end + 1));
}

const PARAMETER_NAME = String.raw`(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])`;
const PLAIN_PARAMETER = new RegExp(
  String.raw`^\$(?:${PARAMETER_NAME}|\{#?${PARAMETER_NAME}(?:\[(?:[@*]|[0-9]+)\])?(?:(?::?[-=+?]|##?|%%?|/[/#%]?|\^\^?|,,?)(?:[^$\`]|\$(?![({[]))*|:[ ]*-?[0-9]+(?::[ ]*-?[0-9]+)?)?\})$`,
);

function readCommand(record: Node, within: ShellCommand | null): ShellCommand {
  const name = record.name as { text?: unknown; expansion?: unknown } | undefined;
  // `PATH=. ls` runs another ls than the one a pattern names.
  const assigns = Array.isArray(record.prefix) && record.prefix.some((part: { type?: unknown }) => part.type === 'AssignmentWord');
  const command: ShellCommand = { words: [], literal: 0, expands: [], redirects: [], computed: false, pipedFrom: [], within };
  const redirect = (part: Part) => command.redirects.push({ op: String(part.op?.text ?? ''), file: String(part.file?.text ?? '') });
  for (const part of (Array.isArray(record.prefix) ? record.prefix : []) as Part[]) if (part.type === 'Redirect') redirect(part);
  if (name === undefined) return command;
  // The parser reads `a[i]=1` as a command's name: bash assigns, evaluating the subscript.
  command.computed = typeof name.text !== 'string' || name.expansion !== undefined || assigns || /^[A-Za-z_][A-Za-z0-9_]*\[/.test(name.text);
  let literal = !command.computed;
  for (const part of [name, ...(Array.isArray(record.suffix) ? record.suffix : [])] as Part[]) {
    if (part.type === 'Redirect') {
      redirect(part);
      literal = false;
    } else if (typeof part.text === 'string' && part.type === 'Word') {
      literal &&= part.expansion === undefined;
      command.words.push(part.text);
      command.expands.push(part.expansion !== undefined);
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
      const command: ShellCommand = { words: [], literal: 0, expands: [], redirects: [], computed: true, pipedFrom: previous, within: null };
      const inner: ShellCommand[] = [];
      words.forEach((word, i) => {
        for (const [, index] of word.matchAll(SUBSTITUTION_TOKEN)) inner.push(...roughLine(substitutions[Number(index)] ?? '', substitutions));
        const plain = word.replace(SUBSTITUTION_TOKEN, '/dev/fd/63');
        const redirect = /^\d*([<>]+&?|&>+)(.*)$/.exec(plain);
        if (redirect) command.redirects.push({ op: redirect[1]!, file: redirect[2] || (words[i + 1] ?? '').replace(SUBSTITUTION_TOKEN, '/dev/fd/63') });
        else {
          command.words.push(plain);
          command.expands.push(true); // not known without the parser
        }
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
