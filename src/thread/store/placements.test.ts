import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHome, waitFor, type TestHome } from '../../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../../testing/postgres.js';
import { openStoreAt } from './choose.js';
import { isLive } from './placements.js';
import { createSqliteStore } from './sqlite-store.js';
import type { ThreadStore } from './types.js';

/**
 * Placements (placements.ts): on PostgreSQL two "hosts" are two stores (two pools) on one
 * database, as two machines would be; on SQLite every key is here.
 */

const unavailable = postgresUnavailable();
let home: TestHome;
let cluster: PostgresCluster | undefined;
let hostA: ThreadStore;
let hostB: ThreadStore;

beforeAll(async () => {
  home = createTestHome();
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('placements');
  [hostA, hostB] = [await openStoreAt(url), await openStoreAt(url)];
}, 120_000);

afterAll(async () => {
  await hostA?.close();
  await hostB?.close();
  await cluster?.stop();
  home?.cleanup();
});

describe.skipIf(unavailable)(`placements in PostgreSQL (${NEEDS_POSTGRES})`, () => {
  it('of two hosts claiming one key at once, exactly one gets it, and both see the same owner', async () => {
    for (let round = 0; round < 20; round++) {
      const key = `channel:race-${round}`;
      const [a, b] = await Promise.all([hostA.placements.claim(key, 'a', { ttlMs: 60_000 }), hostB.placements.claim(key, 'b', { ttlMs: 60_000 })]);
      expect([a.claimed, b.claimed].filter(Boolean)).toHaveLength(1);
      expect(a.placement.host).toBe(b.placement.host);
      expect((await hostB.placements.get(key))?.host).toBe(a.placement.host);
    }
  });

  it('a claim is renewed by its holder and refused to another until it expires, then hands over', async () => {
    const key = 'channel:expiry';
    const first = await hostA.placements.claim(key, 'a', { ttlMs: 300 });
    expect(first.claimed).toBe(true);
    const renewed = await hostA.placements.claim(key, 'a', { ttlMs: 300 });
    expect(renewed.claimed).toBe(true);
    expect(renewed.placement.expiresAt!.getTime()).toBeGreaterThanOrEqual(first.placement.expiresAt!.getTime());
    const refused = await hostB.placements.claim(key, 'b', { ttlMs: 300 });
    expect(refused).toMatchObject({ claimed: false, placement: { host: 'a' } });
    const taken = await waitFor(
      async () => {
        const attempt = await hostB.placements.claim(key, 'b', { ttlMs: 60_000 });
        return attempt.claimed ? attempt : null;
      },
      "b's claim after a's expired",
      10_000,
      50,
    );
    expect(taken.placement.host).toBe('b');
    expect(await hostA.placements.claim(key, 'a', { ttlMs: 300 })).toMatchObject({ claimed: false, placement: { host: 'b' } });
  });

  it("a placement without expiry is never taken by a claim; assign moves it; release frees only its holder's", async () => {
    const key = 'agent:kim';
    expect((await hostA.placements.claim(key, 'a')).placement).toMatchObject({ host: 'a', expiresAt: null });
    expect(await hostB.placements.claim(key, 'b', { ttlMs: 1 })).toMatchObject({ claimed: false });
    expect(isLive((await hostB.placements.get(key))!)).toBe(true);
    expect(await hostB.placements.release(key, 'b')).toBe(false);
    expect(await hostB.placements.assign(key, 'b')).toMatchObject({ key, host: 'b', expiresAt: null });
    expect(await hostA.placements.release(key, 'a')).toBe(false);
    expect(await hostA.placements.release(key, 'b')).toBe(true);
    expect(await hostA.placements.get(key)).toBeNull();
    expect((await hostA.placements.claim(key, 'a')).claimed).toBe(true);
    expect((await hostA.placements.list('agent:')).map((p) => [p.key, p.host])).toEqual([['agent:kim', 'a']]);
  });

  it('hosts list each host with its home, the last word kept', async () => {
    await hostA.placements.seen('a', '/homes/a');
    await hostB.placements.seen('b', '/homes/b');
    await hostB.placements.seen('b', '/homes/b2');
    expect((await hostA.placements.hosts()).map((h) => [h.name, h.home])).toEqual([
      ['a', '/homes/a'],
      ['b', '/homes/b2'],
    ]);
  });
});

describe('placements in SQLite', () => {
  it('every key is on this one host, every claim succeeds, and nothing is stored', async () => {
    const store = createSqliteStore(home.home);
    const saved = process.env.THECLAW_HOST;
    process.env.THECLAW_HOST = 'solo';
    try {
      expect(await store.placements.get('agent:x')).toMatchObject({ key: 'agent:x', host: 'solo', expiresAt: null });
      expect((await store.placements.claim('channel:c', 'solo', { ttlMs: 1 })).claimed).toBe(true);
      expect(await store.placements.list()).toEqual([]);
      expect((await store.placements.hosts()).map((h) => [h.name, h.home])).toEqual([['solo', home.home]]);
    } finally {
      if (saved === undefined) delete process.env.THECLAW_HOST;
      else process.env.THECLAW_HOST = saved;
    }
  });
});
