import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lineDiff } from './line-diff.js';

/** Applies unified-diff hunks to `before`, checking each header's numbers against what it holds. */
function patch(before: string, diff: string): string {
  const a = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const out: string[] = [];
  let at = 0;
  const lines = diff === '' ? [] : diff.split('\n');
  for (let i = 0; i < lines.length; ) {
    const header = /^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$/.exec(lines[i++]!);
    if (!header) throw new Error(`not a hunk header: ${lines[i - 1]}`);
    const [aStart, aCount, bStart, bCount] = header.slice(1).map(Number) as [number, number, number, number];
    const from = aCount === 0 ? aStart : aStart - 1;
    out.push(...a.slice(at, from));
    expect(bCount === 0 ? bStart : bStart - 1).toBe(out.length);
    at = from;
    let seenA = 0;
    let seenB = 0;
    while (i < lines.length && !lines[i]!.startsWith('@@')) {
      const line = lines[i++]!;
      const text = line.slice(1);
      if (line[0] !== '+') {
        expect(a[at++]).toBe(text);
        seenA++;
      }
      if (line[0] !== '-') {
        out.push(text);
        seenB++;
      }
    }
    expect([seenA, seenB]).toEqual([aCount, bCount]);
  }
  out.push(...a.slice(at));
  return out.map((line) => `${line}\n`).join('');
}

describe('lineDiff', () => {
  it('shows a change as diff -u does, with three lines of context and removals first', () => {
    const before = 'a\nb\nc\nd\ne\nf\ng\nh\n';
    const after = 'a\nb\nc\nd\nE\nf\ng\nh\ni\n';
    expect(lineDiff(before, after)).toEqual({ text: ['@@ -2,7 +2,8 @@', ' b', ' c', ' d', '-e', '+E', ' f', ' g', ' h', '+i'].join('\n'), added: 2, removed: 1 });
    expect(lineDiff(before, before)).toEqual({ text: '', added: 0, removed: 0 });
    expect(lineDiff('', 'x\n')).toEqual({ text: '@@ -0,0 +1,1 @@\n+x', added: 1, removed: 0 });
  });

  it('gives hunks that turn the old text into the new one, with the counts of their lines', () => {
    const text = fc.array(fc.constantFrom('a', 'b', 'c', 'd', '', '# x'), { maxLength: 30 }).map((lines) => lines.map((line) => `${line}\n`).join(''));
    fc.assert(
      fc.property(text, text, (before, after) => {
        const diff = lineDiff(before, after);
        expect(patch(before, diff.text)).toBe(after);
        const body = diff.text.split('\n').filter((line) => !line.startsWith('@@'));
        expect([body.filter((line) => line.startsWith('+')).length, body.filter((line) => line.startsWith('-')).length]).toEqual([diff.added, diff.removed]);
      }),
    );
  });
});
