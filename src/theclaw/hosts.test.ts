import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../testing/free-port.js';
import { createTestHome, runTool, runToolAlone, writeXgwConfig, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import type { UpResult } from './system.js';

/**
 * `theclaw up` on two hosts sharing a PostgreSQL store ("a" and "b": two homes on this machine,
 * one web chat configured on both): the first host gets the system agents, the second leaves them
 * there and says so, and each `up` leaves once the system is up (its pool must not keep it).
 */

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
const hosts: Record<'a' | 'b', TestHome> = {} as never;
let url: string;
const envOf = (host: 'a' | 'b') => ({ ...hosts[host].env, THECLAW_DATABASE_URL: url, THECLAW_HOST: `host-${host}` });

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  url = await cluster.createDatabase('up');
  const port = await freePort();
  for (const host of ['a', 'b'] as const) hosts[host] = hostHome(port);
}, 120_000);

/** A host's home, whose gateway has one web chat on `port` (the same on every host: one serves it, the others stand by). */
function hostHome(port: number): TestHome {
  const t = createTestHome();
  writeXgwConfig(
    t.home,
    `channels:\n  - { id: webchat:main, type: webchat, port: ${port}, access: open }\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n`,
  );
  return t;
}

afterAll(async () => {
  for (const host of ['b', 'a'] as const) {
    if (!hosts[host]) continue;
    await runTool('theclaw', ['down'], envOf(host));
    hosts[host].cleanup();
  }
  await cluster?.stop();
});

describe.skipIf(unavailable !== null)(`theclaw up on hosts sharing a PostgreSQL store${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('starts the system agents on the first host, leaves them to it on the second, and each up leaves once done', async () => {
    const upA = await runToolAlone('theclaw', ['up', '--json'], envOf('a'));
    expect(upA.code, upA.stderr).toBe(0);
    expect((JSON.parse(upA.stdout) as UpResult).agents).toEqual(['admin', 'warden', 'maintainer', 'evolver']);

    const upB = await runToolAlone('theclaw', ['up', '--json'], envOf('b'));
    expect(upB.code, upB.stderr).toBe(0);
    const b = JSON.parse(upB.stdout) as UpResult;
    expect(b).toMatchObject({ agents: [], elsewhere: { admin: 'host-a', warden: 'host-a', maintainer: 'host-a', evolver: 'host-a' } });
    expect(b.xgw.channels.find((channel) => channel.id === 'webchat:main')).toMatchObject({ state: 'standby' });
    expect(upB.stderr).not.toMatch(/agent admin does not exist/);

    // Said the same way to a person: no terminal chat with an agent whose replies go out on host-a.
    const again = await runToolAlone('theclaw', ['up'], envOf('b'));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('  agents    none on this host; on host-a: admin, warden, maintainer, evolver\n');
    expect(again.stdout).not.toContain('agent chat admin');
    expect(again.stdout).toContain('No agent of yours runs on this host');

    // A person who tries it anyway is told where the agent is.
    const chat = await runTool('agent', ['send', 'admin', '--text', 'hello'], envOf('b'));
    expect(chat).toMatchObject({ code: 1 });
    expect(chat.stderr).toBe('Error: agent admin runs on host host-a, not on this one (host-b) - talk to it on host-a (agent chat admin there), or through a channel whose route goes to it\n');
  });

  it("puts every system agent on one host when two hosts' first ups run at once on a new database, and neither fails", async () => {
    const together = await cluster!.createDatabase('together');
    const port = await freePort();
    const homes = [hostHome(port), hostHome(port)];
    const envs = homes.map((t, i) => ({ ...t.env, THECLAW_DATABASE_URL: together, THECLAW_HOST: `host-${i}` }));
    try {
      const ups = await Promise.all(envs.map((env) => runToolAlone('theclaw', ['up', '--json'], env)));
      expect(
        ups.map((up) => up.code),
        ups.map((up) => up.stdout).join(''),
      ).toEqual([0, 0]);
      const results = ups.map((up) => JSON.parse(up.stdout) as UpResult);
      const first = results.findIndex((result) => result.agents.length > 0);
      expect(first).not.toBe(-1);
      const [winner, loser] = [results[first]!, results[1 - first]!];
      expect(winner).toMatchObject({ agents: ['admin', 'warden', 'maintainer', 'evolver'], elsewhere: {} });
      const there = `host-${first}`;
      expect(loser).toMatchObject({ agents: [], created: [], elsewhere: { admin: there, warden: there, maintainer: there, evolver: there } });
    } finally {
      for (const [i, t] of homes.entries()) {
        await runTool('theclaw', ['down'], envs[i]!);
        t.cleanup();
      }
    }
  });
});
