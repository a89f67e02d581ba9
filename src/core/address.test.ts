import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectClawError } from '../testing/index.js';
import { decodeSegment, encodeSegment, formatAddress, parseAddress, type ExternalAddress, type InternalAddress } from './address.js';

const ENCODED = /^[A-Za-z0-9._~%-]+$/;

/** Well-formed ids of every sort: whole graphemes, raw code units, and the troublesome ones. */
const id = fc.oneof(
  fc.string({ unit: 'grapheme', minLength: 1 }),
  fc.string({ unit: 'binary', minLength: 1 }).filter((s) => s.isWellFormed()),
  fc
    .array(fc.constantFrom(':', '/', '..', '.', '%', '%3A', '%25', '\0', '\n', '\r', '\t', '\x7f', '\x1b', ' ', 'a', 'Z', '~', 'é', '😀'), {
      minLength: 1,
      maxLength: 12,
    })
    .map((parts) => parts.join('')),
);

const external = fc.record({
  kind: fc.constant('external' as const),
  channelType: id,
  instance: id,
  conversationType: id,
  conversationId: id,
  peerId: id,
});

const internal = fc.record({
  kind: fc.constant('internal' as const),
  conversationType: id,
  conversationId: id,
  agentId: id,
});

describe('address segments', () => {
  it('round-trips every well-formed id through encodeSegment and decodeSegment', () => {
    fc.assert(
      fc.property(id, (value) => {
        const encoded = encodeSegment(value);
        expect(encoded).toMatch(ENCODED);
        expect(encoded).not.toContain(':');
        expect(encoded).not.toContain('/');
        expect(decodeSegment(encoded)).toBe(value);
      }),
      { numRuns: 500 },
    );
  });

  it('gives distinct ids distinct encodings', () => {
    fc.assert(
      fc.property(id, id, (a, b) => {
        fc.pre(a !== b);
        expect(encodeSegment(a)).not.toBe(encodeSegment(b));
      }),
    );
  });

  it('leaves unreserved characters literal and encodes the others in upper-case hex', () => {
    expect(encodeSegment('Agent-1_x.y~z')).toBe('Agent-1_x.y~z');
    expect(encodeSegment('a:b')).toBe('a%3Ab');
    expect(encodeSegment('../etc/passwd')).toBe('..%2Fetc%2Fpasswd');
    expect(encodeSegment('100%')).toBe('100%25');
    expect(encodeSegment('\0')).toBe('%00');
    expect(encodeSegment('é')).toBe('%C3%A9');
    expect(encodeSegment('😀')).toBe('%F0%9F%98%80');
  });

  it('rejects empty ids and ids with lone surrogates', () => {
    expectClawError(() => encodeSegment(''), 'usage');
    expectClawError(() => encodeSegment('a\uD800'), 'usage');
    expectClawError(() => encodeSegment('\uDC00b'), 'usage');
  });

  it('rejects non-canonical encodings', () => {
    for (const segment of [
      '%3a', // lower-case hex
      '%41', // 'A' needs no encoding
      '%7E', // '~' needs no encoding
      '%2d', // lower-case, and '-' needs no encoding
      '%C0%AF', // overlong UTF-8 for '/'
      '%C3', // truncated UTF-8 sequence
      '%FF', // never valid UTF-8
      '%ED%A0%80', // UTF-8 of a lone surrogate
    ]) {
      expectClawError(() => decodeSegment(segment), 'usage');
    }
  });

  it('rejects malformed segments', () => {
    for (const segment of ['', '%', '%4', '%G1', 'a b', 'a:b', 'a/b', '\0', 'é', '%%41', 'abc%']) {
      expectClawError(() => decodeSegment(segment), 'usage');
    }
  });
});

describe('source addresses', () => {
  it('round-trips external addresses with arbitrary ids', () => {
    fc.assert(
      fc.property(external, (address) => {
        const text = formatAddress(address);
        expect(text.split(':')).toHaveLength(6);
        expect(text.startsWith('external:')).toBe(true);
        for (const segment of text.split(':').slice(1)) expect(segment).toMatch(ENCODED);
        expect(parseAddress(text)).toEqual(address);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips internal addresses with arbitrary ids', () => {
    fc.assert(
      fc.property(internal, (address) => {
        const text = formatAddress(address);
        expect(text.split(':')).toHaveLength(4);
        expect(text.startsWith('internal:')).toBe(true);
        for (const segment of text.split(':').slice(1)) expect(segment).toMatch(ENCODED);
        expect(parseAddress(text)).toEqual(address);
      }),
      { numRuns: 300 },
    );
  });

  it('never lets a colon, slash, dot-dot, percent or control character in an id shift the segments', () => {
    const hostile = fc.array(fc.constantFrom(':', '::', '/', '..', '%', '%3A', '\0', '\x01', '\n', '\x7f', 'x'), { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(hostile, hostile, hostile, hostile, hostile, (a, b, c, d, e) => {
        const ext: ExternalAddress = { kind: 'external', channelType: a, instance: b, conversationType: c, conversationId: d, peerId: e };
        const int: InternalAddress = { kind: 'internal', conversationType: a, conversationId: b, agentId: c };
        expect(formatAddress(ext).split(':')).toHaveLength(6);
        expect(formatAddress(int).split(':')).toHaveLength(4);
        expect(formatAddress(ext)).not.toMatch(/[/\0\n]/);
        expect(parseAddress(formatAddress(ext))).toEqual(ext);
        expect(parseAddress(formatAddress(int))).toEqual(int);
      }),
    );
  });

  it('formats a concrete address as documented', () => {
    expect(
      formatAddress({
        kind: 'external',
        channelType: 'telegram',
        instance: 'main',
        conversationType: 'dm',
        conversationId: '-100:42',
        peerId: 'user/7',
      }),
    ).toBe('external:telegram:main:dm:-100%3A42:user%2F7');
    expect(formatAddress({ kind: 'internal', conversationType: 'task', conversationId: 't1', agentId: 'admin' })).toBe('internal:task:t1:admin');
  });

  it("round-trips 'self'", () => {
    expect(formatAddress({ kind: 'self' })).toBe('self');
    expect(parseAddress('self')).toEqual({ kind: 'self' });
    expect(parseAddress(formatAddress({ kind: 'self' }))).toEqual({ kind: 'self' });
  });

  it('rejects wrong segment counts and unknown kinds with a usage error', () => {
    for (const text of ['', 'self:x', 'SELF', 'external', 'external:a:b:c:d', 'external:a:b:c:d:e:f', 'internal:a:b', 'internal:a:b:c:d', 'internal', 'group:a:b:c', 'foo:a:b:c:d:e', ':a:b:c']) {
      const error = expectClawError(() => parseAddress(text), 'usage');
      expect(error.suggestion).toContain('self');
    }
  });

  it('rejects addresses with empty or non-canonical segments', () => {
    expectClawError(() => parseAddress('internal:a::c'), 'usage');
    expectClawError(() => parseAddress('internal:a:b:%3a'), 'usage');
    expectClawError(() => parseAddress('external:tg:main:dm:%41:peer'), 'usage');
    expectClawError(() => parseAddress('internal:a:b:c d'), 'usage');
  });

  it('rejects formatting an address with an empty id', () => {
    expectClawError(() => formatAddress({ kind: 'internal', conversationType: 'a', conversationId: '', agentId: 'c' }), 'usage');
  });
});
