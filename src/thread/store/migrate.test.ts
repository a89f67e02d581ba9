import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHome, expectRefused, runTool, type RunResult, type TestHome } from '../../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../../testing/postgres.js';
import { listThreads } from '../dispatch/registry.js';
import { initThread, openThread } from '../thread.js';
import { openStoreAt } from './choose.js';
import { migrateThreads } from './migrate.js';

/**
 * `thread migrate` and the thread CLI on PostgreSQL, run as a user runs them (the built CLI),
 * against one throwaway cluster for the file.
 */

const unavailable = postgresUnavailable();
let cluster: PostgresCluster;
let t: TestHome;
const homes: TestHome[] = [];

/** A home as TheClaw leaves it: inboxes and conversations, keys, pruned events, subscriptions and a failing run. */
function fillHome(home: string): void {
  for (const agent of ['a', 'b']) {
    const inbox = initThread(join(home, 'agents', agent, 'inbox'), { home });
    inbox.pushBatch(Array.from({ length: 5 }, (_, n) => ({ source: `external:webchat:main:dm:${n}:${n}`, type: 'message', content: `{"text":"hi ${n}"}`, idempotency_key: `webchat:${agent}:${n}` })));
    inbox.subscribe({ consumer: 'inbox', handler: `node agent run ${agent}`, filter: "type = 'message'" });
    inbox.ack('inbox', 4);
    inbox.dispatch.recordRun('inbox', { ok: false, error: 'model down', retryAt: new Date(Date.UTC(2030, 0, 1)) });
    inbox.close();
    const talk = initThread(join(home, 'agents', agent, 'threads', 'peers', 'webchat-1'), { home });
    talk.pushBatch([
      { source: 'external:webchat:main:dm:1:1', type: 'message', content: 'question' },
      { source: 'self', type: 'record', subtype: 'usage', content: '{"tokens":3}' },
      { source: 'self', type: 'message', content: 'answer ✓' },
    ]);
    talk.ack('outbound', 3);
    talk.prune({ before: '9999-01-01T00:00:00.000Z', keep: 1 });
    talk.close();
  }
}

function summaryLines(result: RunResult): { from: string; to: string } {
  const [from, to, done] = result.stdout.trim().split('\n');
  expect(done, result.stdout + result.stderr).toMatch(/^copied \d+ threads; counts and hashes match$/);
  const counts = (line: string) => line.replace(/^(from|to {2}) \S+ \S+: /, '');
  return { from: counts(from!), to: counts(to!) };
}

