import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDir, closeThreadStores, FeedWriter, INBOX_CONSUMER, INBOX_FILTER, initAgent, openAgentThread } from '../agent/index.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt, type ThreadStore } from '../thread/index.js';
import { doctor } from './doctor.js';
import { dayDigest } from './evolver-digest.js';
import { recentErrors } from './failures.js';
import { hasNew, sweepsHere } from './feed-sweep.js';
import { sweep } from './maintainer.js';
import { prune } from './prune.js';
import { startDaemon, stopDaemon } from '../notifier/control.js';
import { retry } from './system.js';
import { statusDetails, systemStatus } from './status.js';
import { ward } from './warden.js';

/**
 * What `theclaw status`, `prune`, the feeds' sweeps, the evolver's digest and doctor's looks at
 * waiting events and leases read on a PostgreSQL store: the threads in
 * the database, not the home's SQLite files (which are not there). In-process, one cluster; the
 * process's environment names the store, as a host's would.
 */

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let t: TestHome;
let store: ThreadStore;
const CONVERSATION = 'agents/admin/threads/peers/webchat.main.p1';
const saved = { url: process.env.THECLAW_DATABASE_URL, host: process.env.THECLAW_HOST };

beforeAll(async () => {
  t = createTestHome();
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('theclaw_reads');
  process.env.THECLAW_DATABASE_URL = url;
  process.env.THECLAW_HOST = 'a';
  store = await openStoreAt(url);
  await initAgent(t.home, 'admin');
  const talk = await openAgentThread(t.home, join(t.home, CONVERSATION), { create: true });
  await talk.append([
    { source: 'external:webchat:main:dm:p1:p1', type: 'message', content: '{"text":"hello"}' },
    { source: 'self', type: 'record', subtype: 'error', content: '{"stage":"llm","kind":"auth","status":401,"error":"the model refused the request (401)"}' },
    { source: 'self', type: 'message', content: '{"text":"sorry"}' },
  ]);
  await talk.close();
  const feeds = new FeedWriter(t.home, 'admin');
  await feeds.append('errors', 'error', { agent: 'admin', thread: 'peer-webchat.main.p1', stage: 'llm', kind: 'auth', status: 401, reason: 'the model refused the request (401)' });
  await feeds.append('toolcalls', 'toolcall', { agent: 'admin', thread: 'peer-webchat.main.p1', event: 2, command: 'rm -rf /', exit_code: 126 });
  await feeds.close();
}, 120_000);

