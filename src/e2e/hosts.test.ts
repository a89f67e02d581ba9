import Database from 'better-sqlite3';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initAgent, startAgent } from '../agent/lifecycle.js';
import { closeThreadStores } from '../agent/threads.js';
import { askDaemon } from '../core/daemon.js';
import { createTestHome, runTool, startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import type { NotifierStatus } from '../notifier/types.js';
import type { InboundOutcome } from '../xgw/protocol.js';
import { findVictims } from './chaos.js';
import { lastUserText } from './support.js';

/**
 * Agents on two hosts (issue 26 §3): two homes on this machine, THECLAW_HOST host-a and host-b,
 * one PostgreSQL database; each runs its own notifier and xgw (a terminal chat, each host's own),
 * with two agents placed on it. Every message is answered once, in the chat it came from. Then
 * host-a's notifier is SIGKILLed (its whole process group) in the middle of a turn whose model
 * call hangs: host-b's agents are answered meanwhile, host-a's wait; started again, host-a's
 * notifier takes the killed turn's subscription back at once (the lease's holder is dead, so it
 * is free: no wait for its expiry, which the long ttl here would make plain), and nothing is lost
 * or answered twice.
 */

const unavailable = postgresUnavailable();
type Host = 'host-a' | 'host-b';
const AGENTS: Record<Host, string[]> = { 'host-a': ['a1', 'a2'], 'host-b': ['b1', 'b2'] };
const hostOf = (agent: string): Host => (agent.startsWith('a') ? 'host-a' : 'host-b');
/**
 * Four times notifier's default: a wait for the killed notifier's lease to expire would show (the
 * answer's wait gives up at 30 s), and a machine loaded enough to take 30 s from the kill to the
 * answer does not pass for one.
 */
const LEASE_TTL_SECONDS = 120;
const NOTIFIER_CONFIG = `sweep_interval_seconds: 0.5\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\nleases: { ttl_seconds: ${LEASE_TTL_SECONDS}, heartbeat_seconds: 0.5 }\n`;

let cluster: PostgresCluster | undefined;
let llm: FakeLlmServer;
let admin: postgres.Sql;
const hosts = {} as Record<Host, TestHome>;
/** The texts whose first model call hangs (a slow turn, to be killed in). */
const hangOnce = new Set<string>();
const asked = new Set<string>();

interface Sent {
  agent: string;
  id: string;
  text: string;
}
const sent: Sent[] = [];
let count = 0;

async function send(agent: string, text?: string): Promise<Sent> {
  const id = `msg-${++count}`;
  const message = { agent, id, text: text ?? `${id} for ${agent}` };
  const outcome = await askDaemon<InboundOutcome>(hosts[hostOf(agent)].home, 'xgw', {
    op: 'chat_message',
    channel: 'terminal:local',
    peer: `p-${agent}`,
    agent,
    message_id: message.id,
    text: message.text,
  });
  expect(outcome).toMatchObject({ kind: 'accepted', agent, duplicate: false });
  sent.push(message);
  return message;
}

interface Reply {
  host: Host;
  peer: string;
  agent: string | null;
  reply_to: string | null;
  text: string;
}

/** Every reply in both hosts' terminal mailboxes. */
function replies(): Reply[] {
  return (Object.keys(hosts) as Host[]).flatMap((host) => {
    const db = new Database(join(hosts[host].home, 'xgw', 'state.db'), { readonly: true });
    try {
      const rows = db.prepare("SELECT peer_id AS peer, agent, reply_to, text FROM mailbox WHERE channel_id = 'terminal:local' AND role = 'agent' ORDER BY id").all() as Omit<Reply, 'host'>[];
      return rows.map((row) => ({ host, ...row }));
    } finally {
      db.close();
    }
  });
}
const repliesTo = (message: Sent) => replies().filter((reply) => reply.reply_to === message.id);
const answered = (...messages: Sent[]) => waitFor(() => messages.every((message) => repliesTo(message).length > 0), `replies to ${messages.map((m) => m.text).join(', ')}`, 30_000, 50);

const notifier = async (host: Host, args: string[]) => runTool('notifier', args, hosts[host].env);
const notifierPid = async (host: Host) => (JSON.parse((await notifier(host, ['status', '--json'])).stdout) as NotifierStatus).pid!;

/** The inbox lease of an agent, as the store has it. */
async function inboxLease(agent: string): Promise<{ lease_host: string | null; lease_pid: number | null; lease_expires: Date | null }> {
  const [row] = await admin<{ lease_host: string | null; lease_pid: number | null; lease_expires: Date | null }[]>`
    SELECT c.lease_host, c.lease_pid, c.lease_expires FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
    WHERE t.name = ${`agents/${agent}/inbox`} AND c.consumer = 'inbox'`;
  return row!;
}

/** Subscriptions with events left for their handler, or a lease held. */
async function workLeft(): Promise<string[]> {
  const rows = await admin<{ name: string; consumer: string }[]>`
    SELECT t.name, c.consumer FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread
    WHERE c.subscribed AND (c.lease_host IS NOT NULL OR EXISTS (
      SELECT 1 FROM theclaw.events e WHERE e.thread = c.thread AND e.id > c.progress AND e.type = 'message'
        AND (c.consumer <> 'outbound' OR e.source = 'self')))`;
  return rows.map((row) => `${row.name} ${row.consumer}`);
}

beforeAll(async () => {
  if (unavailable) return;
  cluster = await startPostgres();
  const url = await cluster.createDatabase('hosts');
  admin = postgres(url, { max: 1, onnotice: () => {} });
  llm = await startFakeOpenAI({
    defaultStep: (request) => {
      const text = lastUserText(request);
      const first = !asked.has(text);
      asked.add(text);
      return first && hangOnce.has(text) ? { kind: 'hang' } : { kind: 'text', text: `reply to: ${text}` };
    },
  });
  for (const host of Object.keys(AGENTS) as Host[]) {
    const t = createTestHome();
    Object.assign(t.env, { THECLAW_DATABASE_URL: url, THECLAW_HOST: host });
    writeFakePaiConfig(t.home, llm, { timeoutSeconds: 120 }); // the hanging call is cut off by the kill, not by pai
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), NOTIFIER_CONFIG);
    mkdirSync(join(t.home, 'xgw'), { recursive: true });
    writeFileSync(join(t.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: terminal:local, type: terminal, access: open }\nroutes: []\n');
    hosts[host] = t;
  }
  await Promise.all(
    (Object.keys(AGENTS) as Host[]).map(async (host) => {
      const { home, env } = hosts[host];
      for (const tool of ['notifier', 'xgw'] as const) {
        const result = await runTool(tool, ['start'], env);
        if (result.code !== 0) throw new Error(`${tool} start on ${host}: ${result.stderr}`);
      }
      for (const agent of AGENTS[host]) {
        await initAgent(home, agent, {}, env);
        await startAgent(home, agent, env);
      }
    }),
  );
}, 120_000);

