import type { Entry, EntryKind } from './types.js';

/**
 * Ranking for `cmds find`: pure functions over entries and a query.
 *
 * Order: exact name match (the query names a tool, a subcommand path such as `thread push`, a
 * skill or an executable), then names starting with the query, then entries sharing words with the
 * query — more query words found in name + description first, then more of them in the name. Ties:
 * TheClaw commands and skills before executables, curated executables before others, shorter
 * names, then alphabetical.
 */

/** How an entry matched: lower tier is better. */
export type Tier = 0 | 1 | 2;

export interface Match<T extends Entry = Entry> {
  entry: T;
  tier: Tier;
  /** Distinct query words found in the name and description. */
  hits: number;
  /** Distinct query words found in the name. */
  nameHits: number;
}

// Words that say nothing about a command ("how do I list the files") and would otherwise match
// half of all descriptions.
const STOP_WORDS = new Set('a an and are as at be by can do does for from how i in into is it me my of on or some that the their this to want what which with you your'.split(' '));

/** Lower-case, trimmed, inner whitespace collapsed. */
export function normalizeQuery(query: string): string {
  return query.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** Lower-case alphanumeric runs: `git-shell` → `git`, `shell`. */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * Light suffix stripping, the same on both sides of a comparison: plurals, -ing, -ed and a final
 * -e, so that `files`, `file` and `filing` meet at `fil`, and `directories` at `directory`.
 */
export function stem(word: string): string {
  let w = word.toLowerCase();
  if (w.length <= 3) return w;
  if (w.endsWith('ies') && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith('sses') || /(x|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.endsWith('s') && !/(ss|us|is)$/.test(w)) w = w.slice(0, -1);
  if (w.endsWith('ing') && w.length >= 6) w = undouble(w.slice(0, -3));
  else if (w.endsWith('ed') && w.length >= 5) w = undouble(w.slice(0, -2));
  if (w.endsWith('e') && w.length > 3) w = w.slice(0, -1);
  return w;
}

// `running` → `runn` → `run`; but `installed` → `install`, `passing` → `pass`.
function undouble(w: string): string {
  return /([^aeioulsz])\1$/.test(w) ? w.slice(0, -1) : w;
}

/** The query's distinct stemmed words, stop words dropped unless nothing else is left. */
export function queryWords(query: string): string[] {
  const tokens = tokenize(query);
  const meaningful = tokens.filter((token) => !STOP_WORDS.has(token));
  return [...new Set((meaningful.length > 0 ? meaningful : tokens).map(stem))];
}

// A query word matches a text word when their stems are equal, or, for words of five letters or
// more, when the text word's stem starts with it (`compress` finds `compression`, `python` finds
// `python3`). Shorter prefixes would let `list` find `listen`.
function wordMatches(queryStem: string, textStems: readonly string[]): boolean {
  return textStems.some((s) => s === queryStem || (queryStem.length >= 5 && s.startsWith(queryStem)));
}

/** How `entry` matches `query`, or undefined when it does not. */
export function matchEntry<T extends Entry>(entry: T, query: string, words: readonly string[] = queryWords(query)): Match<T> | undefined {
  const q = normalizeQuery(query);
  if (q === '') return undefined;
  const name = entry.name.toLowerCase();
  const nameStems = tokenize(name).map(stem);
  const textStems = nameStems.concat(tokenize(entry.description).map(stem));
  const hits = words.filter((w) => wordMatches(w, textStems)).length;
  const nameHits = words.filter((w) => wordMatches(w, nameStems)).length;
  if (name === q) return { entry, tier: 0, hits, nameHits };
  if (name.startsWith(q)) return { entry, tier: 1, hits, nameHits };
  if (hits > 0) return { entry, tier: 2, hits, nameHits };
  return undefined;
}

const KIND_ORDER: Record<EntryKind, number> = { theclaw: 0, skill: 0, executable: 1 };

/** The tie-break between entries that matched equally well (also the order of `cmds list`). */
export function compareEntries(a: Entry, b: Entry): number {
  return (
    KIND_ORDER[a.kind] - KIND_ORDER[b.kind] ||
    Number(Boolean(b.curated)) - Number(Boolean(a.curated)) ||
    a.name.length - b.name.length ||
    compareText(a.name, b.name) ||
    compareText(a.kind, b.kind) ||
    compareText(a.path ?? '', b.path ?? '')
  );
}

export function compareMatches(a: Match, b: Match): number {
  return a.tier - b.tier || b.hits - a.hits || b.nameHits - a.nameHits || compareEntries(a.entry, b.entry);
}

/** Entries matching `query`, best first. An empty query matches nothing. */
export function rankEntries<T extends Entry>(entries: readonly T[], query: string): Match<T>[] {
  const words = queryWords(query);
  const matches: Match<T>[] = [];
  for (const entry of entries) {
    const match = matchEntry(entry, query, words);
    if (match) matches.push(match);
  }
  return matches.sort(compareMatches);
}

// Code-point order: the same on every machine, whatever the locale.
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
