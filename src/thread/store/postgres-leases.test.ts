import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../../testing/postgres.js';
import { waitFor } from '../../testing/wait.js';
import { openStoreAt } from './choose.js';
import type { DueSubscription, LeaseHolder } from './postgres-leases.js';
import type { StoredThread, ThreadStore } from './types.js';

/**
 * The dispatch side of the PostgreSQL store against a real server: which subscriptions are due for
 * a host, and leases that only one taker gets. Two stores (two pools) stand for two hosts.
 */
const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let a: ThreadStore;
let b: ThreadStore;
let admin: postgres.Sql;
let names = 0;

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('leases');
  a = await openStoreAt(url);
  b = await openStoreAt(url);
  admin = postgres(url, { onnotice: () => {} });
}, 120_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await admin?.end({ timeout: 1 });
  await cluster?.stop();
});

const holder = (host: string, ttlMs = 60_000): LeaseHolder => ({ host, pid: 4242, ttlMs });
const msg = (content: string, type = 'message') => ({ source: 'self', type, content });

/** A fresh thread of store `a` with consumer `worker` subscribed, and one event pending. */
async function subscribed(options: { filter?: string; runOn?: string } = {}): Promise<StoredThread> {
  const thread = await a.init(`threads/l${++names}`);
  await thread.subscribe({ consumer: 'worker', handler: 'true', ...options });
  await thread.append([msg('x')]);
  return thread;
}

async function dueOf(store: ThreadStore, host: string, thread: StoredThread): Promise<DueSubscription | undefined> {
  return (await store.leases!.due(host)).find((due) => due.name === thread.name);
}

describe.skipIf(unavailable !== null)(`PostgreSQL leases${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('gives a due subscription to exactly one of two hosts taking it at once, and to nobody while held', async () => {
    for (let round = 0; round < 10; round++) {
      const thread = await subscribed();
      const due = (await dueOf(a, 'host-a', thread))!;
      expect(due).toMatchObject({ consumer: 'worker', filter: null });
      const [first, second] = await Promise.all([a.leases!.take(due, holder('host-a')), b.leases!.take(due, holder('host-b'))]);
      expect([first, second].filter((taken) => taken !== null)).toEqual([{ handler: 'true', progress: 0, failures: 0 }]);
      expect(await dueOf(b, 'host-b', thread)).toBeUndefined();
      expect(await b.leases!.take(due, holder('host-b'))).toBeNull();
      expect((await thread.consumer('worker'))!.lease).toMatchObject({ pid: 4242, host: first ? 'host-a' : 'host-b' });
    }
  });

  it("takes over a lease once it expired unrenewed, and the old holder's renewal then finds it lost", async () => {
    const thread = await subscribed();
    const due = (await dueOf(a, 'host-a', thread))!;
    expect(await a.leases!.take(due, holder('host-a', 300))).not.toBeNull();
    const lease = { thread: due.thread, consumer: 'worker', pid: 4242 };
    expect(await a.leases!.renew('host-a', [lease], 300)).toEqual([lease]); // renewed while held
    await waitFor(async () => (await b.leases!.take(due, holder('host-b'))) !== null, 'the expired lease to be taken over', 5_000);
    expect(await a.leases!.renew('host-a', [lease], 300)).toEqual([]);
    await a.leases!.release('host-a', lease); // not its holder any more: nothing
    expect((await thread.consumer('worker'))!.lease).toMatchObject({ host: 'host-b' });
    await b.leases!.release('host-b', lease);
    expect((await thread.consumer('worker'))!.lease).toBeNull();
    expect(await dueOf(a, 'host-a', thread)).toBeDefined();
  });

  it('runs a subscription with run_on only on the host its placement names, while that placement lasts', async () => {
    const thread = await subscribed({ runOn: 'channel:c1' });
    expect(await dueOf(a, 'host-a', thread)).toBeUndefined(); // no placement yet
    await admin`INSERT INTO theclaw.placements (key, host, expires_at) VALUES ('channel:c1', 'host-b', now() + interval '1 hour')`;
    expect(await dueOf(a, 'host-a', thread)).toBeUndefined();
    const due = (await dueOf(b, 'host-b', thread))!;
    expect(await a.leases!.take(due, holder('host-a'))).toBeNull();
    await admin`UPDATE theclaw.placements SET expires_at = now() - interval '1 second' WHERE key = 'channel:c1'`;
    expect(await b.leases!.take(due, holder('host-b'))).toBeNull(); // its gateway's lease ran out
    await admin`UPDATE theclaw.placements SET expires_at = NULL WHERE key = 'channel:c1'`;
    expect(await b.leases!.take(due, holder('host-b'))).not.toBeNull();
  });

  it('leaves out a subscription in backoff, one whose pending events its filter does not match, and one whose filter changed since the look', async () => {
    const filtered = await subscribed({ filter: "type = 'wanted'" });
    const due = (await dueOf(a, 'host-a', filtered))!;
    expect(due.filter).toBe("type = 'wanted'");
    expect(await a.leases!.take(due, holder('host-a'))).toBeNull(); // only a 'message' is pending
    await filtered.append([msg('y', 'wanted')]);
    await filtered.subscribe({ consumer: 'worker', handler: 'true', filter: "type = 'other'" });
    expect(await a.leases!.take(due, holder('host-a'))).toBeNull(); // the look's filter is no longer the subscription's
    const backoff = await subscribed();
    await backoff.recordRun('worker', { ok: false, error: 'boom', retryAt: new Date(Date.now() + 60_000) });
    expect(await dueOf(a, 'host-a', backoff)).toBeUndefined();
    await a.leases!.retryAllNow();
    expect(await a.leases!.take((await dueOf(a, 'host-a', backoff))!, holder('host-a'))).toMatchObject({ failures: 1 });
  });

  it('looks past a subscription whose pending events its filter does not match, once its filter was met, and tells a run that left events pending', async () => {
    const filtered = await subscribed({ filter: "type = 'wanted'" }); // a 'message' pending, not wanted
    // A filter no look has met yet: any pending event counts, and the take checks the filter.
    const due = (await dueOf(b, 'host-b', filtered))!;
    expect(await b.leases!.take(due, holder('host-b'))).toBeNull();
    expect(await dueOf(b, 'host-b', filtered)).toBeUndefined(); // met now: the look checks it itself
    expect(await dueOf(b, 'host-b', await subscribed())).toBeDefined(); // no filter: any event
    await filtered.append([msg('y', 'wanted')]);
    const wanted = (await dueOf(b, 'host-b', filtered))!;
    const taken = (await b.leases!.take(wanted, holder('host-b')))!;
    expect(await b.leases!.leftPending(wanted, taken.progress)).toBe(true);
    await filtered.ack('worker', 1); // past the unwanted one only: the wanted one still waits
    expect(await b.leases!.leftPending(wanted, taken.progress)).toBe(false); // its progress moved
    await filtered.append([msg('z')]);
    await filtered.ack('worker', 2);
    expect(await b.leases!.leftPending(wanted, 2)).toBe(false); // where it was, but only an unwanted event after it
  });

  it('notifies listeners on every host of an append and of a subscribe, by the thread', async () => {
    const heard: number[] = [];
    const listening = await b.listen!(
      (thread) => heard.push(thread),
      () => {},
    );
    try {
      const thread = await subscribed();
      const due = (await dueOf(a, 'host-a', thread))!;
      await waitFor(() => heard.filter((t) => t === due.thread).length >= 2, 'the subscribe and the append to be notified', 5_000);
    } finally {
      await listening.unlisten();
    }
  });
});
