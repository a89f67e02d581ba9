import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHome, runTool, waitFor, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt, type ThreadStore } from '../thread/index.js';
import { connectWebchat } from './channels/webchat-client.js';
import type { XgwStatus } from './protocol.js';

/**
 * Two gateways on one PostgreSQL store, as two hosts ("a" and "b": two homes on this machine),
 * with the same web chat configured: only the owner serves it, the other stands by, and takes it
 * over once the owner is killed and its claim lapses. The claim lasts 1.5 s here (30 s by default).
 */

const unavailable = postgresUnavailable();
const CLAIM_SECONDS = 1.5;
const INBOX = 'agents/admin/inbox';
let cluster: PostgresCluster | undefined;
let store: ThreadStore;
const hosts: Record<'a' | 'b', TestHome> = {} as never;
const envOf = (host: 'a' | 'b', url: string) => ({ ...hosts[host].env, THECLAW_DATABASE_URL: url, THECLAW_HOST: host });
let url: string;

const xgw = (host: 'a' | 'b', args: string[]) => runTool('xgw', args, envOf(host, url));
const status = async (host: 'a' | 'b') => JSON.parse((await xgw(host, ['status', '--json'])).stdout) as XgwStatus;
const webchat = (s: XgwStatus) => s.channels.find((channel) => channel.id === 'webchat:main')!;

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  url = await cluster.createDatabase('hosts');
  store = await openStoreAt(url);
  await store.init(INBOX);
  for (const host of ['a', 'b'] as const) {
    hosts[host] = createTestHome();
    mkdirSync(join(hosts[host].home, 'xgw'), { recursive: true });
    writeFileSync(
      join(hosts[host].home, 'xgw', 'config.yaml'),
      `channel_claim_seconds: ${CLAIM_SECONDS}\nchannels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n`,
    );
  }
}, 120_000);

afterAll(async () => {
  for (const host of ['a', 'b'] as const) {
    if (!hosts[host]) continue;
    await xgw(host, ['stop']);
    hosts[host].cleanup();
  }
  await store?.close();
  await cluster?.stop();
});

describe.skipIf(unavailable)(`gateways on several hosts (${NEEDS_POSTGRES})`, () => {
  it('serves a channel from its owner only, into the inbox in PostgreSQL, and hands it over when the owner is killed', async () => {
    expect((await xgw('a', ['start'])).code).toBe(0);
    expect((await xgw('b', ['start'])).code).toBe(0);
    const owner = await status('a');
    expect(webchat(owner)).toMatchObject({ state: 'running' });
    expect(webchat(await status('b'))).toEqual({ id: 'webchat:main', type: 'webchat', state: 'standby', detail: 'owned by a' });
    expect((await xgw('b', ['status'])).stdout).toContain('webchat:main: standby (owned by a)');

    const first = await connectWebchat(webchat(owner).url!);
    await first.send('before');
    first.close();
    const inbox = await store.open(INBOX);
    expect((await inbox.peek()).map((event) => event.source.startsWith('external:webchat:main:') && event.content)).toEqual([expect.stringContaining('before')]);

    process.kill(owner.pid!, 'SIGKILL');
    const killedAt = Date.now();
    const taken = await waitFor(
      async () => {
        const now = await status('b');
        return webchat(now).state === 'running' ? now : null;
      },
      "b's takeover of webchat:main",
      15_000,
      50,
    );
    const takeoverMs = Date.now() - killedAt;
    // The claim lapses within CLAIM_SECONDS of a's last beat; b tries every third of it.
    expect(takeoverMs).toBeLessThan(CLAIM_SECONDS * 1000 * 3);

    const second = await connectWebchat(webchat(taken).url!);
    await second.send('after');
    second.close();
    const contents = (await inbox.peek()).map((event) => event.content);
    expect(contents).toHaveLength(2);
    expect(contents.filter((content) => content.includes('after'))).toHaveLength(1);
    expect((await store.placements.get('channel:webchat:main'))?.host).toBe('b');
    await inbox.close();
  });
});