afterAll(async () => {
  for (const t of Object.values(hosts)) {
    await Promise.allSettled([runTool('xgw', ['stop'], t.env), runTool('notifier', ['stop'], t.env)]);
    t.cleanup();
  }
  await closeThreadStores();
  await admin?.end({ timeout: 1 });
  await llm?.close();
  await cluster?.stop();
});

describe.skipIf(unavailable !== null)(`agents on two hosts sharing a PostgreSQL store${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it('answers every message to agents on both hosts once, in the chat of its own host', async () => {
    const all = AGENTS['host-a'].concat(AGENTS['host-b']);
    const messages = await Promise.all(all.flatMap((agent) => [send(agent), send(agent)]));
    await answered(...messages);
    for (const message of messages) {
      expect(repliesTo(message)).toEqual([{ host: hostOf(message.agent), peer: `p-${message.agent}`, agent: message.agent, reply_to: message.id, text: `reply to: ${message.text}` }]);
    }
    // Each agent's turns ran on its own host: the store says where each inbox was placed.
    const placed = await admin<{ key: string; host: string }[]>`SELECT key, host FROM theclaw.placements WHERE key LIKE 'agent:%' ORDER BY key`;
    expect(placed.map((row) => ({ ...row }))).toEqual(all.map((agent) => ({ key: `agent:${agent}`, host: hostOf(agent) })));
  });

  it("answers host-b's agents while host-a's notifier is killed mid-turn, and host-a's restarted notifier takes the killed turn back without waiting for its lease to expire, losing and doubling nothing", async () => {
    const slow = `slow for a1`;
    hangOnce.add(slow);
    const killed = await send('a1', slow);
    await waitFor(() => llm.requests.some((request) => lastUserText(request) === slow), 'the slow turn to call the model', 30_000, 50);
    const lease = await inboxLease('a1');
    const pid = await notifierPid('host-a');
    expect(lease).toMatchObject({ lease_host: 'host-a', lease_pid: pid });

    process.kill(-pid, 'SIGKILL'); // the notifier's whole process group
    // Its reaper kills the handlers (the warm runner with the turn) at once: none is left running.
    await waitFor(() => findVictims(hosts['host-a'].home).every((victim) => victim.kind !== 'agent run' && victim.kind !== 'runner'), "host-a's handlers to be killed", 10_000, 50);

    const meanwhile = await Promise.all([send('b1'), send('b2'), send('a2')]);
    await answered(meanwhile[0]!, meanwhile[1]!);
    expect(repliesTo(meanwhile[2]!), 'host-a answers nothing while its notifier is down').toEqual([]);
    expect(repliesTo(killed)).toEqual([]);

    const restarted = await notifier('host-a', ['start']);
    expect(restarted.code, restarted.stderr).toBe(0);
    await answered(killed, meanwhile[2]!);
    expect(Date.now(), "the killed turn answered before its dead notifier's lease would have expired").toBeLessThan(lease.lease_expires!.getTime());
    expect(llm.requests.filter((request) => lastUserText(request) === slow).length, 'the killed turn called the model again').toBeGreaterThanOrEqual(2);

    // Nothing left to do anywhere, so no late copy can come; then every message has exactly one reply, in its chat.
    await waitFor(async () => (await workLeft()).length === 0, 'every subscription to be done', 30_000, 100);
    for (const message of sent) {
      expect(repliesTo(message), message.text).toEqual([{ host: hostOf(message.agent), peer: `p-${message.agent}`, agent: message.agent, reply_to: message.id, text: `reply to: ${message.text}` }]);
    }
    expect(replies()).toHaveLength(sent.length);
  });
});
