import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSlug, isValidId, slug } from './slug.js';

const SLUG_SHAPE = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/** Names of every sort, including ones built to look like slugs or to be hostile as paths. */
const name = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }), // lone surrogates included
  fc.string({ unit: 'binary', minLength: 300, maxLength: 400 }),
  fc.string({ unit: fc.constantFrom('a', 'b', '.', '-', '_'), maxLength: 80 }),
  fc.constantFrom('', '.', '..', '...', '/', '../x', 'a/b', '\0', 'a\0b', '\uD800', '\uD801', '\uFFFD', '-', '--', 'x'.repeat(64), 'x'.repeat(65)),
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 10, maxLength: 10 }).map((hash) => `name--${hash}`),
);

/** Some names plus slug(x) of each, so that a slug output is also fed in as a name. */
const names = fc.uniqueArray(name, { minLength: 2, maxLength: 30 }).map((list) => [...new Set([...list, ...list.map((x) => slug(x)), ...list.map((x) => slug(slug(x)))])]);

function checkShape(out: string): void {
  expect(out).toMatch(SLUG_SHAPE);
  expect(out).not.toContain('/');
  expect(out).not.toContain('\0');
  expect(out).not.toBe('.');
  expect(out).not.toBe('..');
  expect(out.length).toBeLessThanOrEqual(64);
  expect(out.length).toBeGreaterThan(0);
}

describe('slug', () => {
  it('maps distinct names to distinct slugs', () => {
    fc.assert(
      fc.property(names, (list) => {
        const slugs = list.map((x) => slug(x));
        expect(new Set(slugs).size).toBe(list.length);
      }),
      { numRuns: 300 },
    );
  });

  it('gives distinct slugs to names that differ only in a lone surrogate', () => {
    const list = ['\uD800', '\uD801', '\uDC00', '\uFFFD', 'a\uD800', 'a\uFFFD'];
    expect(new Set(list.map((x) => slug(x))).size).toBe(list.length);
  });

  it('gives distinct slugs to long names that share their first 64 characters', () => {
    const prefix = 'a'.repeat(64);
    expect(slug(`${prefix}x`)).not.toBe(slug(`${prefix}y`));
    expect(slug(`${prefix}x`)).not.toBe(slug(prefix));
  });

  it('recognises every slug it makes, and no name that is unsafe as a directory', () => {
    fc.assert(
      fc.property(name, (x) => {
        expect(isSlug(slug(x))).toBe(true);
        if (isSlug(x)) checkShape(x);
      }),
      { numRuns: 1000 },
    );
    for (const bad of ['', '.', '..', '.x', '/', 'a/b', '../x', 'a\0b', 'x'.repeat(65)]) expect(isSlug(bad), bad).toBe(false);
  });

  it('always produces a safe file name of at most 64 characters', () => {
    fc.assert(
      fc.property(name, (x) => checkShape(slug(x))),
      { numRuns: 1000 },
    );
  });

  it('is deterministic and idempotent on its own output', () => {
    fc.assert(
      fc.property(name, (x) => {
        expect(slug(x)).toBe(slug(x));
        // A slug that was changed ends in the hash suffix, so slugging it again changes it again;
        // but a name that was already safe is its own slug.
        if (slug(x) === x) expect(slug(slug(x))).toBe(x);
      }),
    );
  });

  it('leaves names that are already safe unchanged', () => {
    for (const safe of ['admin', 'agent-1', 'A_b.c', '_x', '-rf', '0', 'a..b', 'x'.repeat(64), 'name--abc', 'name--0123456789a']) {
      expect(slug(safe)).toBe(safe);
    }
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9._]{0,40}$/), (safe) => {
        expect(slug(safe)).toBe(safe);
      }),
    );
  });

  it('changes unsafe names, names longer than 64 and names that end like a hashed slug', () => {
    for (const unsafe of ['', '.', '..', '.hidden', 'a/b', 'a b', 'ü', 'x'.repeat(65), 'name--0123456789', 'a\0b']) {
      const out = slug(unsafe);
      expect(out).not.toBe(unsafe);
      expect(out).toMatch(/--[0-9a-f]{10}$/);
      checkShape(out);
    }
  });

  it('keeps a readable prefix of a changed name', () => {
    expect(slug('team/alpha')).toMatch(/^team_alpha--[0-9a-f]{10}$/);
    expect(slug('../etc')).toMatch(/^__etc--[0-9a-f]{10}$/);
    expect(slug('.config')).toMatch(/^_config--[0-9a-f]{10}$/);
  });

  it('honours a smaller maxLength', () => {
    expect(slug('abcdef', 16)).toBe('abcdef');
    expect(slug('x'.repeat(40), 16)).toHaveLength(16);
  });
});

describe('isValidId', () => {
  it('accepts lower-case ids of letters, digits, _ and - up to 63 characters', () => {
    for (const ok of ['admin', 'a', '0', 'agent_1', 'my-agent', 'a'.repeat(63), '9lives', 'a-_-b']) {
      expect(isValidId(ok)).toBe(true);
    }
  });

  it('rejects upper case, leading punctuation, dots, slashes, spaces, empty and over-long ids', () => {
    for (const bad of ['', 'Admin', '-a', '_a', 'a.b', 'a/b', 'a b', '..', 'a'.repeat(64), 'ä', 'a\0', 'a\n']) {
      expect(isValidId(bad)).toBe(false);
    }
  });

  it('accepts ids that slug leaves unchanged, unless they end like a hashed slug', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,62}$/), (x) => {
        expect(isValidId(x)).toBe(true);
        if (!/--[0-9a-f]{10}$/.test(x)) expect(slug(x)).toBe(x);
      }),
    );
    expect(isValidId('x--0123456789')).toBe(true);
    expect(slug('x--0123456789')).not.toBe('x--0123456789');
  });
});
