import Database from 'better-sqlite3';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initAgent, startAgent } from '../agent/lifecycle.js';
import { closeThreadStores } from '../agent/threads.js';
import { askDaemon } from '../core/daemon.js';
import { daemonLogFile } from '../core/layout.js';
import { createTestHome, runTool, startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import type { NotifierStatus } from '../notifier/types.js';
import type { InboundOutcome, XgwStatus } from '../xgw/protocol.js';
import { lastUserText } from './support.js';

/**
 * The PostgreSQL store restarted under a running system (an upgrade, or the database's host
 * rebooting), as docs/guide/09-several-hosts.md promises it: one host's notifier and xgw, an agent,
 * messages through xgw's terminal channel. While the server is down the daemons stay up and answer
 * `status`, a message sent is refused with an error its sender sees (nothing is accepted that
 * cannot be stored), a turn under way when it went down is cut off, and the web chat (a channel
 * hosts share, held by a claim) is stopped; once it is back, with no daemon restarted, the web chat
 * runs again, the cut-off turn runs again from its stored progress, a new message is answered, and
 * every accepted message has exactly one reply. Then the server stops answering without closing a
 * connection (SIGSTOP: its host cut off or hung): the web chat stops before its claim lapses,
 * `notifier status` says the store did not answer, and a message sent meanwhile gets no answer in
 * time but is stored, and answered once, when the server answers again. Leases, claims and
 * backoffs are short here.
 */

const unavailable = postgresUnavailable();
const AGENT = 'a1';
/**
 * The web chat stops 4 s into an outage: long enough for postgres.js's own delay before it connects
 * again to have grown past 10 s (what the first fix was for), short enough for a cheap test.
 */
const CLAIM_SECONDS = 6;
const NOTIFIER_CONFIG = 'sweep_interval_seconds: 0.5\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\nleases: { ttl_seconds: 2, heartbeat_seconds: 0.4 }\n';
const XGW_CONFIG = `channel_claim_seconds: ${CLAIM_SECONDS}\nchannels:\n  - { id: terminal:local, type: terminal, access: open }\n  - { id: webchat:main, type: webchat, port: 0, access: open }\nroutes: []\n`;

let cluster: PostgresCluster | undefined;
let llm: FakeLlmServer;
let t: TestHome;
/** The model's first answer to these texts waits until the test lets it go. */
const held = new Map<string, { release: () => void; released: Promise<void> }>();
const asked = new Set<string>();

/** Holds the model's first answer to `text`; returns what lets it go. */
function hold(text: string): () => void {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  held.set(text, { release, released });
  return release;
}

interface Sent {
  id: string;
  text: string;
}
const accepted: Sent[] = [];
let count = 0;

/** Sends a message through xgw's terminal channel; one it accepts must be answered. */
async function chat(text: string, timeoutMs?: number): Promise<{ message: Sent; outcome: InboundOutcome }> {
  const message = { id: `msg-${++count}`, text };
  const outcome = await askDaemon<InboundOutcome>(t.home, 'xgw', { op: 'chat_message', channel: 'terminal:local', peer: 'p', agent: AGENT, message_id: message.id, text }, timeoutMs);
  if (outcome.kind === 'accepted') accepted.push(message);
  return { message, outcome };
}

async function send(text: string): Promise<Sent> {
  const { message, outcome } = await chat(text);
  expect(outcome).toMatchObject({ kind: 'accepted', agent: AGENT, duplicate: false });
  return message;
}

/** The replies in xgw's terminal mailbox (SQLite, on this host) to a message. */
function repliesTo(message: Sent): string[] {
  const db = new Database(join(t.home, 'xgw', 'state.db'), { readonly: true });
  try {
    const rows = db.prepare("SELECT text FROM mailbox WHERE channel_id = 'terminal:local' AND role = 'agent' AND reply_to = ?").all(message.id) as { text: string }[];
    return rows.map((row) => row.text);
  } finally {
    db.close();
  }
}
const answered = (message: Sent) => waitFor(() => repliesTo(message).length > 0, `a reply to ${message.text}`, 30_000, 50);

const notifierStatus = async () => runTool('notifier', ['status', '--json'], t.env);
const xgwStatus = async () => JSON.parse((await runTool('xgw', ['status', '--json'], t.env)).stdout) as XgwStatus;
const webchatState = async () => (await xgwStatus()).channels.find((channel) => channel.id === 'webchat:main')?.state;
let pids: { notifier: number; xgw: number };

/** Waits until no subscription has work left or a lease held (so no late copy of a reply can come); notifier's status then. */
const allDone = () =>
  waitFor(
    async () => {
      const status = JSON.parse((await notifierStatus()).stdout) as NotifierStatus;
      return status.subscriptions.every((s) => s.pending === 0 && s.lease === null) ? status : null;
    },
    'every subscription to be done',
    30_000,
    100,
  );

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('restart');
  llm = await startFakeOpenAI({
    defaultStep: async (request) => {
      const text = lastUserText(request);
      const first = !asked.has(text);
      asked.add(text);
      if (first) await held.get(text)?.released;
      return { kind: 'text', text: `reply to: ${text}` };
    },
  });
  t = createTestHome();
  Object.assign(t.env, { THECLAW_DATABASE_URL: url, THECLAW_HOST: 'host-a' });
  writeFakePaiConfig(t.home, llm, { timeoutSeconds: 60 });
  mkdirSync(join(t.home, 'notifier'), { recursive: true });
  writeFileSync(join(t.home, 'notifier', 'config.yaml'), NOTIFIER_CONFIG);
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(join(t.home, 'xgw', 'config.yaml'), XGW_CONFIG);
  for (const tool of ['notifier', 'xgw'] as const) {
    const result = await runTool(tool, ['start'], t.env);
    if (result.code !== 0) throw new Error(`${tool} start: ${result.stderr}`);
  }
  await initAgent(t.home, AGENT, {}, t.env);
  await startAgent(t.home, AGENT, t.env);
  const notifier = JSON.parse((await notifierStatus()).stdout) as NotifierStatus;
  pids = { notifier: notifier.pid!, xgw: (await xgwStatus()).pid! };
}, 120_000);

