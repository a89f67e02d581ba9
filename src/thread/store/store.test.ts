import Database from 'better-sqlite3';
import fc from 'fast-check';
import { spawnSync } from 'node:child_process';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identify } from '../../core/process.js';
import { createTestHome, rejection, type TestHome } from '../../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../../testing/postgres.js';
import type { PushInput } from '../types.js';
import { openStoreAt } from './choose.js';
import { SHARED_FILE_DAYS } from './shared-files.js';
import { POSTGRES_DIALECT } from './postgres-filter.js';
import { ensureSchema, readSchemaVersion, SCHEMA_VERSION } from './postgres-schema.js';
import { createSqliteStore } from './sqlite-store.js';
import type { StoreKind, ThreadStore } from './types.js';

/**
 * The store interface's contract (types.ts), one suite run against each store: SQLite files in a
 * test home, and a database in a throwaway PostgreSQL cluster (one for the file, started once).
 * Every test takes threads of its own names, so the stores are shared by the tests.
 */

const unavailable = postgresUnavailable();
let home: TestHome;
let cluster: PostgresCluster | undefined;
const stores = new Map<StoreKind, ThreadStore>();

let databaseUrl: string;

beforeAll(async () => {
  home = createTestHome();
  stores.set('sqlite', createSqliteStore(home.home));
  if (unavailable) return;
  cluster = await startPostgres();
  databaseUrl = await cluster.createDatabase('conformance');
  stores.set('postgres', await openStoreAt(databaseUrl));
}, 120_000);

afterAll(async () => {
  for (const store of stores.values()) await store.close();
  await cluster?.stop();
  home?.cleanup();
});

let names = 0;
const msg = (content: string, extra: Partial<PushInput> = {}): PushInput => ({ source: 'self', type: 'message', content, ...extra });
const ids = (events: { id: number }[]) => events.map((event) => event.id);
/** A pid that is surely dead: a child that has exited and been reaped. */
const deadPid = () => spawnSync('true').pid!;

