import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { capMemory } from './memory-caps.js';
import { estimateTokens } from '../tokens.js';

const FILE = '/home/someone/.theclaw/agents/helper/memory/user-telegram.main.12345.md';
const text = fc.oneof(
  fc.string({ maxLength: 6_000 }),
  fc.array(fc.string({ maxLength: 120 }), { maxLength: 200 }).map((lines) => lines.join('\n')),
);
const cap = fc.integer({ min: 100, max: 1_500 });
/** A cap and a text over it: lines (or one long line) repeated past the cap. */
const overCap = fc.tuple(cap, fc.array(fc.string({ maxLength: 120 }), { minLength: 1, maxLength: 40 }), fc.boolean()).map(([tokens, lines, oneLine]) => {
  const unit = lines.join(oneLine ? ' ' : '\n');
  const times = Math.ceil((tokens * 4 + 1) / (unit.length + 1)) + 1;
  return [Array.from({ length: times }, () => unit).join(oneLine ? ' ' : '\n'), tokens] as const;
});

describe('capMemory', () => {
  it('keeps a file that fits whole', () => {
    fc.assert(
      fc.property(text, cap, (memory, tokens) => {
        fc.pre(estimateTokens(memory) <= tokens);
        expect(capMemory('person', FILE, memory, tokens)).toEqual({ text: memory, truncation: null });
      }),
    );
  });

  it('cuts a longer one to its cap: the start and the end kept, a marker in place of the middle', () => {
    fc.assert(
      fc.property(overCap, ([memory, tokens]) => {
        expect(estimateTokens(memory)).toBeGreaterThan(tokens);
        const { text: capped, truncation } = capMemory('person', FILE, memory, tokens);
        expect(estimateTokens(capped)).toBeLessThanOrEqual(tokens);
        const marker = `\n[... memory truncated: ${estimateTokens(memory) - tokens} tokens over the cap of ${tokens}; see ${FILE}]\n`;
        const [start, end, ...rest] = capped.split(marker);
        expect(rest).toEqual([]);
        expect(memory.startsWith(start!)).toBe(true);
        expect(memory.endsWith(end!)).toBe(true);
        // Most of the room goes to the memory itself.
        expect(start!.length + end!.length).toBeGreaterThan(tokens * 4 - marker.length - 2 * 120 - 2);
        expect(truncation).toEqual({ layer: 'person', file: FILE, tokens: estimateTokens(memory), cap: tokens, version: expect.stringMatching(/^[0-9a-f]{16}$/) });
      }),
    );
  });

  it('cuts at line ends where the lines allow it', () => {
    const lines = Array.from({ length: 100 }, (_, i) => `- note ${i}: ${'x'.repeat(30)}`);
    const { text: capped } = capMemory('agent', FILE, lines.join('\n'), 200);
    const [start, end] = capped.split(/\n\[\.\.\. memory truncated[^\n]*\]\n/);
    for (const line of [...start!.split('\n'), ...end!.split('\n')]) expect(lines).toContain(line);
  });

  it('tells the versions of a file apart', () => {
    const a = capMemory('agent', FILE, 'a'.repeat(1_000), 100).truncation!;
    const b = capMemory('agent', FILE, 'b'.repeat(1_000), 100).truncation!;
    expect(a.version).not.toBe(b.version);
    expect(capMemory('agent', FILE, 'a'.repeat(1_000), 100).truncation!.version).toBe(a.version);
  });
});
