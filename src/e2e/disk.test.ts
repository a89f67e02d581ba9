import Database from 'better-sqlite3';
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { agentDir, type AgentDir } from '../agent/agent-dir.js';
import { routeMessage } from '../agent/router.js';
import { formatAddress } from '../core/address.js';
import { askDaemon } from '../core/daemon.js';
import { isClawError } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { RotatingFile } from '../core/rotating-file.js';
import { storageError } from '../core/storage-error.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, runTool, startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type RunResult, type TestHome } from '../testing/index.js';
import { mountTmpfs, tmpfsUnavailable, type Tmpfs } from '../testing/tmpfs.js';
import { openThread, type Thread } from '../thread/thread.js';
import type { ThreadEvent } from '../thread/types.js';
import type { InboundOutcome } from '../xgw/protocol.js';
import { GatewayState, type MailboxEntry } from '../xgw/state.js';
import { echoToolStep } from './support.js';

/**
 * A full disk and a read-only data directory, on a small tmpfs of the test's own (root only):
 * every write path says so in the one `Error: <what> - <how to fix>` form and exits 1, leaves
 * nothing half-written (a batch is all or nothing, databases pass integrity_check, events.jsonl
 * holds whole lines, event ids have no gaps, a message not answered stays unacknowledged), and
 * once the disk recovers the same commands succeed and the waiting work completes, once.
 */

const DISK_BYTES = 8 << 20;
const DISK_FULL_FIX = 'free space on the disk that holds it and retry';
const READ_ONLY_FIX = 'remount it read-write (or point THECLAW_HOME at a writable directory) and retry';
const DISK_FULL = new RegExp(` - ${quote(DISK_FULL_FIX)}$`);
const READ_ONLY = new RegExp(` - ${quote(READ_ONLY_FIX)}$`);
const user = userInfo().username;

/** `text` as a regular expression that matches it literally. */
function quote(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

let disk: Tmpfs;
let t: TestHome;
let llm: FakeLlmServer;
const daemons: ('notifier' | 'xgw')[] = [];

const tool = (name: Parameters<typeof runTool>[0], args: string[], input?: string) => runTool(name, args, t.env, input);

/** The line a failed command ends its stderr with (a dropped-log warning may come before it). */
function errorLine(result: RunResult): string {
  return result.stderr.trimEnd().split('\n').at(-1) ?? '';
}

function expectFailure(result: RunResult, what: RegExp, how: RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  const line = errorLine(result);
  expect(line).toMatch(/^Error: /);
  expect(line).toMatch(what);
  expect(line).toMatch(how);
}

function expectJsonFailure(result: RunResult, what: RegExp, how: RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  const json = JSON.parse(result.stdout) as { error: string; suggestion: string };
  expect(json.error).toMatch(what);
  expect(` - ${json.suggestion}`).toMatch(how);
}

/** Opens the thread from the test process for `fn`, and closes it again (a file open for writing would keep the tmpfs from being remounted read-only). */
function withThread<T>(path: string, fn: (thread: Thread) => T): T {
  const thread = openThread(path, { home: t.home });
  try {
    return fn(thread);
  } finally {
    thread.close();
  }
}

const readEvents = (path: string) => withThread(path, (thread) => thread.peek({ limit: 100_000 }));
const consumerProgress = (path: string, consumer: string) => withThread(path, (thread) => thread.consumer(consumer)?.progress ?? 0);

/**
 * What a thread must look like after any failure: the database passes integrity_check, its ids
 * run 1..n with no gap and the sequence has not moved past n, and events.jsonl holds whole JSON
 * lines of stored events, in order, none twice.
 */
function expectIntactThread(path: string): ThreadEvent[] {
  const db = new Database(join(path, 'events.db'));
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const ids = db.prepare('SELECT id FROM events ORDER BY id').pluck().all() as number[];
    expect(ids).toEqual(ids.map((_, index) => index + 1));
    const seq = (db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number | undefined) ?? 0;
    expect(seq).toBe(ids.length);
  } finally {
    db.close();
  }
  const events = readEvents(path);
  const text = readFileSync(join(path, 'events.jsonl'), 'utf8');
  expect(text === '' || text.endsWith('\n')).toBe(true);
  const lines = text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ThreadEvent);
  const stored = new Map(events.map((event) => [event.id, event]));
  for (const line of lines) expect(line).toEqual(stored.get(line.id));
  expect(lines.map((line) => line.id)).toEqual([...new Set(lines.map((line) => line.id))].sort((a, b) => a - b));
  return events;
}

