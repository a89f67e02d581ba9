import parse from '@ericcornelissen/bash-parser';

/**
 * The simple commands a bash command line runs, each as its literal words (`git status -s` →
 * ["git", "status", "-s"]), found anywhere in it: pipelines, lists, subshells, loops, functions,
 * `$(...)` and backticks. Null when the line cannot be read this way: a syntax error, or a
 * command whose name is computed when it runs (`$cmd`, `$(which rm)`), which no pattern can be
 * said to match, one that runs with a changed environment (`PATH=. ls`), or an arithmetic
 * expansion (bash runs `$((a);(b))` as commands).
 *
 * It errs towards seeing more commands, never fewer (a here-document's lines are read as
 * commands), so a policy that allows only listed programs asks about what it cannot read.
 */
export function commandsOf(line: string): string[][] | null {
  let script: unknown;
  try {
    script = parse(line, { mode: 'bash' });
  } catch {
    return null;
  }
  const commands: string[][] = [];
  let computed = false;
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    if (record.type === 'Command' && record.name !== undefined) {
      const name = record.name as { text?: unknown; expansion?: unknown };
      // `PATH=. ls` runs another ls than the one a pattern names.
      const assigns = Array.isArray(record.prefix) && record.prefix.some((part: { type?: unknown }) => part.type === 'AssignmentWord');
      if (typeof name.text !== 'string' || name.expansion !== undefined || assigns) computed = true;
      else commands.push([name.text, ...literalWords(record.suffix)]);
    }
    // Bash runs `$((a);(b))` as commands when it is no arithmetic, and the parser reads
    // arithmetic by other rules than bash: what is in one is not known.
    if (record.type === 'ArithmeticExpansion') computed = true;
    // The parser leaves `${x:-$(cmd)}` unread: a command hidden there is not seen.
    if (typeof record.text === 'string' && Array.isArray(record.expansion) && /\$\(|`/.test(record.text)) {
      if (record.expansion.some((part: { type?: unknown }) => part.type === 'ParameterExpansion')) computed = true;
    }
    for (const value of Object.values(record)) visit(value);
  };
  visit(script);
  return computed ? null : commands;
}

/** The words of a command's arguments up to the first one that is not literal (an expansion, a redirection). */
function literalWords(suffix: unknown): string[] {
  const words: string[] = [];
  for (const part of Array.isArray(suffix) ? suffix : []) {
    const word = part as { type?: unknown; text?: unknown; expansion?: unknown };
    if (word.type !== 'Word' || typeof word.text !== 'string' || word.expansion !== undefined) break;
    words.push(word.text);
  }
  return words;
}
