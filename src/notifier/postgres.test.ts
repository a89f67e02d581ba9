import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { findVictims } from '../e2e/chaos.js';
import { daemonLogFile } from '../core/layout.js';
import { isAlive } from '../core/process.js';
import { createTestHome, fixture, runTool, waitFor, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { openStoreAt, type PostgresLeases, type StoredThread, type ThreadStore } from '../thread/index.js';
import { NotifierConfigSchema } from './config.js';
import { createLauncher, type CommandLauncher } from './launcher.js';
import { PostgresDispatcher } from './pg-dispatcher.js';
import { RunLimit } from './run-limit.js';
import type { NotifierStatus } from './types.js';

// Two notifiers (real daemons, homes and host names of their own: "host-a" and "host-b") share one
// PostgreSQL database, as notifiers on two machines would. Handlers are real processes
// (fixtures/pg-handler.mjs) answering each event with a result under an idempotency key.

const unavailable = postgresUnavailable();
let cluster: PostgresCluster | undefined;
let url: string;
let store: ThreadStore;
let admin: postgres.Sql;
const hosts: Record<'host-a' | 'host-b', TestHome> = {} as never;
let dir: string;
let names = 0;
/** The handler the kill test left hanging. */
let hung: number | null = null;

/** Short leases, so that a takeover is seconds away; every wait below is bounded. */
const CONFIG = 'sweep_interval_seconds: 1\nhandler_timeout_seconds: 30\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\nleases: { ttl_seconds: 3, heartbeat_seconds: 0.5 }\n';

const startNotifier = async (host: keyof typeof hosts) => {
  const result = await runTool('notifier', ['start'], hosts[host].env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
};
const status = async (host: keyof typeof hosts) => JSON.parse((await runTool('notifier', ['status', '--json'], hosts[host].env)).stdout) as NotifierStatus;

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  url = await cluster.createDatabase('hosts');
  store = await openStoreAt(url);
  admin = postgres(url, { onnotice: () => {} });
  for (const host of ['host-a', 'host-b'] as const) {
    const t = createTestHome();
    t.env.THECLAW_DATABASE_URL = url;
    t.env.THECLAW_HOST = host;
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), CONFIG);
    hosts[host] = t;
  }
  dir = join(hosts['host-a'].home, 'handled');
  mkdirSync(dir);
  await Promise.all([startNotifier('host-a'), startNotifier('host-b')]);
}, 120_000);

afterAll(async () => {
  if (hung !== null && isAlive({ pid: hung, start: null })) process.kill(-hung, 'SIGKILL'); // a reaper that failed: the test says so, the machine keeps nothing
  for (const t of Object.values(hosts)) {
    await runTool('notifier', ['stop'], t.env);
    t.cleanup();
  }
  await store?.close();
  await admin?.end({ timeout: 1 });
  await cluster?.stop();
});

/** A new thread whose consumer `worker` runs the handler on its messages. */
async function subscribed(name = `feeds/f${++names}`, options: { runOn?: string; handlerArgs?: string[] } = {}): Promise<StoredThread> {
  const thread = await store.init(name);
  const handler = joinCommand([process.execPath, fixture('pg-handler.mjs'), dir, ...(options.handlerArgs ?? [])]);
  await thread.subscribe({ consumer: 'worker', handler, filter: "type = 'message'", ...(options.runOn ? { runOn: options.runOn } : {}) });
  return thread;
}

