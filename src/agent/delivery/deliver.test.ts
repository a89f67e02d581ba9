import Database from 'better-sqlite3';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { socketPath } from '../../core/home.js';
import { parseMessageContent } from '../../core/message.js';
import { threadEvents, createTestHome, runTool, startFakeOpenAI, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../../testing/index.js';
import { openThread, type ThreadEvent } from '../../thread/index.js';
import { GatewayState } from '../../xgw/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent, OUTBOUND_FILTER, deliverHandler } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';
import type { ErrorRecord } from '../types.js';

// `agent deliver` (the real CLI) against a real xgw daemon with a terminal channel; replies are
// read back from the terminal peer's mailbox in xgw's state.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
const user = userInfo().username;
const terminal = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: user, peerId: user });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server);
  writeXgwConfig('terminal:local');
});

/** An xgw with one terminal channel, routing everything to the agent. */
function writeXgwConfig(channel: string): void {
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(t.home, 'xgw', 'config.yaml'),
    `channels:
  - { id: ${channel}, type: terminal, access: open }
routes:
  - { channel: "*", peer: "*", agent: helper }
`,
  );
}

afterEach(async () => {
  await runTool('xgw', ['stop'], t.env);
  await server.close();
  t.cleanup();
});

const xgw = async (command: 'start' | 'stop') => {
  const result = await runTool('xgw', [command], t.env);
  expect(result.code, result.stderr).toBe(0);
};
const deliver = (path: string, consumer = 'outbound') => runTool('agent', ['deliver', '--thread', path, '--consumer', consumer, '--json'], t.env);

/** Sends a message and runs the agent; returns the conversation thread and the reply's event id. */
async function reply(text: string, source = terminal): Promise<{ path: string; id: number; createdAt: string }> {
  await sendToAgent(t.home, 'helper', { text, source });
  await runAgent('helper', { home: t.home, env: t.env });
  const path = routeMessage(dir, 'per-peer', source).path;
  const replies = events(path, "type = 'message' AND source = 'self'");
  return { path, id: replies.at(-1)!.id, createdAt: replies.at(-1)!.created_at };
}

const events = (path: string, filter?: string): ThreadEvent[] => threadEvents(t.home, path, filter);

function outbound(path: string) {
  const thread = openThread(path, { home: t.home });
  try {
    return thread.consumer('outbound')!;
  } finally {
    thread.close();
  }
}

