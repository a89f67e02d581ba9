import type { FilterDialect } from '../filter.js';

/**
 * The filter language in PostgreSQL, with SQLite's meaning (filter.ts `FilterDialect`). The event
 * columns are `COLLATE "C"` (postgres-schema.ts), so text compares by bytes as SQLite's BINARY
 * does, and ILIKE under "C" folds ASCII letters only, as SQLite's LIKE. PostgreSQL has no GLOB:
 * a pattern becomes an anchored regular expression of the same meaning (`globToRegex`).
 */
export const POSTGRES_DIALECT: FilterDialect = {
  param: (index) => `$${index}`,
  // An id compared with 1.5 is compared as a number, as in SQLite, not refused as no bigint.
  number: (param) => `${param}::numeric`,
  like: (column, negated, param) => `${column} COLLATE "C" ${negated ? 'NOT ' : ''}ILIKE ${param} ESCAPE ''`,
  glob: (column, negated, param) => `${column} COLLATE "C" ${negated ? '!~' : '~'} ${param}`,
  globValue: (pattern) => globToRegex(pattern),
};

/** Matches nothing: `$` holds only at the end, where no character follows. */
const NOTHING = '$.^';

/**
 * SQLite's GLOB (sqlite3 `patternCompare`) as a PostgreSQL regular expression: `*` any text, `?`
 * one character, `[...]` one of a set with ranges, `[^...]` none of it, a `]` first in a set is
 * itself; everything else, and a `[` never closed, stands for itself or matches nothing as in
 * SQLite. Every other character is escaped, so a pattern never reaches the regex syntax.
 */
export function globToRegex(pattern: string): string {
  const chars = [...pattern];
  let out = '^';
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '*') out += '.*';
    else if (c === '?') out += '.';
    else if (c === '[') {
      const set = readSet(chars, i + 1);
      if (set === null) return NOTHING; // SQLite: an unclosed set matches nothing
      out += set.regex;
      i = set.end;
    } else out += escapeChar(c);
  }
  return `${out}$`;
}

/** A `[...]` set starting after its `[`: its regex and the index of its `]`, or null if it never closes. */
function readSet(chars: string[], start: number): { regex: string; end: number } | null {
  let i = start;
  const negated = chars[i] === '^';
  if (negated) i++;
  const members: string[] = [];
  // A `]` first is itself, and (as in SQLite) starts no range.
  if (chars[i] === ']') members.push(escapeInSet(chars[i++]!));
  for (; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === ']') break;
    const hi = chars[i + 2];
    if (chars[i + 1] === '-' && hi !== undefined && hi !== ']') {
      // SQLite compares code points; a range whose ends are the wrong way round holds nothing.
      if (c.codePointAt(0)! <= hi.codePointAt(0)!) members.push(`${escapeInSet(c)}-${escapeInSet(hi)}`);
      i += 2;
    } else members.push(escapeInSet(c));
  }
  if (i >= chars.length) return null;
  if (members.length === 0) return { regex: negated ? '.' : NOTHING, end: i };
  return { regex: `[${negated ? '^' : ''}${members.join('')}]`, end: i };
}

/** In PostgreSQL's advanced regular expressions a backslash before a non-alphanumeric character means that character. */
function escapeChar(c: string): string {
  return /[!-/:-@[-`{-~]/.test(c) ? `\\${c}` : c;
}

function escapeInSet(c: string): string {
  return /[\\\]^[-]/.test(c) ? `\\${c}` : c;
}