for (const kind of ['sqlite', 'postgres'] as const) {
  const skip = kind === 'postgres' && unavailable !== null;
  describe.skipIf(skip)(`the ${kind} store${skip ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
    const store = () => stores.get(kind)!;
    const fresh = async () => store().init(`threads/t${++names}`);

    it('gives ids 1, 2, 3 in order, keeps the fields as pushed and shows no key', async () => {
      const thread = await fresh();
      const results = await thread.append([msg('a'), { source: 'external:webchat:main:dm:1:1', type: 'record', subtype: 'toolcall', content: 'é\n"x"' }]);
      expect(results).toEqual([
        { id: 1, duplicate: false },
        { id: 2, duplicate: false },
      ]);
      const [first, second] = await thread.peek();
      expect(first).toEqual({ id: 1, created_at: first!.created_at, source: 'self', type: 'message', subtype: null, content: 'a' });
      expect(second).toMatchObject({ id: 2, source: 'external:webchat:main:dm:1:1', type: 'record', subtype: 'toolcall', content: 'é\n"x"' });
      expect(new Date(first!.created_at).toISOString()).toBe(first!.created_at);
      expect(await thread.info()).toMatchObject({ events: 2, last_id: 2, consumers: [] });
    });

    it('stores a key once: a repeat gives the first id, within one batch too, and the key finds it', async () => {
      const thread = await fresh();
      expect(await thread.append([msg('a', { idempotency_key: 'k1' })])).toEqual([{ id: 1, duplicate: false }]);
      const again = await thread.append([msg('b'), msg('a again', { idempotency_key: 'k1' }), msg('c', { idempotency_key: 'k2' }), msg('c again', { idempotency_key: 'k2' })]);
      expect(again).toEqual([
        { id: 2, duplicate: false },
        { id: 1, duplicate: true },
        { id: 3, duplicate: false },
        { id: 3, duplicate: true },
      ]);
      expect((await thread.peek()).map((event) => event.content)).toEqual(['a', 'b', 'c']);
      expect([await thread.findByKey('k2'), await thread.findByKey('k1'), await thread.findByKey('k3')]).toEqual([3, 1, undefined]);
    });

    it('gives appends from two connections at once ids without gaps, storing each key once', async () => {
      const thread = await fresh();
      // A second store: its own connections (PostgreSQL) or its own database handle (SQLite).
      const second = kind === 'sqlite' ? createSqliteStore(home.home) : await openStoreAt(databaseUrl);
      const other = await second.open(thread.name);
      const appends = Array.from({ length: 40 }, (_, n) => (n % 2 ? thread : other).append([msg(`m${n}`, { idempotency_key: `k${n % 20}` })]));
      const results = (await Promise.all(appends)).flat();
      expect(
        results
          .filter((result) => !result.duplicate)
          .map((result) => result.id)
          .sort((a, b) => a - b),
      ).toEqual(Array.from({ length: 20 }, (_, n) => n + 1));
      expect(new Set(results.map((result) => result.id)).size).toBe(20);
      expect(await thread.info()).toMatchObject({ events: 20, last_id: 20 });
      await other.close();
      await second.close();
    });

    it('stores a batch whole or not at all, leaving no gap in the ids', async () => {
      const thread = await fresh();
      await thread.append([msg('first')]);
      const error = await rejection(thread.append([msg('a'), { source: 'self', type: 'Not A Word', content: 'b' }]));
      expect(error.kind).toBe('usage');
      expect(error.message).toMatch(/event 2/);
      expect(await thread.append([msg('next')])).toEqual([{ id: 2, duplicate: false }]);
    });

    it("pops after the consumer's progress; ack moves only forward and never past the newest event", async () => {
      const thread = await fresh();
      await thread.append([msg('1'), msg('2'), msg('3')]);
      expect(ids(await thread.pop('worker', { limit: 2 }))).toEqual([1, 2]);
      expect(ids(await thread.pop('worker'))).toEqual([1, 2, 3]); // reading acknowledges nothing
      expect(ids(await thread.pop('worker', { lastEventId: 2 }))).toEqual([3]);
      expect(await thread.ack('worker', 1)).toBe(2);
      const past = await rejection(thread.ack('worker', 4));
      expect([past.kind, past.message]).toEqual(['not_found', `event 4 does not exist in ${thread.path} (the newest is 3)`]);
      expect((await rejection(thread.ack('worker', -1))).kind).toBe('usage');
      expect((await rejection(thread.pop('bad name'))).kind).toBe('usage');
      expect(await thread.consumer('worker')).toMatchObject({ progress: 2, pending: 1, subscribed: false });
      expect(await thread.consumer('nobody')).toBeNull();
    });

    it('acknowledges in the same transaction as an append: a refused ack stores none of it', async () => {
      const thread = await fresh();
      await thread.append([msg('question')]);
      expect((await rejection(thread.append([msg('answer')], { ack: { consumer: 'inbox', eventId: 9 } }))).kind).toBe('not_found');
      expect(ids(await thread.peek())).toEqual([1]);
      expect(await thread.append([msg('answer', { idempotency_key: 'reply:1' })], { ack: { consumer: 'inbox', eventId: 1 } })).toEqual([{ id: 2, duplicate: false }]);
      expect(await thread.consumer('inbox')).toMatchObject({ progress: 1 });
    });

    it("filters with the filter language's meaning: LIKE folds ASCII case only, GLOB none, text compares by bytes", async () => {
      const thread = await fresh();
      const sources = ['alpha', 'Alpha', 'beta', 'Émile', 'émile', 'a_b', 'a%b', 'x]y', 'x-y', 'line break'];
      await thread.append(sources.map((source, n) => ({ source, type: n % 2 ? 'record' : 'message', subtype: n % 3 ? null : 'note', content: String(n) })));
      const cases: [string, number[]][] = [
        ["source LIKE 'alp%'", [1, 2]],
        ["source LIKE 'émile'", [5]],
        ["source LIKE 'a_b'", [6, 7]],
        ["source LIKE 'a%b'", [6, 7]],
        ["source GLOB 'a*'", [1, 6, 7]],
        ["source GLOB '[A-Z]*'", [2]],
        ["source GLOB '?lpha'", [1, 2]],
        ["source GLOB 'x[]-]y'", [8, 9]],
        ["source GLOB 'x[^]]y'", [9]],
        ["source GLOB '[unclosed'", []],
        ["source NOT GLOB '*a*'", [4, 5, 8, 9]],
        ["source < 'a'", [2]],
        ["source > 'z'", [4, 5]],
        ['id > 8.5', [9, 10]],
        ['id IN (2, 4.0, 11)', [2, 4]],
        ["type IN ('record') AND subtype IS NOT NULL", [4, 10]],
        ["NOT (subtype = 'note')", []],
        ['subtype IS NULL AND id <= 3', [2, 3]],
      ];
      for (const [filter, expected] of cases) expect(ids(await thread.peek({ filter })), filter).toEqual(expected);
      expect(ids(await thread.peek({ last: 2, filter: "type = 'message'" }))).toEqual([7, 9]);
      expect(ids(await thread.peek({ afterId: 8, limit: 1 }))).toEqual([9]);
    });

    it('subscribes with progress kept; a changed handler starts a clean run record, the same one keeps it', async () => {
      const thread = await fresh();
      await thread.append([msg('1'), { source: 'self', type: 'record', content: 'r' }]);
      await thread.ack('worker', 1);
      await thread.subscribe({ consumer: 'worker', handler: 'run --x', filter: "type = 'message'" });
      expect(await thread.hasPending('worker')).toBe(false);
      await thread.append([msg('2')]);
      expect(await thread.hasPending('worker')).toBe(true);
      await thread.recordRun('worker', { ok: false, error: 'boom', retryAt: new Date(Date.UTC(2030, 0, 1)) });
      await thread.subscribe({ consumer: 'worker', handler: 'run --x', filter: "type = 'message'" });
      expect(await thread.consumer('worker')).toMatchObject({ progress: 1, pending: 1, failures: 1, last_error: 'boom', retry_at: '2030-01-01T00:00:00.000Z' });
      await thread.retryNow('worker');
      expect(await thread.consumer('worker')).toMatchObject({ failures: 1, retry_at: null });
      await thread.subscribe({ consumer: 'worker', handler: 'run --y' });
      expect(await thread.consumer('worker')).toMatchObject({ handler: 'run --y', filter: null, failures: 0, last_error: null, pending: 2 });
      expect((await thread.subscriptions()).map((s) => s.consumer)).toEqual(['worker']);
      await thread.unsubscribe('worker');
      expect(await thread.subscriptions()).toEqual([]);
      expect(await thread.consumer('worker')).toMatchObject({ subscribed: false, progress: 1 });
      expect((await rejection(thread.unsubscribe('nobody'))).kind).toBe('not_found');
      expect((await rejection(thread.subscribe({ consumer: 'w', handler: 'x', filter: 'nope' }))).kind).toBe('usage');
    });

    it('gives a lease only to a first holder or over a dead one, and hands it on and back only by its holder', async () => {
      const thread = await fresh();
      await thread.subscribe({ consumer: 'worker', handler: 'true' });
      expect(await thread.takeLease('nobody', identify(process.pid))).toBe(false);
      expect(await thread.takeLease('worker', { pid: deadPid(), start: null })).toBe(true);
      expect(await thread.takeLease('worker', identify(process.pid))).toBe(true); // its holder is dead
      expect(await thread.takeLease('worker', identify(process.pid))).toBe(false); // a live one holds it
      expect((await thread.consumer('worker'))!.lease).toMatchObject({ pid: process.pid });
      await thread.transferLease('worker', 12345, { pid: process.ppid, start: null }); // not the holder: nothing
      expect((await thread.consumer('worker'))!.lease?.pid).toBe(process.pid);
      await thread.transferLease('worker', process.pid, identify(process.ppid));
      expect((await thread.consumer('worker'))!.lease?.pid).toBe(process.ppid);
      await thread.releaseLease('worker', process.pid); // no longer the holder: nothing
      expect((await thread.consumer('worker'))!.lease?.pid).toBe(process.ppid);
      await thread.releaseLease('worker', process.ppid);
      expect((await thread.consumer('worker'))!.lease).toBeNull();
    });

    it('prunes only what every consumer has read, beyond the newest kept, and never gives an id again', async () => {
      const thread = await fresh();
      await thread.append(Array.from({ length: 6 }, (_, n) => msg(String(n + 1))));
      await thread.ack('slow', 3);
      const future = '9999-01-01T00:00:00.000Z';
      expect(await thread.prune({ before: future, keep: 1, dryRun: true })).toBe(3);
      expect(await thread.prune({ before: '2000-01-01T00:00:00.000Z', keep: 1 })).toBe(0);
      expect(await thread.prune({ before: future, keep: 1 })).toBe(3);
      await thread.ack('slow', 6);
      expect(await thread.prune({ before: future, keep: 0 })).toBe(3);
      expect(await thread.append([msg('7')])).toEqual([{ id: 7, duplicate: false }]);
      expect(await thread.info()).toMatchObject({ events: 1, last_id: 7 });
    });

    it('opens only a thread that exists, inits only one that does not, and lists them all', async () => {
      const name = `threads/t${++names}`;
      expect((await rejection(store().open(name))).kind).toBe('not_found');
      await (await store().open(name, { create: true })).close();
      expect((await rejection(store().init(name))).kind).toBe('conflict');
      expect(await store().list()).toContain(name);
    });

    it('dumps a thread whole and loads it as a new one with the same ids, keys, progress and run records', async () => {
      const thread = await fresh();
      await thread.append([msg('a', { idempotency_key: 'k' }), msg('b'), msg('c')]);
      await thread.subscribe({ consumer: 'out', handler: 'deliver', filter: "source = 'self'" });
      await thread.ack('out', 2);
      await thread.recordRun('out', { ok: false, error: 'down', retryAt: new Date(0) });
      await thread.prune({ before: '9999-01-01T00:00:00.000Z', keep: 2 });
      const dump = await store().dump(thread.name);
      expect(dump).toMatchObject({ last_id: 3, consumers: [{ consumer: 'out', progress: 2, subscribed: true, failures: 1, last_error: 'down', retry_at: 0 }] });
      expect(dump.events.map((e) => [e.id, e.idempotency_key])).toEqual([
        [2, null],
        [3, null],
      ]);
      const copy = { ...dump, name: `threads/t${++names}` };
      await store().load(copy);
      expect(await store().dump(copy.name)).toEqual(copy);
      const loaded = await store().open(copy.name);
      expect(await loaded.append([msg('d')])).toEqual([{ id: 4, duplicate: false }]);
      await loaded.close();
      expect((await rejection(store().load(copy))).kind).toBe('conflict');
    });
  });
}

describe.skipIf(unavailable !== null)(`the PostgreSQL filter dialect${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  // Any pattern, set syntax and case included, is matched as SQLite matches it: both databases answer.
  it('matches random texts with random GLOB and LIKE patterns exactly as SQLite does', async () => {
    const sqlite = new Database(':memory:');
    const glob = sqlite.prepare('SELECT ? GLOB ? AS glob, ? LIKE ? AS like');
    const pg = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const text = fc.string({ unit: fc.constantFrom('a', 'b', 'A', 'B', 'z', '-', '[', ']', '^', '*', '?', '%', '_', '\\', '.', 'é', 'É', ' '), maxLength: 6 });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.tuple(text, text), { minLength: 1, maxLength: 40 }), async (pairs) => {
          const expected = pairs.map(([value, pattern]) => {
            const row = glob.get(value, pattern, value, pattern) as { glob: number; like: number };
            return [row.glob === 1, row.like === 1];
          });
          const rows = await pg.unsafe<{ glob: boolean; like: boolean }[]>(
            `SELECT ${POSTGRES_DIALECT.glob('v', false, 'r')} AS glob, ${POSTGRES_DIALECT.like('v', false, 'p')} AS like
             FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(v, p, r, n) ORDER BY n`,
            [pairs.map(([value]) => value), pairs.map(([, pattern]) => pattern), pairs.map(([, pattern]) => POSTGRES_DIALECT.globValue(pattern))] as never,
          );
          expect(rows.map((row) => [row.glob, row.like])).toEqual(expected);
        }),
        { numRuns: 60 },
      );
    } finally {
      await pg.end();
      sqlite.close();
    }
  });
});