afterAll(async () => {
  for (const entry of held.values()) entry.release();
  if (t) {
    await Promise.allSettled([runTool('xgw', ['stop'], t.env), runTool('notifier', ['stop'], t.env)]);
    t.cleanup();
  }
  await closeThreadStores();
  await llm?.close();
  await cluster?.stop();
});

describe.skipIf(unavailable !== null)(`the system when its PostgreSQL store goes away and comes back${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  let cut: Sent;

  it('answers a message through xgw before the outage', async () => {
    await answered(await send('before the outage'));
    expect(await webchatState()).toBe('running');
  });

  it('keeps every daemon up and answering while the database is down, refuses what it cannot store with an error its sender sees, and stops the shared channel', async () => {
    // A turn under way when the database goes: its model call waits until the server is down.
    const release = hold('during the restart');
    cut = await send('during the restart');
    await waitFor(() => llm.requests.some((request) => lastUserText(request) === cut.text), 'the cut-off turn to call the model', 30_000, 50);
    await cluster!.halt();
    release();
    // Its claim can no longer be renewed: the web chat stops before another host could take it
    // (a few seconds: the outage lasts as long as an upgrade's restart might).
    await waitFor(async () => (await webchatState()) === 'standby', 'the web chat to stop', 15_000, 100);

    const refused = await chat('while the database is down').then(
      ({ outcome }) => outcome,
      (error: Error) => error,
    );
    expect(refused, 'a message that cannot be stored is not accepted').toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(/cannot use postgres:\/\/postgres@127\.0\.0\.1:\d+\/restart/);

    const notifier = await runTool('notifier', ['status'], t.env);
    expect(notifier.stderr, 'notifier status says the store cannot be reached').toMatch(/^Error: cannot use postgres:\/\/postgres@127\.0\.0\.1:\d+\/restart: .* - check that the server runs/);
    expect(notifier.code).toBe(1);
    expect((await xgwStatus()).pid).toBe(pids.xgw);
    expect(repliesTo(cut)).toEqual([]);
    // Each says in its log what is wrong.
    expect(readFileSync(daemonLogFile(t.home, 'notifier'), 'utf8')).toMatch(/\[ERROR\] dispatch failed: cannot use postgres:\/\/postgres@127\.0\.0\.1:\d+\/restart: connect ECONNREFUSED/);
    expect(readFileSync(daemonLogFile(t.home, 'xgw'), 'utf8')).toMatch(/\[WARN\] webchat:main: stopped, its claim could not be renewed for \d+s; it starts again once the store answers/);
  });

  it('goes on once the database is back, with no daemon restarted: the web chat runs again, the cut-off turn and a new message are answered, every accepted message once', async () => {
    await cluster!.restart();
    const back = Date.now();
    // postgres.js's own delay before it connects again had grown to 10–20 s by then.
    await waitFor(async () => (await notifierStatus()).code === 0, 'notifier to reach the database again', 30_000, 100);
    expect(Date.now() - back, 'notifier reached the database within 5 s of its return').toBeLessThan(5_000);
    const after = await waitFor(
      async () => {
        const sent = await chat('after the outage').catch(() => null);
        return sent?.outcome.kind === 'accepted' ? sent.message : null;
      },
      'xgw to accept a message again',
      30_000,
      200,
    );
    await answered(after);
    await answered(cut);
    await waitFor(async () => (await webchatState()) === 'running', 'the web chat to run again', 15_000, 100);

    const notifier = await allDone();
    expect({ notifier: notifier.pid, xgw: (await xgwStatus()).pid }).toEqual(pids);
    for (const message of accepted) expect(repliesTo(message), message.text).toEqual([`reply to: ${message.text}`]);
  });

  it('stops the shared channel before its claim lapses when the database stops answering (its host cut off), and serves it again once it answers; notifier status says so, and a message sent meanwhile gets no answer in time, and is answered once', async () => {
    await cluster!.freeze();
    let late: Sent;
    try {
      // Its push waits for the database: the sender sees no answer, and the message is stored once it answers.
      const text = 'while the database does not answer';
      const unanswered = await chat(text, 1_000).then(
        () => null,
        (error: Error) => error,
      );
      expect(unanswered?.message).toMatch(/no answer on .*xgw\.sock within 1000 ms/);
      late = { id: `msg-${count}`, text };
      // Its renewals hang rather than fail; another gateway could take the channel once its claim lapsed.
      const [notifier] = await Promise.all([runTool('notifier', ['status'], t.env), waitFor(async () => (await webchatState()) === 'standby', 'the web chat to stop', 15_000, 100)]);
      expect(notifier.stderr, 'notifier status says it runs and the store does not answer').toMatch(
        /^Error: notifier runs \(pid \d+\), but its thread store postgres:\/\/postgres@127\.0\.0\.1:\d+\/restart did not answer within 3 s - check that the database server runs/,
      );
      expect(notifier.code).toBe(1);
    } finally {
      await cluster!.thaw();
    }
    await waitFor(async () => (await webchatState()) === 'running', 'the web chat to run again', 15_000, 100);
    await answered(late);
    const notifier = await allDone();
    expect(repliesTo(late)).toEqual([`reply to: ${late.text}`]);
    expect({ notifier: notifier.pid, xgw: (await xgwStatus()).pid }).toEqual(pids);
  });
});
