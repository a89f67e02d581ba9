import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHome, rejection, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt, type ThreadStore } from '../thread/index.js';
import { initAgent, INBOX_CONSUMER, startAgent } from './lifecycle.js';
import { moveAgent } from './move.js';
import { placeAgent, placedElsewhere } from './placement.js';
import { closeThreadStores } from './threads.js';

/**
 * Agent placement and `agent move`, in-process, with two "hosts" (a and b: two homes) sharing one
 * PostgreSQL database, which holds the agents' threads: what is tested is where an agent may
 * start, how its directory and placement move, and that the target host runs it after a move.
 */

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let store: ThreadStore;
let a: TestHome;
let b: TestHome;
let url: string;
const env = (host: 'a' | 'b') => ({ ...process.env, THECLAW_DATABASE_URL: url, THECLAW_HOST: host });

beforeAll(async () => {
  a = createTestHome();
  b = createTestHome();
  if (unavailable) return;
  cluster = await startPostgres();
  url = await cluster.createDatabase('move');
  store = await openStoreAt(url);
  await store.placements.seen('a', a.home);
  await store.placements.seen('b', b.home);
}, 120_000);

afterAll(async () => {
  await closeThreadStores();
  await store?.close();
  await cluster?.stop();
  a?.cleanup();
  b?.cleanup();
});

describe.skipIf(unavailable)(`agents on several hosts (${NEEDS_POSTGRES})`, () => {
  it('starts an agent only on its host: the config names it first, the store after', async () => {
    await initAgent(a.home, 'kim', {}, env('a'));
    await placeAgent(a.home, 'kim', env('a'));
    expect(await store.placements.get('agent:kim')).toMatchObject({ host: 'a', expiresAt: null });

    await initAgent(b.home, 'kim', {}, env('b'));
    const refused = await rejection(placeAgent(b.home, 'kim', env('b')));
    expect(refused.message).toMatch(/^agent kim is placed on host a \(the placements in .*\), not on this one \(b\), so it is not started here$/);
    expect(refused.suggestion).toBe('start it on a, or move it here with: agent move kim --to b (run on a)');
    rmSync(join(b.home, 'agents', 'kim'), { recursive: true });

    await initAgent(a.home, 'lee', {}, env('a'));
    writeFileSync(join(a.home, 'agents', 'lee', 'config.yaml'), `${readFileSync(join(a.home, 'agents', 'lee', 'config.yaml'), 'utf8')}placement: { host: b }\n`);
    expect((await rejection(placeAgent(a.home, 'lee', env('a')))).message).toContain('agent lee is placed on host b (its config.yaml)');
    expect(await store.placements.get('agent:lee')).toBeNull();
    // theclaw up on b leaves kim alone (placed on a) rather than refuse.
    expect([await placedElsewhere(b.home, 'kim', env('b')), await placedElsewhere(a.home, 'kim', env('a')), await placedElsewhere(b.home, 'lee', env('b'))]).toEqual(['a', null, null]);
  });

  it('moves an agent: stopped, its directory copied into the target home, placed there and started there, where its turns run', async () => {
    await startAgent(a.home, 'kim', env('a'));
    const inbox = await store.open('agents/kim/inbox');
    await inbox.append([{ source: 'agent:lee', type: 'message', content: 'hello' }]);
    expect((await store.leases!.due('a')).map((due) => due.name)).toEqual(['agents/kim/inbox']);

    const moved = await moveAgent(a.home, 'kim', 'b', {}, env('a'));
    expect(moved).toMatchObject({ id: 'kim', from: 'a', to: 'b', directory: join(b.home, 'agents', 'kim'), wasStarted: true, started: true });
    // Started on b: its inbox is subscribed again, and b's notifier (not a's) runs its turns.
    expect(await inbox.consumer(INBOX_CONSUMER)).toMatchObject({ subscribed: true, pending: 1 });
    expect((await store.leases!.due('b')).map((due) => due.name)).toEqual(['agents/kim/inbox']);
    expect(await store.leases!.due('a')).toEqual([]);
    await inbox.close();
    expect(existsSync(join(b.home, 'agents', 'kim', 'IDENTITY.md'))).toBe(true);
    expect(parse(readFileSync(join(b.home, 'agents', 'kim', 'config.yaml'), 'utf8')).placement).toEqual({ host: 'b' });
    expect((await store.placements.get('agent:kim'))?.host).toBe('b');
    await placeAgent(b.home, 'kim', env('b'));
    expect((await rejection(placeAgent(a.home, 'kim', env('a')))).message).toContain('agent kim is placed on host b');
  });

  it('refuses a move to an unknown host, and to a home it cannot reach, with the rsync to run', async () => {
    await initAgent(a.home, 'max', {}, env('a'));
    const unknown = await rejection(moveAgent(a.home, 'max', 'c', {}, env('a')));
    expect(unknown.message).toMatch(/^host c is not one of the hosts sharing .* \(a, b\)$/);
    expect(unknown.suggestion).toContain('THECLAW_HOST=c');

    await store.placements.seen('far', '/nonexistent/far-home');
    const far = await rejection(moveAgent(a.home, 'max', 'far', {}, env('a')));
    expect(far.message).toBe('the home of host far (/nonexistent/far-home) cannot be reached from this host, so the directory cannot be copied from here');
    expect(far.suggestion).toContain(`rsync -a ${join(a.home, 'agents', 'max')}/ far:/nonexistent/far-home/agents/max/`);
    expect(await store.placements.get('agent:max')).toBeNull();

    const copied = await moveAgent(a.home, 'max', 'far', { copied: true }, env('a'));
    // Never started here, but stopped for the copy by hand: started on the target.
    expect(copied).toMatchObject({ to: 'far', wasStarted: false, started: true });
    expect((await store.placements.get('agent:max'))?.host).toBe('far');
  });
});
