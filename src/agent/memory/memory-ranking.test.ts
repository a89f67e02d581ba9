import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cosine, decay, fromBlob, noteDate, rank, toBlob, type Candidate } from './memory-ranking.js';

const now = new Date('2026-03-01T12:00:00Z');
const settings = { vectorWeight: 0.7, halfLifeDays: 30, now };
const candidate = (id: number, bm25: number | null, similarity: number | null, file: string | null = null): Candidate => ({ id, file, bm25, cosine: similarity });

describe('memory ranking', () => {
  it('mixes the word match (relative to the best) and the similarity by the weight', () => {
    const ranked = rank([candidate(1, -4, 0.2), candidate(2, -2, 0.9), candidate(3, null, 0.5)], settings);
    expect(ranked.map((hit) => [hit.id, hit.score])).toEqual([
      [2, expect.closeTo(0.7 * 0.9 + 0.3 * 0.5, 9)],
      [1, expect.closeTo(0.7 * 0.2 + 0.3 * 1, 9)],
      [3, expect.closeTo(0.7 * 0.5, 9)],
    ]);
    // By words alone (no vectors at all): the ratio to the best match.
    expect(rank([candidate(1, -4, null), candidate(2, -2, null)], settings).map((hit) => hit.score)).toEqual([1, 0.5]);
    expect(rank([candidate(1, -4, 0.9), candidate(2, -2, 0.1)], { ...settings, vectorWeight: 0 }).map((hit) => hit.id)).toEqual([1, 2]);
  });

  it('lets a chunk with no vector yet keep its standing by words, and counts a negative similarity as none', () => {
    const [notEmbedded, unrelated] = rank([candidate(1, -3, null), candidate(2, -3, -0.4)], settings);
    expect(notEmbedded).toMatchObject({ id: 1, score: 1 });
    expect(unrelated).toMatchObject({ id: 2, score: expect.closeTo(0.3, 9) });
  });

  it('halves a dated note every half-life, and leaves other files, messages and future notes whole', () => {
    expect(noteDate('memory/daily/2026-01-30.md')).toEqual(new Date('2026-01-30T00:00:00Z'));
    expect(noteDate('memory/daily/2026-02-30.md')).toBeNull();
    expect(noteDate('memory/agent.md')).toBeNull();
    expect(noteDate('memory/archive/daily/2026-01-30.md')).toBeNull();
    expect(decay('memory/daily/2026-01-30.md', settings)).toBeCloseTo(0.5 ** (30.5 / 30), 9);
    expect(decay('memory/daily/2026-03-05.md', settings)).toBe(1);
    expect(decay('memory/daily/user-telegram.main.1/2026-01-30.md', settings)).toBeCloseTo(0.5 ** (30.5 / 30), 9);
    expect(decay('memory/user-telegram.main.1.md', settings)).toBe(1);
    expect(decay(null, settings)).toBe(1);
    expect(decay('memory/daily/2020-01-01.md', { ...settings, halfLifeDays: 0 })).toBe(1);
    const [recent, old] = rank([candidate(1, -2, 0.8, 'memory/daily/2025-12-01.md'), candidate(2, -2, 0.8, 'memory/daily/2026-02-28.md')], settings);
    expect([recent!.id, old!.id]).toEqual([2, 1]);
  });

  it('gives scores between 0 and 1, best first, whatever the candidates (property)', () => {
    const bm25 = fc.option(fc.double({ min: -50, max: -0.001, noNaN: true }), { nil: null });
    const similarity = fc.option(fc.double({ min: -1, max: 1, noNaN: true }), { nil: null });
    const file = fc.constantFrom(null, 'memory/agent.md', 'memory/daily/2026-02-01.md', 'memory/daily/2024-06-30.md');
    fc.assert(
      fc.property(fc.array(fc.tuple(bm25, similarity, file), { maxLength: 30 }), fc.double({ min: 0, max: 1, noNaN: true }), (rows, vectorWeight) => {
        const ranked = rank(
          rows.map(([b, c, f], id) => candidate(id, b, c, f)),
          { ...settings, vectorWeight },
        );
        expect(ranked).toHaveLength(rows.length);
        for (const [index, hit] of ranked.entries()) {
          expect(hit.score).toBeGreaterThanOrEqual(0);
          expect(hit.score).toBeLessThanOrEqual(1 + 1e-9);
          if (index > 0) expect(hit.score).toBeLessThanOrEqual(ranked[index - 1]!.score);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('stores a vector as float32 bytes and reads it back the same; cosine of a vector with itself is 1', () => {
    fc.assert(
      fc.property(fc.array(fc.float({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }), { minLength: 1, maxLength: 64 }), (values) => {
        const vector = Float32Array.from(values);
        const blob = toBlob(vector);
        expect(blob.length).toBe(values.length * 4);
        // An odd offset, as a buffer of a row may have: read into an aligned copy.
        const shifted = Buffer.concat([Buffer.from([0]), blob]).subarray(1);
        expect(Array.from(fromBlob(shifted))).toEqual(Array.from(vector));
        if (vector.some((value) => value !== 0)) expect(cosine(vector, vector)).toBeCloseTo(1, 5);
      }),
    );
    expect(cosine(Float32Array.from([1, 0]), Float32Array.from([0, 1]))).toBe(0);
    expect(cosine(Float32Array.from([1, 0]), Float32Array.from([1, 0, 0]))).toBe(0);
    expect(cosine(Float32Array.from([0, 0]), Float32Array.from([1, 0]))).toBe(0);
  });
});