const push = (thread: StoredThread, contents: string[]) => thread.append(contents.map((content) => ({ source: 'self', type: 'message', content })));
/** The results in a thread: "<event id> <host>". */
const results = async (thread: StoredThread) => (await thread.peek({ filter: "type = 'result'", limit: 1000 })).map((event) => event.content);
const allResults = (thread: StoredThread, count: number) => waitFor(async () => ((await results(thread)).length >= count ? results(thread) : null), `${count} results in ${thread.name}`, 20_000);
const logLines = () => (existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').trim().split('\n') : []);
const overlaps = () => logLines().filter((line) => line.startsWith('OVERLAP'));

describe.skipIf(unavailable !== null)(`notifier on a PostgreSQL store shared by two hosts${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('says which host it is and that its threads are in PostgreSQL, and lists both hosts in the store', async () => {
    expect(await status('host-a')).toMatchObject({ running: true, host: 'host-a', store: 'postgres' });
    const text = (await runTool('notifier', ['status'], hosts['host-b'].env)).stdout;
    expect(text).toContain('host host-b, threads in postgres');
    expect(text).not.toContain(url.slice(0, 10)); // nor its URL
    expect((await admin`SELECT name, home FROM theclaw.hosts ORDER BY name`).map((row) => ({ ...row }))).toEqual([
      { name: 'host-a', home: hosts['host-a'].home },
      { name: 'host-b', home: hosts['host-b'].home },
    ]);
  });

  it('handles every event of four threads exactly once across both hosts, never two handlers of a subscription at once', async () => {
    const threads = await Promise.all([1, 2, 3, 4].map(() => subscribed()));
    for (let round = 0; round < 2; round++) await Promise.all(threads.map((thread) => push(thread, [`m${round}a`, `m${round}b`])));
    for (const thread of threads) {
      const found = await allResults(thread, 4);
      expect(found.map((content) => Number(content.split(' ')[0])).sort((x, y) => x - y)).toEqual([1, 2, 3, 4]);
    }
    expect(overlaps()).toEqual([]);
  });

  it('runs a subscription placed on host-b only there', async () => {
    await admin`INSERT INTO theclaw.placements (key, host) VALUES ('agent:bee', 'host-b')`;
    const thread = await subscribed('agents/bee/inbox', { runOn: 'agent:bee' });
    for (let i = 0; i < 3; i++) await push(thread, [`to bee ${i}`]);
    const found = await allResults(thread, 3);
    expect(found.map((content) => content.split(' ')[1])).toEqual(['host-b', 'host-b', 'host-b']);
  });

  it('backs a failing handler off, records its failures in the store, and runs it again until it succeeds', async () => {
    const failFile = join(dir, 'fail');
    writeFileSync(failFile, '');
    const thread = await subscribed(undefined, { handlerArgs: ['--fail-file', failFile] });
    await push(thread, ['x']);
    const failing = await waitFor(async () => ((await thread.consumer('worker'))!.failures >= 2 ? thread.consumer('worker') : null), 'two failures');
    expect(failing).toMatchObject({ last_error: 'exited 1: failing on purpose', progress: 0 });
    rmSync(failFile);
    expect(await allResults(thread, 1)).toHaveLength(1);
    await waitFor(async () => (await thread.consumer('worker'))!.failures === 0, 'the success to clear the failures');
  });

  it('kills a running handler at once when its lease is found to be another host’s, and runs the subscription again once the lease is free', async () => {
    const hangFile = join(dir, 'hung-stolen');
    const thread = await subscribed(undefined, { handlerArgs: ['--hang-file', hangFile] });
    await push(thread, ['hang']);
    const [holder, handlerPid] = (await waitFor(() => (existsSync(hangFile) ? readFileSync(hangFile, 'utf8') : null), 'a handler to hang')).split(' ') as [keyof typeof hosts, string];
    hung = Number(handlerPid);
    const where = admin`consumer = 'worker' AND thread = (SELECT thread FROM theclaw.threads WHERE name = ${thread.name})`;
    await admin`UPDATE theclaw.consumers SET lease_host = 'elsewhere', lease_expires = now() + interval '1 hour' WHERE ${where}`;
    await waitFor(() => !isAlive({ pid: hung!, start: null }), 'the handler to be killed', 5_000);
    expect(readFileSync(daemonLogFile(hosts[holder].home, 'notifier'), 'utf8')).toContain('its lease is no longer this host’s; killed');
    await admin`UPDATE theclaw.consumers SET lease_host = NULL, lease_pid = NULL, lease_expires = NULL WHERE ${where}`;
    await thread.append([{ source: 'self', type: 'note', content: 'look again' }]); // a NOTIFY; the sweep would find it too
    expect(await allResults(thread, 1)).toEqual([expect.stringMatching(/^1 host-/)]);
  });

  it('never kills a handler that has ended when a renewal of its lease crosses the release', async () => {
    // In this process, as host-c: its leases' release is held once done, as a slow connection would hold it.
    await admin`INSERT INTO theclaw.placements (key, host) VALUES ('agent:cee', 'host-c')`;
    const thread = await store.init('agents/cee/inbox');
    await thread.subscribe({ consumer: 'worker', handler: 'true', runOn: 'agent:cee' }); // exits 0 without an ack: a failure, then the release
    const own = (await openStoreAt(url)) as ThreadStore & { leases: PostgresLeases; listen: NonNullable<ThreadStore['listen']> };
    let released = false;
    let renewedAfter = 0;
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const { release, renew } = own.leases;
    own.leases.release = async (...args) => {
      await release.apply(own.leases, args);
      released = true;
      await held;
    };
    own.leases.renew = async (...args) => {
      const kept = await renew.apply(own.leases, args);
      if (released) renewedAfter++;
      return kept;
    };
    const lines: string[] = [];
    const logger = { debug: () => {}, info: (line: string) => lines.push(line), warn: (line: string) => lines.push(line), error: (line: string) => lines.push(line) };
    const killed: number[] = [];
    const spawn = createLauncher({ outputDir: dir, limits: { timeoutMs: 30_000, outputLimitBytes: 1000 }, pool: null });
    const launch: CommandLauncher = (name) => (command, env) => {
      const launched = spawn(name)(command, env);
      return launched.ok ? { ok: true, run: { ...launched.run, kill: () => killed.push(launched.run.pid) } } : launched;
    };
    const config = NotifierConfigSchema.parse({ leases: { ttl_seconds: 3, heartbeat_seconds: 0.05 } });
    const dispatcher = new PostgresDispatcher({ home: hosts['host-a'].home, host: 'host-c', store: own, config, logger, launch, limit: new RunLimit(1) });
    try {
      await dispatcher.start();
      await push(thread, ['x']);
      await waitFor(() => renewedAfter >= 2, 'two renewals after the release', 10_000);
      expect(killed).toEqual([]);
      expect(lines.filter((line) => line.includes('killed'))).toEqual([]);
    } finally {
      letGo();
      await dispatcher.stop();
      await own.close();
    }
  });

  it('takes over the subscription of a host whose notifier was killed mid-handler once its lease expired, losing and doubling nothing', async () => {
    const hangFile = join(dir, 'hung');
    const thread = await subscribed(undefined, { handlerArgs: ['--hang-file', hangFile] });
    await push(thread, ['first', 'hang', 'third']);
    const [victim, handlerPid] = (await waitFor(() => (existsSync(hangFile) ? readFileSync(hangFile, 'utf8') : null), 'a handler to hang')).split(' ') as [keyof typeof hosts, string];
    hung = Number(handlerPid);
    const { pid } = await status(victim);
    process.kill(-pid!, 'SIGKILL'); // the notifier's whole process group
    await waitFor(() => !isAlive({ pid: Number(handlerPid), start: null }), 'the hung handler to be killed with its notifier', 5_000);
    const found = await allResults(thread, 3);
    const survivor = victim === 'host-a' ? 'host-b' : 'host-a';
    expect(found.map((content) => Number(content.split(' ')[0]))).toEqual([1, 2, 3]);
    expect(found.slice(1).every((content) => content.endsWith(survivor))).toBe(true);
    expect(
      logLines()
        .filter((line) => line.includes(` ${thread.name} `))
        .filter((line) => line.endsWith(' 2')),
    ).toEqual([`${survivor} ${thread.name} 2`]);
    expect(overlaps()).toEqual([]);
    // The killed host's notifier is down: its status reads the subscriptions from the store.
    const down = await status(victim);
    expect(down.running).toBe(false);
    expect(down.subscriptions).toContainEqual(expect.objectContaining({ thread: thread.name, consumer: 'worker', pending: 0, progress: 3 }));
  });

  it('fails to start on a store it cannot use at once, saying why, and leaves no process behind', async () => {
    const newer = await cluster!.createDatabase('newer');
    const pg = postgres(newer, { max: 1, onnotice: () => {} });
    await pg`CREATE SCHEMA theclaw`;
    await pg`CREATE TABLE theclaw.meta (key text PRIMARY KEY, value text NOT NULL)`;
    await pg`INSERT INTO theclaw.meta VALUES ('schema_version', '99')`;
    await pg.end();
    const t = createTestHome();
    try {
      // Its warm runner had started before the store failed, and kept the failed daemon alive: the start waited 30 s for an answer.
      const result = await runTool('notifier', ['start'], { ...t.env, THECLAW_DATABASE_URL: newer });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/^Error: notifier did not start: .*schema version 99, this thread tool knows \d+ - upgrade theclaw/);
      expect(findVictims(t.home)).toEqual([]);
    } finally {
      t.cleanup();
    }
  });
});