afterAll(async () => {
  if (cluster) await stopDaemon(t.home);
  await closeThreadStores();
  await store?.close();
  await cluster?.stop();
  t?.cleanup();
  for (const [name, value] of [
    ['THECLAW_DATABASE_URL', saved.url],
    ['THECLAW_HOST', saved.host],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe.skipIf(unavailable)(`theclaw's reads of a PostgreSQL store (${NEEDS_POSTGRES})`, () => {
  it("finds the agents' threads for status: recent errors and each thread's newest events", async () => {
    expect(existsSync(join(t.home, CONVERSATION, 'events.db'))).toBe(false); // nothing in the home's files
    expect((await recentErrors(t.home, 10)).map((e) => [e.agent, e.thread, e.id, e.status])).toEqual([['admin', 'threads/peers/webchat.main.p1', 2, 401]]);
    const details = await statusDetails(t.home, 2);
    expect(details.threads.map((thread) => [thread.thread, thread.events.map((event) => event.id)])).toEqual([['threads/peers/webchat.main.p1', [3, 2]]]);
  });

  it("digests an agent's day from its conversations in the database", async () => {
    const hour = 3_600_000;
    const digest = await dayDigest(t.home, agentDir(t.home, 'admin'), new Date(Date.now() - hour).toISOString(), new Date(Date.now() + hour).toISOString());
    expect(digest).toMatchObject({ messages: 1, conversations: 1, replies: 1, errors: [{ what: 'llm auth (401)', count: 1 }] });
  });

  it("sweeps the feeds in the database: the maintainer's errors and the warden's commands, read once", async () => {
    expect([await hasNew(t.home, 'errors', 'maintainer'), await hasNew(t.home, 'toolcalls', 'warden')]).toEqual([true, true]);
    expect(await sweep(t.home)).toEqual({ read: 1, reported: [] }); // admin has no owner's chat to tell yet
    const warded = await ward(t.home);
    expect(warded.read).toBe(1);
    expect(warded.findings.map((finding) => [finding.command, finding.told])).toEqual([['rm -rf /', false]]);
    expect([await hasNew(t.home, 'errors', 'maintainer'), await hasNew(t.home, 'toolcalls', 'warden')]).toEqual([false, false]);
    expect((await (await store.open('feeds/errors')).consumer('maintainer'))?.progress).toBe(1);
    // Swept on admin's host only (telling the owner needs its directory): another host's timer passes.
    expect(await sweepsHere(t.home)).toBe(true);
    await store.placements.assign('agent:admin', 'b');
    expect(await sweepsHere(t.home)).toBe(false);
    await store.placements.assign('agent:admin', 'a');
  });

  it("prunes the database's old events that every consumer has read, keeping the newest of each thread", async () => {
    const report = await prune(t.home, { olderThanMs: -60_000, keepEvents: 1 });
    // The conversation keeps its newest; each feed has one event, which stays as its newest.
    expect(report.events).toEqual({ threads: 1, removed: 2 });
    expect((await (await store.open(CONVERSATION)).peek()).map((event) => event.id)).toEqual([3]);
  });

  it("tells in doctor how long events have waited in the database: a subscription behind, and a stopped agent's inbox", async () => {
    await (await store.open(CONVERSATION)).subscribe({ consumer: 'watcher', handler: 'true' });
    const inbox = await openAgentThread(t.home, agentDir(t.home, 'admin').inbox);
    await inbox.append([{ source: 'external:webchat:main:dm:p1:p1', type: 'message', content: '{"text":"anyone?"}' }]);
    await inbox.close();
    const pending = async (now: number) => (await doctor(t.home, process.env, now, { offline: true, bwrap: null, chromium: null })).find((check) => check.name === 'pending');
    expect(await pending(Date.now())).toMatchObject({ status: 'ok' });
    expect(await pending(Date.now() + 120_000)).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(new RegExp(`^events waiting more than a minute: 1 on ${CONVERSATION} \\(watcher, since \\d{4}-.+\\); 1 in the inbox of admin, which is stopped$`)),
      fix: 'theclaw up; agent start admin',
    });
  });

  it("names the subscriptions by their threads in the home: a model outage, the queues, and only this host's leases held by dead processes", async () => {
    const admin = agentDir(t.home, 'admin');
    await (await store.open('agents/admin/inbox')).subscribe({ consumer: INBOX_CONSUMER, handler: 'true', filter: INBOX_FILTER });
    // Both leases name a process that has ended; the watcher's is host b's, whose pids mean nothing here.
    const dead = spawnSync('true').pid;
    const due = await store.leases!.due('b');
    const lease = (consumer: string) => due.find((sub) => sub.consumer === consumer)!;
    await store.leases!.take(lease('watcher'), { host: 'b', pid: dead, ttlMs: 3_600_000 });
    await store.leases!.take(lease(INBOX_CONSUMER), { host: 'a', pid: dead, ttlMs: 3_600_000 });
    const retryAt = new Date(Date.now() + 3_600_000);
    await (await store.open('agents/admin/inbox')).recordRun(INBOX_CONSUMER, { ok: false, error: 'the model is unavailable', retryAt });
    const since = new Date().toISOString();
    writeFileSync(admin.outage, JSON.stringify({ since, last_at: since, kind: 'unavailable', status: 503, error: 'the provider answered 503' }));

    const status = await systemStatus(t.home);
    expect(status.model_waits).toEqual([{ agent: 'admin', pending: 1, since, kind: 'unavailable', status: 503, error: 'the provider answered 503', retry_at: retryAt.toISOString() }]);
    expect(status.queues.map((queue) => [queue.thread, queue.consumer, queue.state])).toEqual(
      expect.arrayContaining([
        ['agents/admin/inbox', INBOX_CONSUMER, 'running'],
        [CONVERSATION, 'watcher', 'running'],
      ]),
    );
    const checks = await doctor(t.home, process.env, Date.now(), { offline: true, bwrap: null, chromium: null });
    expect(checks.find((check) => check.name === 'model')?.detail).toMatch(/^messages wait for the model: 1 of admin since /);
    expect(checks.find((check) => check.name === 'locks')?.detail).toBe(`held by processes that died: lease of ${INBOX_CONSUMER} on agents/admin/inbox (pid ${dead})`);
  });

  it('wakes the inbox waiting out its backoff in the database, named by its thread in the home (theclaw retry)', async () => {
    await startDaemon(t.home);
    expect((await retry(t.home)).woken).toEqual([{ thread: 'agents/admin/inbox', consumer: INBOX_CONSUMER, failures: 1, last_error: 'the model is unavailable' }]);
  });
});
