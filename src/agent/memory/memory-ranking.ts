/**
 * How memory search ranks what it found (memory-index.ts): by words (BM25) and, with embeddings,
 * by meaning (cosine similarity of the vectors), each made a number from 0 to 1 and mixed by the
 * configured weight; a dated note then loses half its score every `half_life_days`.
 *
 * - Words: BM25 relative to the best match of the search (the best is 1, a chunk without any of
 *   the words 0). BM25 has a natural zero, and its scale depends on the index, so only the ratio
 *   to the best means anything.
 * - Meaning: cosine as it is (below 0, 0). It has a scale of its own, so it is not stretched
 *   over the candidates: that would make the nearest of many unrelated chunks look as good as a
 *   real match, and let a weak model's noise outvote the words (measured: a lexical embedding
 *   with min-max scaling lost a quarter of the evaluation's recall, as it is it lost none).
 * - A chunk not embedded yet (the index is filled in bounded batches, or the endpoint was down
 *   when it came) keeps its standing by words in place of its meaning, instead of losing the
 *   vector's share.
 *
 * Conversation messages do not decay: a fact said long ago is what a search is for, and the
 * messages are a record, not notes that a newer one replaces; a daily note is.
 */
export interface Candidate {
  /** The chunk's row in the index. */
  id: number;
  /** The memory file of a chunk of one, for its date; null for a message. */
  file: string | null;
  /** FTS5's bm25() (negative, lower is better), or null when the chunk has none of the words. */
  bm25: number | null;
  /** Cosine similarity to the query, or null when the chunk (or the query) has no vector. */
  cosine: number | null;
}

export interface RankSettings {
  /** 0..1: the vector similarity's share of a hybrid score. */
  vectorWeight: number;
  /** Days after which a dated note counts half; 0: no decay. */
  halfLifeDays: number;
  now: Date;
}

/** The candidates with their scores (0..1, higher is better), best first. */
export function rank<T extends Candidate>(candidates: readonly T[], settings: RankSettings): (T & { score: number })[] {
  const best = Math.min(0, ...candidates.map((candidate) => candidate.bm25 ?? 0));
  const vectors = candidates.some((candidate) => candidate.cosine !== null);
  return candidates
    .map((candidate) => {
      const words = candidate.bm25 === null || best === 0 ? 0 : candidate.bm25 / best;
      const meaning = candidate.cosine === null ? words : Math.max(0, candidate.cosine);
      const mixed = vectors ? settings.vectorWeight * meaning + (1 - settings.vectorWeight) * words : words;
      return { ...candidate, score: mixed * decay(candidate.file, settings) };
    })
    .sort((a, b) => b.score - a.score || a.id - b.id);
}

const DAY_MS = 86_400_000;
const DATED_NOTE = /^memory\/daily\/(?:[^/]+\/)?(\d{4})-(\d{2})-(\d{2})\.md$/;

/**
 * The day a dated note is of (`memory/daily/<memory file>/YYYY-MM-DD.md`, as the memory flush
 * writes them, or `memory/daily/YYYY-MM-DD.md` kept by hand; UTC), or null for any other file.
 */
export function noteDate(file: string): Date | null {
  const match = DATED_NOTE.exec(file);
  if (!match) return null;
  const date = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
  // 2025-02-30 is no day.
  return date.toISOString().startsWith(`${match[1]}-${match[2]}-${match[3]}`) ? date : null;
}

/** 0.5 per half-life of a dated note's age (a note of the future counts whole); 1 for the rest. */
export function decay(file: string | null, settings: Pick<RankSettings, 'halfLifeDays' | 'now'>): number {
  const date = file === null ? null : noteDate(file);
  if (date === null || settings.halfLifeDays <= 0) return 1;
  const ageDays = Math.max(0, settings.now.getTime() - date.getTime()) / DAY_MS;
  return 0.5 ** (ageDays / settings.halfLifeDays);
}

/** A vector as the index stores it: float32, little-endian, in a BLOB. */
export function toBlob(vector: Float32Array): Buffer {
  const copy = new Float32Array(vector);
  return Buffer.from(copy.buffer, copy.byteOffset, copy.byteLength);
}

export function fromBlob(blob: Buffer): Float32Array {
  // A copy: the buffer better-sqlite3 returns need not be aligned for a Float32Array view.
  const bytes = new Uint8Array(blob);
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/** Cosine similarity; 0 for a zero vector or vectors of different lengths. */
export function cosine(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return aa === 0 || bb === 0 ? 0 : dot / Math.sqrt(aa * bb);
}