describe.skipIf(unavailable !== null)(`the PostgreSQL schema${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('is created once when several processes open a new database at the same moment, and each of them opens it', async () => {
    // Two hosts' notifiers started together: each had looked (and found no schema) before the first created it.
    for (let round = 0; round < 3; round++) {
      const url = await cluster!.createDatabase(`together${round}`);
      const opened = await Promise.allSettled(Array.from({ length: 4 }, () => openStoreAt(url)));
      const failures = opened.flatMap((result) => (result.status === 'rejected' ? [(result.reason as Error).message] : []));
      for (const result of opened) if (result.status === 'fulfilled') await result.value.close();
      expect(failures).toEqual([]);
    }
  });

  it('brings a version 1 schema up to this version, keeping its rows', async () => {
    const url = await cluster!.createDatabase('upgrade');
    const pg = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await ensureSchema(pg, 'upgrade', 1);
      await pg`INSERT INTO theclaw.threads (name, created_at) VALUES ('agents/a/inbox', '2026-11-27T00:00:00.000Z')`;
      expect(await readSchemaVersion(pg)).toBe(1);
      const store = await openStoreAt(url);
      const thread = await store.open('agents/a/inbox');
      await thread.append([msg('after the upgrade')]);
      expect((await thread.peek()).map((event) => event.content)).toEqual(['after the upgrade']);
      expect(await readSchemaVersion(pg)).toBe(SCHEMA_VERSION);
      const columns = await pg<{ column_name: string }[]>`
        SELECT column_name FROM information_schema.columns WHERE table_schema = 'theclaw' AND table_name = 'consumers' AND column_name IN ('run_on', 'lease_host', 'lease_expires')`;
      expect(columns).toHaveLength(3);
      // Version 3's: a reply's files, by their SHA-256, for a deliverer on another host.
      const sha256 = await store.files!.put(Buffer.from('a file'));
      expect((await store.files!.get(sha256))?.toString()).toBe('a file');
      expect(await store.files!.get('0'.repeat(64))).toBeNull();
      // Kept SHARED_FILE_DAYS after its last put: the next put removes one older.
      await pg`UPDATE theclaw.files SET stored_at = now() - ${SHARED_FILE_DAYS + 1}::int * interval '1 day'`;
      await store.files!.put(Buffer.from('another file'));
      expect(await store.files!.get(sha256)).toBeNull();
      await store.close();
    } finally {
      await pg.end();
    }
  });
});
