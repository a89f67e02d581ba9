import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PeerRateLimit } from './rate-limit.js';

describe('PeerRateLimit', () => {
  it('lets `messages` through per window and peer, says when to try again, and marks only the first refusal of a burst', () => {
    const limit = new PeerRateLimit({ messages: 2, per_seconds: 10 });
    expect(limit.take('a', 0)).toEqual({ ok: true });
    expect(limit.take('a', 1_000)).toEqual({ ok: true });
    expect(limit.take('a', 2_000)).toEqual({ ok: false, retryAfterSeconds: 8, first: true });
    expect(limit.take('a', 3_000)).toEqual({ ok: false, retryAfterSeconds: 7, first: false });
    expect(limit.take('b', 3_000)).toEqual({ ok: true });
    expect(limit.take('a', 10_000)).toEqual({ ok: true }); // the first one left the window
    expect(limit.take('a', 10_500)).toEqual({ ok: false, retryAfterSeconds: 1, first: true });
  });

  it('never lets more than `messages` through in any window (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(fc.integer({ min: 0, max: 500 }), { maxLength: 60 }), (messages, gaps) => {
        const limit = new PeerRateLimit({ messages, per_seconds: 1 });
        const accepted: number[] = [];
        let now = 0;
        for (const gap of gaps) {
          now += gap;
          if (limit.take('p', now).ok) accepted.push(now);
        }
        for (const at of accepted) expect(accepted.filter((other) => other > at - 1000 && other <= at).length).toBeLessThanOrEqual(messages);
      }),
    );
  });
});