describe.skipIf(unavailable !== null)(`thread migrate and the thread CLI on PostgreSQL${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  beforeAll(async () => {
    cluster = await startPostgres();
    t = createTestHome();
    fillHome(t.home);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    t?.cleanup();
    for (const home of homes) home.cleanup();
  });

  it('copies a home to PostgreSQL and back into a new home with equal counts and hashes (sqlite → pg → sqlite)', async () => {
    const url = await cluster.createDatabase('round_trip');
    const there = await runTool('thread', ['migrate', '--to', url], { ...t.env, THECLAW_HOST: 'here' });
    expect(there.stderr).toBe('');
    const out = summaryLines(there);
    expect(out.from).toMatch(/^4 threads, 12 events, 4 consumers, sha256 [0-9a-f]{64}$/);
    expect(out.to).toBe(out.from);
    // One host's home: its agents are placed on it, and it is one of the hosts.
    expect(there.stdout.trim().split('\n')[3]).toBe('placed 2 agents; 1 hosts');
    const copied = await openStoreAt(url);
    expect((await copied.placements.list()).map((p) => [p.key, p.host])).toEqual([
      ['agent:a', 'here'],
      ['agent:b', 'here'],
    ]);
    expect((await copied.placements.hosts()).map((host) => [host.name, host.home])).toEqual([['here', t.home]]);
    await copied.close();

    const back = createTestHome();
    homes.push(back);
    const returned = await runTool('thread', ['migrate', '--from', url, '--to', join(back.home, 'copy'), '--json'], t.env);
    const json = JSON.parse(returned.stdout) as { from: { sha256: string; kind: string }; to: { sha256: string; kind: string; location: string } };
    expect([json.from.kind, json.to.kind]).toEqual(['postgres', 'sqlite']);
    expect(json.to.sha256).toBe(out.from.split('sha256 ')[1]);

    // The copy is a home like the first: the same events by id, the progress, the registry, the JSONL copy.
    const copy = join(back.home, 'copy');
    for (const name of ['agents/a/inbox', 'agents/b/threads/peers/webchat-1']) {
      const [original, copied] = [openThread(join(t.home, name), { home: t.home }), openThread(join(copy, name), { home: copy })];
      expect(copied.peek()).toEqual(original.peek());
      expect(copied.info().consumers).toEqual(original.info().consumers);
      original.close();
      copied.close();
    }
    expect(listThreads(copy).sort()).toEqual([join(copy, 'agents/a/inbox'), join(copy, 'agents/b/inbox')]);
    expect(readFileSync(join(copy, 'agents/a/inbox/events.jsonl'), 'utf8').trim().split('\n')).toHaveLength(5);
  });

  it('copies the placements, the hosts and where subscriptions run between databases, and names the agents of other hosts when copied into a home', async () => {
    const from = await openStoreAt(await cluster.createDatabase('hosts_from'));
    const inbox = await from.init('agents/kim/inbox');
    await inbox.append([{ source: 'agent:lee', type: 'message', content: 'hi' }]);
    await inbox.subscribe({ consumer: 'inbox', handler: 'node agent run kim', runOn: 'agent:kim' });
    await inbox.close();
    await (await from.init('agents/lee/inbox')).close();
    await from.placements.seen('a', '/homes/a');
    await from.placements.seen('b', '/homes/b');
    await from.placements.assign('agent:kim', 'b');
    await from.placements.assign('agent:lee', 'a');
    await from.placements.claim('channel:telegram:main', 'a', { ttlMs: 60_000 });

    const to = await openStoreAt(await cluster.createDatabase('hosts_to'));
    const result = await migrateThreads(from, to);
    expect(result.placements).toEqual({ agents: 2, hosts: 2, elsewhere: [] });
    expect(result.to.sha256).toBe(result.from.sha256);
    expect((await to.placements.list()).map((p) => [p.key, p.host, p.expiresAt])).toEqual([
      ['agent:kim', 'b', null],
      ['agent:lee', 'a', null],
    ]);
    expect((await to.placements.hosts()).map((host) => [host.name, host.home])).toEqual([
      ['a', '/homes/a'],
      ['b', '/homes/b'],
    ]);
    // kim's inbox runs on b's notifier in the copy too, and nowhere else.
    expect((await to.leases!.due('b')).map((due) => due.name)).toEqual(['agents/kim/inbox']);
    expect(await to.leases!.due('a')).toEqual([]);
    expect((await to.dump('agents/kim/inbox')).consumers[0]?.run_on).toBe('agent:kim');

    // Into host a's home: one host, nothing stored; kim's directory is on b.
    const home = createTestHome();
    homes.push(home);
    writeFileSync(join(home.home, 'config.yaml'), 'host: a\n');
    const back = await openStoreAt(home.home);
    const returned = await migrateThreads(to, back);
    expect(returned.placements).toEqual({ agents: 0, hosts: 0, elsewhere: ['kim on b'] });
    expect(returned.to.sha256).toBe(returned.from.sha256);
    await Promise.all([from.close(), to.close(), back.close()]);
  });

  it('refuses to copy into a store that holds the threads already, and copies nothing', async () => {
    const url = await cluster.createDatabase('taken');
    const store = await openStoreAt(url);
    await (await store.init('agents/b/inbox')).close();
    const result = await runTool('thread', ['migrate', '--to', url], t.env);
    expectRefused(result, 1, /already holds 1 of the threads to copy \(agents\/b\/inbox\)/);
    expect(await store.list()).toEqual(['agents/b/inbox']);
    await store.close();
  });

  it('runs the thread commands on the database THECLAW_DATABASE_URL (or store: in config.yaml) names', async () => {
    const url = await cluster.createDatabase('cli');
    const home = createTestHome();
    homes.push(home);
    const env = { ...home.env, THECLAW_DATABASE_URL: url };
    const thread = (args: string[], input?: string) => runTool('thread', args, env, input);
    const at = join(home.home, 'agents', 'x', 'inbox');
    expect((await thread(['init', at])).stdout).toBe('created thread agents/x/inbox\n');
    expect((await thread(['push', '--thread', at, '--source', 'self', '--type', 'message', '--content', 'one', '--idempotency-key', 'k'])).stdout).toBe('1\n');
    expect((await thread(['push', '--thread', at, '--source', 'self', '--type', 'message', '--content', 'again', '--idempotency-key', 'k'])).stdout).toBe('1\n');
    expect((await thread(['push', '--thread', at, '--source', 'other', '--type', 'record', '--batch'], '{"content":"two"}\n{"content":"three"}\n')).stdout).toBe('2\n3\n');
    const peeked = await thread(['peek', '--thread', at, '--filter', "type = 'record'", '--last', '1']);
    expect(JSON.parse(peeked.stdout)).toMatchObject({ id: 3, source: 'other', content: 'three' });
    expect((await thread(['pop', '--thread', at, '--consumer', 'w', '--last-event-id', '2'])).stdout).toMatch(/^\{"id":3,/);
    expect((await thread(['subscribe', '--thread', at, '--consumer', 'w', '--handler', 'true'])).stdout).toBe('subscribed w to agents/x/inbox\n');
    const info = JSON.parse((await thread(['info', '--thread', at, '--json'])).stdout) as { events: number; consumers: { consumer: string; progress: number; pending: number }[] };
    expect(info).toMatchObject({ events: 3, consumers: [{ consumer: 'w', progress: 2, pending: 1 }] });
    // Nothing went to the home's files, and notifier's dispatch is refused, not run on SQLite.
    expect((await runTool('thread', ['info', '--thread', at], home.env)).code).toBe(1);
    expectRefused(await thread(['dispatch', '--thread', at]), 1, /runs the handlers of SQLite threads only so far, and THECLAW_DATABASE_URL names PostgreSQL/);

    writeFileSync(join(home.home, 'config.yaml'), `store: ${url}\n`);
    expect(JSON.parse((await runTool('thread', ['peek', '--thread', at, '--last', '1'], home.env)).stdout)).toMatchObject({ id: 3 });
  });

  it('says a store cannot be reached without showing the password, and refuses a setting that is no URL', async () => {
    const env = { ...t.env, THECLAW_DATABASE_URL: 'postgres://postgres:sekret@127.0.0.1:1/none' };
    const result = await runTool('thread', ['info', '--thread', join(t.home, 'agents/a/inbox')], env);
    const line = expectRefused(result, 1, /^Error: cannot use postgres:\/\/postgres@127\.0\.0\.1:1\/none: .*ECONNREFUSED/);
    expect(line).not.toContain('sekret');
    expectRefused(await runTool('thread', ['info', '--thread', 'x'], { ...t.env, THECLAW_DATABASE_URL: 'mysql://db' }), 2, /THECLAW_DATABASE_URL is neither sqlite nor a PostgreSQL URL/);
  });
});
