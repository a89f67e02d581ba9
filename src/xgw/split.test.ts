import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitText } from './split.js';

/**
 * True when the chunks, joined with at most one dropped newline or space at each cut (between
 * neighbours, or after the last chunk when a separator followed a full window), are exactly `text`.
 * Whether a cut dropped a separator is ambiguous where chunks are separators themselves ("aa   a"
 * at limit 2 gives "aa", " ", "a"), so both readings are tried (memoised per chunk and offset).
 */
function reassembles(text: string, chunks: string[]): boolean {
  const isSeparator = (at: number) => text[at] === '\n' || text[at] === ' ';
  const failed = new Set<string>();
  const from = (index: number, at: number): boolean => {
    if (index === chunks.length) return at === text.length || (at === text.length - 1 && chunks.length > 0 && isSeparator(at));
    const key = `${index}:${at}`;
    if (failed.has(key)) return false;
    const chunk = chunks[index]!;
    const ok = (text.startsWith(chunk, at) && from(index + 1, at + chunk.length)) || (index > 0 && isSeparator(at) && text.startsWith(chunk, at + 1) && from(index + 1, at + 1 + chunk.length));
    if (!ok) failed.add(key);
    return ok;
  };
  return from(0, 0);
}

// Texts rich in what the splitter decides on: separators, astral characters (surrogate pairs).
const units = fc.constantFrom('a', 'b', ' ', '\n', '😀', 'é', '\u{10FFFF}');
const richText = fc.string({ unit: units, maxLength: 300 });
const anyText = fc.string({ unit: 'binary', maxLength: 300 });
const limits = fc.integer({ min: 2, max: 40 });

describe('splitText', () => {
  it('keeps every chunk within the limit, non-empty, and the content whole', () => {
    fc.assert(
      fc.property(fc.oneof(richText, anyText), limits, (text, limit) => {
        const chunks = splitText(text, limit);
        for (const chunk of chunks) {
          expect(chunk.length).toBeGreaterThan(0);
          expect(chunk.length).toBeLessThanOrEqual(limit);
        }
        expect(reassembles(text, chunks)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('never splits a surrogate pair', () => {
    fc.assert(
      fc.property(fc.oneof(richText, anyText), limits, (text, limit) => {
        for (const chunk of splitText(text, limit)) expect(chunk.isWellFormed()).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('drops at most one separator per cut', () => {
    fc.assert(
      fc.property(richText, limits, (text, limit) => {
        const chunks = splitText(text, limit);
        const kept = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
        expect(text.length - kept).toBeLessThanOrEqual(chunks.length);
      }),
      { numRuns: 500 },
    );
  });

  it('reassembles a text whose chunks are separators themselves', () => {
    const chunks = splitText('aa   a', 2);
    expect(chunks).toEqual(['aa', ' ', 'a']);
    expect(reassembles('aa   a', chunks)).toBe(true);
  });

  it('returns a short text whole and an empty one as no chunks', () => {
    expect(splitText('hello', 4096)).toEqual(['hello']);
    expect(splitText('x'.repeat(4096), 4096)).toEqual(['x'.repeat(4096)]);
    expect(splitText('', 4096)).toEqual([]);
  });

  it('cuts at the last newline in the window before the last space', () => {
    expect(splitText('one two\nthree four five', 16)).toEqual(['one two', 'three four five']);
    expect(splitText('aaa\nbbb ccc dddd', 12)).toEqual(['aaa', 'bbb ccc dddd']);
  });

  it('cuts at the last space when the window has no newline', () => {
    expect(splitText('alpha beta gamma', 12)).toEqual(['alpha beta', 'gamma']);
  });

  it('cuts at a separator just past a full window without an empty chunk', () => {
    expect(splitText('abcd\nefgh', 4)).toEqual(['abcd', 'efgh']);
    expect(splitText('abcd\n', 4)).toEqual(['abcd']);
  });

  it('cuts hard at the limit when there is no separator, moving back before a surrogate pair', () => {
    expect(splitText('x'.repeat(5000), 4096).map((chunk) => chunk.length)).toEqual([4096, 904]);
    expect(splitText('abc😀def', 4)).toEqual(['abc', '😀de', 'f']);
  });

  it('refuses a limit too small for an astral character', () => {
    expect(() => splitText('abc', 1)).toThrow(RangeError);
  });
});