/** Files a failed write must not leave behind: temp files of locks, sessions, the registry. */
function strayTempFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.tmp'));
}

/** What the agent said to the peer in the terminal channel (its mailbox keeps the peer's lines too). */
function mailbox(peer: string): MailboxEntry[] {
  const state = new GatewayState(t.home);
  try {
    return state.mailbox('terminal:local', peer).filter((entry) => entry.role === 'agent');
  } finally {
    state.close();
  }
}

const terminalSource = (peer: string) => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });

async function startDaemon(name: 'notifier' | 'xgw'): Promise<void> {
  const result = await tool(name, ['start']);
  expect(result.code, result.stderr).toBe(0);
  daemons.push(name);
}

/** An agent `admin` on the fake model, and the configs of notifier (fast sweep) and xgw (terminal). */
async function setUpAgent(): Promise<AgentDir> {
  const init = await tool('agent', ['init', 'admin']);
  expect(init.code, init.stderr).toBe(0);
  writeFakePaiConfig(t.home, llm);
  mkdirSync(join(t.home, 'notifier'), { recursive: true });
  writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.3\nbackoff: { initial_seconds: 0.1, max_seconds: 0.3 }\n');
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(join(t.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n');
  return agentDir(t.home, 'admin');
}

/** The peer's conversation thread: its inbound texts and the replies to them, each checked to answer its message. */
function conversation(dir: AgentDir, peer: string): { inbound: string[]; replies: string[]; errors: number } {
  const events = expectIntactThread(routeMessage(dir, 'per-peer', terminalSource(peer)).path);
  const inbound = events.filter((event) => event.type === 'message' && event.source !== 'self');
  const replies = events.filter((event) => event.type === 'message' && event.source === 'self').map((event) => parseMessageContent(event.content));
  expect(replies.map((reply) => reply.in_reply_to)).toEqual(inbound.slice(0, replies.length).map((event) => event.id));
  return {
    inbound: inbound.map((event) => parseMessageContent(event.content).text),
    replies: replies.map((reply) => reply.text),
    errors: events.filter((event) => event.subtype === 'error').length,
  };
}

describe.skipIf(tmpfsUnavailable !== null)(`a full disk and a read-only data directory (needs root and a tmpfs${tmpfsUnavailable ? `: ${tmpfsUnavailable}` : ''})`, () => {
  beforeAll(async () => {
    disk = mountTmpfs(DISK_BYTES);
    llm = await startFakeOpenAI({ defaultStep: echoToolStep });
  });

  afterAll(async () => {
    await llm?.close();
    disk?.unmount();
  });

  beforeEach(() => {
    t = createTestHome(disk.dir);
  });

  afterEach(async () => {
    disk.readWrite();
    disk.free();
    await Promise.all(daemons.splice(0).map((name) => tool(name, ['stop'])));
    t.cleanup();
    for (const name of ['sessions', 'xgw']) rmSync(join(disk.dir, name), { recursive: true, force: true });
  });

  it('thread push, single and --batch, fails whole with a clear error while the disk is full, and works again once space is freed', async () => {
    const path = join(t.home, 'demo');
    expect((await tool('thread', ['init', path])).code).toBe(0);
    const push = (content: string, extra: string[] = []) => tool('thread', ['push', '--thread', path, '--source', 'self', '--type', 'message', '--content', content, ...extra]);
    const batch = (n: number, extra: string[] = []) =>
      tool(
        'thread',
        ['push', '--thread', path, '--source', 'self', '--type', 'message', '--batch', ...extra],
        Array.from({ length: n }, (_, i) => JSON.stringify({ content: `b${i} ${'x'.repeat(3000)}` })).join('\n'),
      );
    expect((await push('before')).stdout).toBe('1\n');

    disk.fill();
    const what = new RegExp(`the disk is full \\(writing ${quote(join(path, 'events.db'))}\\)`);
    expect((await push('lost')).stderr).toBe(`Error: the disk is full (writing ${join(path, 'events.db')}) - ${DISK_FULL_FIX}\n`);
    expectFailure(await push('lost'), what, DISK_FULL);
    expectJsonFailure(await push('lost', ['--json']), what, DISK_FULL);
    expectFailure(await batch(20), what, DISK_FULL);
    expectJsonFailure(await batch(20, ['--json']), what, DISK_FULL);
    // A thread that a full disk kept from being created does not block creating it later.
    expectFailure(await tool('thread', ['init', join(t.home, 'later')]), /the disk is full/, DISK_FULL);

    disk.free();
    expect(expectIntactThread(path).map((event) => event.content)).toEqual(['before']);
    expect((await batch(20)).stdout).toBe(Array.from({ length: 20 }, (_, i) => `${i + 2}\n`).join(''));
    expect((await push('after')).stdout).toBe('22\n');
    expect(expectIntactThread(path)).toHaveLength(22);
    expect(readFileSync(join(path, 'events.jsonl'), 'utf8').trimEnd().split('\n')).toHaveLength(22);
    const later = await tool('thread', ['init', join(t.home, 'later')]);
    expect(later.code, later.stderr).toBe(0);
    expect(strayTempFiles(t.home)).toEqual([]);
  });

  it('a line file keeps whole lines when the disk fills in the middle of an append, and a log write drops its line without throwing', () => {
    const file = new RotatingFile(join(t.home, 'lines.jsonl'));
    file.append('{"n":1}\n', 1);
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      disk.fill();
      // Longer than what is left of the file's last page: part of it is written before ENOSPC.
      const long = `{"n":2,"pad":"${'x'.repeat(20_000)}"}\n`;
      let thrown: unknown;
      try {
        file.append(long, 1);
      } catch (error) {
        thrown = error;
      }
      expect(storageError(thrown)?.kind).toBe('disk_full');
      expect(readFileSync(file.path, 'utf8')).toBe('{"n":1}\n');

      const logPath = join(t.home, 'logs', 'tool.log');
      const logger = createLogger(logPath, { env: {} });
      expect(() => logger.error(`first ${'y'.repeat(20_000)}`)).not.toThrow();
      expect(() => logger.error(`second ${'y'.repeat(20_000)}`)).not.toThrow();
      expect(
        readFileSync(logPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .every((line) => /^\[[^\]]+\] \[ERROR\] /.test(line) && line.endsWith('y')),
      ).toBe(true);
      const warnings = stderr.mock.calls.map(([text]) => String(text)).filter((text) => text.startsWith('warning: log lines are dropped'));
      expect(warnings.length).toBeLessThanOrEqual(1);

      disk.free();
      file.append(long, 1);
      logger.info('after');
      expect(readFileSync(file.path, 'utf8')).toBe(`{"n":1}\n${long}`);
      expect(readFileSync(logPath, 'utf8')).toMatch(/\[INFO\] after\n$/);
    } finally {
      stderr.mockRestore();
    }
  });

  it('while the disk is full no message is lost: sends and inbound chats fail clearly, the agent run stays unacknowledged, and after space is freed each message is answered and delivered once', async () => {
    const dir = await setUpAgent();
    expect((await tool('agent', ['start', 'admin'])).code).toBe(0);
    await startDaemon('notifier');
    await startDaemon('xgw');
    // The disk fills while the model answers the first message: its run fails storing the tool call.
    llm.enqueue(() => {
      disk.fill();
      return echoToolStep;
    });
    const chat = (text: string, id: string) => askDaemon<InboundOutcome>(t.home, 'xgw', { op: 'chat_message', channel: 'terminal:local', peer: 'ann', message_id: id, text });
    expect(await chat('first', 'm1')).toMatchObject({ kind: 'accepted', eventId: 1 });
    const requestsBefore = llm.requests.length;
    await waitFor(() => llm.requests.length > requestsBefore, 'the model call that fills the disk');

    const what = new RegExp(`the disk is full \\(writing ${quote(join(dir.inbox, 'events.db'))}\\)`);
    let refused: unknown;
    await chat('second', 'm2').catch((error: unknown) => (refused = error));
    expect(isClawError(refused, 'disk_full') && refused.message).toMatch(what);
    expectFailure(await tool('xgw', ['chat', '--agent', 'admin'], 'second\n'), what, DISK_FULL);
    expectFailure(await tool('agent', ['send', 'admin', '--text', 'hello']), what, DISK_FULL);
    expectJsonFailure(await tool('agent', ['send', 'admin', '--text', 'hello', '--json']), what, DISK_FULL);
    const run = await tool('agent', ['run', 'admin']);
    expectFailure(run, new RegExp(`the disk is full \\(writing ${quote(dir.runLock)}\\)`), DISK_FULL);
    expectFailure(await tool('notifier', ['timer', 'add', '--id', 'beat', '--every', '1h', '--command', 'true']), /the disk is full \(writing .*\/notifier\/timers\.db\)/, DISK_FULL);
    // The daemons go on (their logs drop lines) and the first message waits, unanswered and unacknowledged.
    const status = JSON.parse((await tool('notifier', ['status', '--json'])).stdout) as { running: boolean; subscriptions: { consumer: string; pending: number; progress: number }[] };
    expect(status.running).toBe(true);
    expect(status.subscriptions.find((s) => s.consumer === 'inbox')).toMatchObject({ pending: 1, progress: 0 });
    expect(JSON.parse((await tool('xgw', ['status', '--json'])).stdout)).toMatchObject({ running: true });

    disk.free();
    expect(await chat('second', 'm2')).toMatchObject({ kind: 'accepted', eventId: 2 });
    const sent = await tool('agent', ['send', 'admin', '--text', 'third', '--source', terminalSource('ann')]);
    expect(sent.code, sent.stderr).toBe(0);
    const delivered = await waitFor(
      () => {
        const entries = mailbox('ann');
        return entries.length >= 3 ? entries : undefined;
      },
      'three replies in the terminal mailbox',
      20_000,
    );
    expect(delivered.map((entry) => entry.text)).toEqual(['reply to: first', 'reply to: second', 'reply to: third']);
    expect((await tool('notifier', ['timer', 'add', '--id', 'beat', '--every', '1h', '--command', 'true'])).code).toBe(0);

    expect(conversation(dir, 'ann')).toEqual({ inbound: ['first', 'second', 'third'], replies: ['reply to: first', 'reply to: second', 'reply to: third'], errors: 0 });
    expect(expectIntactThread(dir.inbox)).toHaveLength(3);
    await waitFor(() => consumerProgress(dir.inbox, 'inbox') === 3, 'the inbox acknowledged');
    expect(mailbox('ann')).toHaveLength(3);
    expect(strayTempFiles(t.home)).toEqual([]);
    // Every handler output file is removed when its run ends, including the runs the full disk
    // refused; what stays is the warm runners' own file each (emptied before each job).
    await waitFor(() => readdirSync(join(t.home, 'run', 'notifier-output')).filter((name) => !name.startsWith('runner.')).length === 0, 'no handler output files left');
  });

  it('a message whose session file cannot be written is not answered with an error record: it waits, unacknowledged, for the disk to have room', async () => {
    // The home on the machine's disk, only the sessions on the full tmpfs: the thread takes records, the session does not.
    t.cleanup();
    t = createTestHome();
    const dir = await setUpAgent();
    mkdirSync(join(disk.dir, 'sessions'));
    rmSync(dir.sessions, { recursive: true });
    symlinkSync(join(disk.dir, 'sessions'), dir.sessions);
    expect((await tool('agent', ['send', 'admin', '--text', 'hello', '--source', terminalSource('bob')])).code).toBe(0);

    disk.fill();
    const run = await tool('agent', ['run', 'admin']);
    expectFailure(run, new RegExp(`the disk is full \\(writing ${quote(dir.sessions)}/[^)]+\\.jsonl\\)`), DISK_FULL);
    expect(conversation(dir, 'bob')).toEqual({ inbound: ['hello'], replies: [], errors: 0 });
    expect(consumerProgress(dir.inbox, 'inbox')).toBe(0);

    disk.free();
    const again = await tool('agent', ['run', 'admin']);
    expect(again.code, again.stderr).toBe(0);
    expect(conversation(dir, 'bob')).toEqual({ inbound: ['hello'], replies: ['reply to: hello'], errors: 0 });
    expect(consumerProgress(dir.inbox, 'inbox')).toBe(1);
    expect(strayTempFiles(t.home)).toEqual([]);
    expect(readdirSync(join(disk.dir, 'sessions')).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('a reply that the gateway cannot store while its disk is full uses up no delivery attempt: it is delivered once the disk has room', async () => {
    // The home on the machine's disk, only the gateway's state (mailboxes, delivered keys) on the full tmpfs.
    t.cleanup();
    t = createTestHome();
    const dir = await setUpAgent();
    mkdirSync(join(disk.dir, 'xgw'));
    writeFileSync(join(disk.dir, 'xgw', 'config.yaml'), readFileSync(join(t.home, 'xgw', 'config.yaml')));
    rmSync(join(t.home, 'xgw'), { recursive: true });
    symlinkSync(join(disk.dir, 'xgw'), join(t.home, 'xgw'));
    expect((await tool('agent', ['start', 'admin'])).code).toBe(0);
    await startDaemon('notifier');
    await startDaemon('xgw');

    disk.fill();
    expect((await tool('agent', ['send', 'admin', '--text', 'hello', '--source', terminalSource('carol')])).code).toBe(0);
    const thread = routeMessage(dir, 'per-peer', terminalSource('carol')).path;
    // More failed deliveries than deliver.max_attempts (3) allows for a reply the gateway refuses.
    await waitFor(
      async () => {
        const status = JSON.parse((await tool('notifier', ['status', '--json'])).stdout) as { subscriptions: { thread: string; consumer: string; failures: number }[] };
        return (status.subscriptions.find((s) => s.thread === thread && s.consumer === 'outbound')?.failures ?? 0) > 3;
      },
      'four failed deliveries',
      20_000,
    );
    expect(conversation(dir, 'carol')).toEqual({ inbound: ['hello'], replies: ['reply to: hello'], errors: 0 });

    disk.free();
    const delivered = await waitFor(() => (mailbox('carol').length > 0 ? mailbox('carol') : undefined), 'the reply in the terminal mailbox', 20_000);
    expect(delivered.map((entry) => entry.text)).toEqual(['reply to: hello']);
    await waitFor(() => consumerProgress(thread, 'outbound') > 0, 'the reply acknowledged');
    expect(conversation(dir, 'carol')).toEqual({ inbound: ['hello'], replies: ['reply to: hello'], errors: 0 });
    expect(mailbox('carol')).toHaveLength(1);
  });

  it('a read-only data directory: every write says so, nothing changes, and after remounting read-write the waiting message is answered', async () => {
    const dir = await setUpAgent();
    const path = join(t.home, 'demo');
    expect((await tool('thread', ['init', path])).code).toBe(0);
    expect((await tool('thread', ['push', '--thread', path, '--source', 'self', '--type', 'message', '--content', 'before'])).code).toBe(0);
    expect((await tool('agent', ['send', 'admin', '--text', 'waiting', '--source', terminalSource(user)])).code).toBe(0);

    disk.readOnly();
    const push = (extra: string[], input?: string) => tool('thread', ['push', '--thread', path, '--source', 'self', '--type', 'message', ...extra], input);
    const dbWhat = new RegExp(`the data directory is read-only \\(writing ${quote(join(path, 'events.db'))}\\)`);
    expect((await push(['--content', 'lost'])).stderr).toBe(`Error: the data directory is read-only (writing ${join(path, 'events.db')}) - ${READ_ONLY_FIX}\n`);
    expectJsonFailure(await push(['--content', 'lost', '--json']), dbWhat, READ_ONLY);
    expectFailure(await push(['--batch'], '{"content":"a"}\n{"content":"b"}\n'), dbWhat, READ_ONLY);
    expectFailure(await tool('agent', ['send', 'admin', '--text', 'lost']), /the data directory is read-only \(writing .*\/inbox\/events\.db\)/, READ_ONLY);
    expectFailure(await tool('agent', ['run', 'admin']), /the data directory is read-only \(writing .*\/run\.lock\)/, READ_ONLY);
    expectJsonFailure(await tool('agent', ['run', 'admin', '--json']), /the data directory is read-only/, READ_ONLY);
    expectFailure(await tool('notifier', ['timer', 'add', '--id', 'beat', '--every', '1h', '--command', 'true']), /the data directory is read-only \(writing .*\/notifier\/timers\.db\)/, READ_ONLY);
    expectFailure(await tool('notifier', ['start']), /the data directory is read-only \(writing .*\/run/, READ_ONLY);
    expectFailure(await tool('xgw', ['start']), /the data directory is read-only \(writing .*\/run/, READ_ONLY);

    disk.readWrite();
    expect(expectIntactThread(path).map((event) => event.content)).toEqual(['before']);
    expect(consumerProgress(dir.inbox, 'inbox')).toBe(0);
    expect((await push(['--content', 'after'])).stdout).toBe('2\n');
    expect((await tool('agent', ['start', 'admin'])).code).toBe(0);
    await startDaemon('notifier');
    await startDaemon('xgw');
    const delivered = await waitFor(() => (mailbox(user).length > 0 ? mailbox(user) : undefined), 'the reply in the terminal mailbox', 20_000);
    expect(delivered.map((entry) => entry.text)).toEqual(['reply to: waiting']);
    expect(conversation(dir, user)).toEqual({ inbound: ['waiting'], replies: ['reply to: waiting'], errors: 0 });
    expect(strayTempFiles(t.home)).toEqual([]);
  });
});