/** The idempotency keys xgw remembers (read from its state.db, whatever its table is called). */
function deliveredKeys(): string[] {
  const db = new Database(join(t.home, 'xgw', 'state.db'), { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('deliveries', 'delivered')").pluck().all() as string[];
    return tables.flatMap((table) => db.prepare(`SELECT key FROM ${table}`).pluck().all() as string[]);
  } finally {
    db.close();
  }
}

function gateway<T>(fn: (state: GatewayState) => T): T {
  const state = new GatewayState(t.home);
  try {
    return fn(state);
  } finally {
    state.close();
  }
}

const mailbox = (channel = 'terminal:local') => gateway((state) => state.mailbox(channel, user).map((entry) => [entry.role, entry.text]));

function attempts(): { thread: string; event_id: number; attempts: number; last_error: string }[] {
  if (!existsSync(dir.state)) return [];
  const db = new Database(dir.state, { readonly: true });
  try {
    return db.prepare('SELECT * FROM delivery_attempts').all() as never;
  } finally {
    db.close();
  }
}

function setAgentConfig(patch: Record<string, unknown>): void {
  writeFileSync(dir.config, stringify({ ...(parse(readFileSync(dir.config, 'utf8')) as object), ...patch }));
}

describe('agent deliver to xgw', () => {
  it('delivers a reply to the terminal mailbox once, with the idempotency key <thread in the home>#<event id>@<created_at>', async () => {
    await xgw('start');
    const { path, id, createdAt } = await reply('hello');
    const first = await deliver(path);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(mailbox()).toEqual([['agent', 'echo: hello']]);
    expect(deliveredKeys()).toEqual([`${relative(t.home, path)}#${id}@${createdAt}`]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });

    // Again: nothing left to pop.
    expect(JSON.parse((await deliver(path)).stdout)).toEqual({ delivered: 0, skipped: 0, failed: false });
    // The same reply through a second consumer (a replay, as after a crash before the ack):
    // xgw knows the key and does not send it again.
    const thread = openThread(path, { home: t.home });
    thread.subscribe({ consumer: 'replay', handler: deliverHandler(), filter: OUTBOUND_FILTER });
    thread.unsubscribe('replay');
    thread.close();
    const replay = await deliver(path, 'replay');
    expect(replay.code, replay.stderr).toBe(0);
    expect(JSON.parse(replay.stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(mailbox()).toEqual([['agent', 'echo: hello']]);
    expect(deliveredKeys()).toEqual([`${relative(t.home, path)}#${id}@${createdAt}`]);
    expect(attempts()).toEqual([]);
    expect(readFileSync(join(dir.threads, '..', 'logs', 'agent.log'), 'utf8')).not.toContain('[ERROR]');
  });

  it('takes the thread from THECLAW_THREAD, as notifier runs the handler it stores, which names no path', async () => {
    await xgw('start');
    const { path, id } = await reply('hello');
    const handler = outbound(path).handler!;
    expect(handler).not.toContain(t.home);
    const result = await runTool('agent', ['deliver', '--consumer', 'outbound', '--json'], { ...t.env, THECLAW_THREAD: path });
    expect(result.code, result.stderr).toBe(0);
    expect(mailbox()).toEqual([['agent', 'echo: hello']]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });
    const without = await runTool('agent', ['deliver', '--consumer', 'outbound'], t.env);
    expect(without.code).toBe(2);
    expect(without.stderr).toMatch(/^Error: no thread to deliver from - /);
  });

  it("finds the thread an older handler names by its absolute path in the home's place before a move or a copy", async () => {
    await xgw('start');
    const { path, id, createdAt } = await reply('hello');
    const before = join('/nowhere', 'old-home', relative(t.home, path)); // where the home was
    const result = await runTool('agent', ['deliver', '--thread', before, '--consumer', 'outbound', '--json'], t.env);
    expect(result.code, result.stderr).toBe(0);
    expect(mailbox()).toEqual([['agent', 'echo: hello']]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });
    expect(deliveredKeys()).toEqual([`${relative(t.home, path)}#${id}@${createdAt}`]);
  });

  it('forgets, once the reply is delivered, the attempts an older version counted under the absolute path of the home before a move', async () => {
    await xgw('start');
    const { path, id } = await reply('hello');
    const db = new Database(dir.state);
    db.exec('CREATE TABLE delivery_attempts (thread TEXT NOT NULL, event_id INTEGER NOT NULL, attempts INTEGER NOT NULL, last_error TEXT, PRIMARY KEY (thread, event_id))');
    const old = join('/nowhere', 'old-home', relative(t.home, path));
    db.prepare('INSERT INTO delivery_attempts VALUES (?, ?, 1, ?)').run(old, id, 'refused');
    db.prepare('INSERT INTO delivery_attempts VALUES (?, ?, 1, ?)').run(`${old}-other`, id, 'refused'); // another thread's
    db.close();
    expect((await deliver(path)).code).toBe(0);
    expect(attempts().map((row) => row.thread)).toEqual([`${old}-other`]);
  });

  it('keeps a reply while xgw is down, without counting that as an attempt, and delivers it after xgw starts', async () => {
    const { path, id } = await reply('are you there?');
    const down = await runTool('agent', ['deliver', '--thread', path, '--consumer', 'outbound'], t.env);
    expect(down.code).toBe(1);
    expect(down.stderr).toBe('Error: a reply could not be delivered yet - notifier retries it; see the agent log\n');
    expect(outbound(path)).toMatchObject({ progress: 0, pending: 1 });
    expect(attempts()).toEqual([]);
    expect(readFileSync(dir.log, 'utf8')).toContain(`deliver: event ${id} of ${relative(t.home, path)} waits: xgw is not running (not counted as an attempt)`);

    await xgw('start');
    const up = await deliver(path);
    expect(up.code, up.stderr).toBe(0);
    expect(JSON.parse(up.stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(mailbox()).toEqual([['agent', 'echo: are you there?']]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });
    expect(attempts()).toEqual([]);
    expect(events(path, "type = 'record' AND subtype = 'error'")).toEqual([]);
  });

  it('never gives up on a reply because xgw is down, however many tries that takes (xgw restarting under a supervisor)', async () => {
    setAgentConfig({ deliver: { max_attempts: 2 } });
    const { path, id } = await reply('still there?');
    for (let i = 0; i < 4; i++) expect((await deliver(path)).code).toBe(1);
    expect(outbound(path)).toMatchObject({ progress: 0, pending: 1 });
    expect(attempts()).toEqual([]);
    expect(events(path, "type = 'record' AND subtype = 'error'")).toEqual([]);

    await xgw('start');
    expect(JSON.parse((await deliver(path)).stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(mailbox()).toEqual([['agent', 'echo: still there?']]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });
  });

  it('does not count an xgw that closes the connection without an answer (killed during the request) as an attempt', async () => {
    // Stands in for a daemon that dies with the request under way: it reads it and hangs up.
    mkdirSync(join(t.home, 'run'), { recursive: true });
    const dying = createServer((socket) => socket.once('data', () => socket.destroy()));
    await new Promise<void>((resolve) => dying.listen(socketPath(t.home, 'xgw'), resolve));
    try {
      const { path, id } = await reply('hello?');
      const result = await deliver(path);
      expect(result.code).toBe(1);
      expect(attempts()).toEqual([]);
      expect(readFileSync(dir.log, 'utf8')).toMatch(new RegExp(`deliver: event ${id} of \\S+ waits: the daemon on \\S+ closed the connection without an answer \\(not counted as an attempt\\)`));
    } finally {
      await new Promise((resolve) => dying.close(resolve));
    }
  });

  it('records an error and skips a reply that xgw refused deliver.max_attempts times, then delivers the next ones', async () => {
    setAgentConfig({ deliver: { max_attempts: 2 } });
    await xgw('start');
    // A peer of a channel this xgw does not have: xgw answers, and refuses the reply.
    const other = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'other', conversationType: 'dm', conversationId: user, peerId: user });
    const { path, id } = await reply('one', other);
    const firstTry = await deliver(path);
    expect(firstTry.code).toBe(1);
    expect(JSON.parse(firstTry.stdout)).toEqual({ error: 'a reply could not be delivered yet', suggestion: 'notifier retries it; see the agent log' });
    expect(attempts()).toMatchObject([{ event_id: id, attempts: 1 }]);
    expect(readFileSync(dir.log, 'utf8')).toContain(`deliver: event ${id} of ${relative(t.home, path)} failed (attempt 1 of 2): no channel terminal:other is configured`);
    const secondTry = await deliver(path);
    expect(secondTry.code, secondTry.stderr).toBe(0);
    expect(JSON.parse(secondTry.stdout)).toEqual({ delivered: 0, skipped: 1, failed: false });

    const errors = events(path, "type = 'record' AND subtype = 'error'");
    expect(errors.map((event) => [event.source, JSON.parse(event.content)])).toEqual([
      ['self', { stage: 'deliver', event_id: id, error: 'not delivered after 2 attempt(s): no channel terminal:other is configured' } satisfies ErrorRecord],
    ]);
    expect(outbound(path)).toMatchObject({ progress: id, pending: 0 });
    expect(attempts()).toEqual([]);
    expect(readFileSync(dir.log, 'utf8')).toContain(`deliver: gave up on event ${id} of ${relative(t.home, path)}`);

    // The channel is configured now: the next reply of the thread goes out.
    await xgw('stop');
    writeXgwConfig('terminal:other');
    await xgw('start');
    const next = await reply('two', other);
    expect(JSON.parse((await deliver(path)).stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(mailbox('terminal:other')).toEqual([['agent', 'echo: two']]);
    expect(outbound(path)).toMatchObject({ progress: next.id, pending: 0 });
  });

  it('delivers in order: a failed reply holds back the later ones of its thread', async () => {
    const first = await reply('first');
    const second = await reply('second');
    expect(first.path).toBe(second.path);
    expect((await deliver(first.path)).code).toBe(1);
    expect(outbound(first.path)).toMatchObject({ progress: 0, pending: 2 });
    await xgw('start');
    expect(JSON.parse((await deliver(first.path)).stdout)).toEqual({ delivered: 2, skipped: 0, failed: false });
    expect(mailbox()).toEqual([
      ['agent', 'echo: first'],
      ['agent', 'echo: second'],
    ]);
  });

  it('refuses a thread that is not an agent conversation as a usage error', async () => {
    const result = await runTool('agent', ['deliver', '--thread', join(t.home, 'elsewhere'), '--consumer', 'outbound'], t.env);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^Error: .* is not a conversation thread of an agent - /);
  });
});

describe('agent deliver to another agent', () => {
  it("pushes an internal reply into the asking agent's inbox as from this agent, once", async () => {
    await initAgent(t.home, 'other');
    const source = formatAddress({ kind: 'internal', conversationType: 'dm', conversationId: 'peer-telegram.main.42', agentId: 'other' });
    const { path, id } = await reply('what is 6*7?', source);
    expect(path).toBe(join(dir.threads, 'agents', 'other.dm.peer-telegram.main.42'));
    const result = await deliver(path);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ delivered: 1, skipped: 0, failed: false });

    const inbox = events(join(t.home, 'agents', 'other', 'inbox'));
    expect(inbox).toHaveLength(1);
    expect(inbox[0]!.source).toBe('internal:reply:peer-telegram.main.42:helper');
    expect(parseMessageContent(inbox[0]!.content)).toEqual({
      text: 'echo: what is 6*7?',
      attachments: [],
      reply_context: { kind: 'internal', conversation_type: 'reply', conversation_id: 'peer-telegram.main.42', agent_id: 'helper' },
      in_reply_to: id,
    });

    // A replayed delivery is not pushed twice.
    const thread = openThread(path, { home: t.home });
    thread.subscribe({ consumer: 'replay', handler: deliverHandler(), filter: OUTBOUND_FILTER });
    thread.close();
    expect((await deliver(path, 'replay')).code).toBe(0);
    expect(events(join(t.home, 'agents', 'other', 'inbox'))).toHaveLength(1);
    expect(mailbox()).toEqual([]);
  });

  it("carries the message the question was asked for from the question, through the answer, into the asking agent's inbox", async () => {
    await initAgent(t.home, 'other');
    // As `agent send` runs inside other's bash_exec, answering its event 7 of thread peer-telegram.main.42.
    await sendToAgent(t.home, 'helper', { text: 'what is 6*7?', env: { THECLAW_AGENT: 'other', THECLAW_CONVERSATION: 'peer-telegram.main.42', THECLAW_ASKING_EVENT: '7' } });
    await runAgent('helper', { home: t.home, env: t.env });
    const path = join(dir.threads, 'agents', 'other.dm.peer-telegram.main.42');
    const [answer] = events(path, "type = 'message' AND source = 'self'");
    expect(parseMessageContent(answer!.content).reply_context).toEqual({ kind: 'internal', conversation_type: 'dm', conversation_id: 'peer-telegram.main.42', agent_id: 'other', asking_event_id: 7 });
    expect((await deliver(path)).code).toBe(0);
    const [delivered] = events(join(t.home, 'agents', 'other', 'inbox'));
    expect(parseMessageContent(delivered!.content).reply_context).toEqual({
      kind: 'internal',
      conversation_type: 'reply',
      conversation_id: 'peer-telegram.main.42',
      agent_id: 'helper',
      asking_event_id: 7,
    });
  });
});
