import { programName } from './command-wrappers.js';

/**
 * Whether a command may run code no reading of its words shows, through a variable's name: bash
 * evaluates an array subscript in a name as arithmetic, and arithmetic runs a `$(...)` it meets,
 * in the subscript or in a variable's value (`printf -v 'a[$(cmd)]' x`, `test -v 'a[$(cmd)]'`,
 * `i='a[$(cmd)]'; declare -i n; n=i`). So a name these builtins take must be a plain literal
 * name, and `let`, `[[ … -eq … ]]`, `declare -i` and namerefs (`-n`) are not read at all.
 * `expands[i]` says whether `words[i]` is computed when it runs.
 */
export function hidesCode(words: readonly string[], expands: readonly boolean[]): boolean {
  const unsafe = (i: number) => i < words.length && (expands[i] === true || words[i]!.includes('['));
  const after = (options: string[], computedToo: boolean) =>
    words.some((_, i) => i > 1 && ((!expands[i - 1] && options.includes(words[i - 1]!)) || (computedToo && expands[i - 1] === true)) && unsafe(i));
  switch (programName(words[0] ?? '')) {
    case 'let':
      return true;
    case 'printf':
      // Only its first word can be an option; `-vNAME` is one too.
      if (expands[1]) return words.length > 2;
      return words[1]?.startsWith('-v') === true && (words[1].length > 2 ? words[1].includes('[') : unsafe(2));
    case 'test':
    case '[':
      // Any computed word may be `-v`, making the next one a name.
      return after(['-v', '-R'], true);
    case '[[':
      return words.some((word, i) => !expands[i] && ARITHMETIC_TESTS.has(word)) || after(['-v', '-R'], false);
    case 'wait':
      return after(['-p'], true);
    case 'declare':
    case 'typeset':
    case 'local':
    case 'export':
    case 'readonly':
      return words.some((word, i) => i > 0 && !declaresPlainly(word, expands[i] === true));
    case 'read':
    case 'unset':
    case 'mapfile':
    case 'readarray':
    case 'getopts':
      return words.some((_, i) => i > 0 && unsafe(i));
    default:
      return false;
  }
}

const ARITHMETIC_TESTS = new Set(['-eq', '-ne', '-lt', '-le', '-gt', '-ge']);

/** A `declare` word that names a plain variable (`x`, `x=value`, `PATH="$PATH:/x"`), or an option other than `-i` and `-n`. */
function declaresPlainly(word: string, computed: boolean): boolean {
  if (!computed && /^[-+]/.test(word)) return !/[in]/.test(word);
  return /^[A-Za-z_][A-Za-z0-9_]*(=|$)/.test(word) && (!computed || word.includes('='));
}
