import Database from 'better-sqlite3';
import { cpSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent/lifecycle.js';
import type { DaemonName } from '../core/daemon.js';
import { parseMessageContent } from '../core/message.js';
import { cliPath, packageRoot } from '../core/package.js';
import { sleep } from '../core/retry.js';
import { textUpdate, type FakeSentMessage } from '../testing/fake-telegram.js';
import { NEEDS_POSTGRES, postgresUnavailable, startPostgres, type PostgresCluster } from '../testing/postgres.js';
import { listThreads } from '../thread/dispatch/registry.js';
import { openThreadStore, threadName, type ThreadStore } from '../thread/index.js';
import type { ThreadEvent } from '../thread/types.js';
import { findVictims, Killer, postgresIntegrity, Supervisor, victimKind } from './chaos.js';
import { agentStatus, echoToolStep, startSystem, telegramThread, until, type System } from './support.js';

/**
 * Chaos: the whole system up (real notifier, xgw, agent processes; a fake OpenAI model that
 * answers in 50-500 ms, one bash_exec round per message; a fake Telegram), 10 peers send 60
 * messages while a killer SIGKILLs a random `agent run`, `agent deliver`, notifier or xgw
 * process every 200-500 ms and a supervisor starts the daemons again. Then every message has
 * one reply, in its peer's chat, quoting it, in order; every inbox and thread holds each message
 * once with one reply; and every SQLite file passes `PRAGMA integrity_check`.
 *
 * The same runs with the threads in PostgreSQL (a throwaway cluster; issue 26 §3), smaller by
 * default (20 messages from 5 peers) to keep the suite's time: there the store passes amcheck
 * and its own invariants (postgresIntegrity) instead, and no thread is a SQLite file.
 *
 * One duplicate is allowed, and only where it is proven, and always reported: the window that
 * xgw documents (Gateway.send). Telegram has no idempotency, so a reply handed to the Bot API by
 * an xgw that is killed before it writes the reply's key down is sent again by the retry.
 * CHAOS_STRICT=1 fails on those too.
 *
 * `npm run soak` runs both longer (CHAOS_SOAK=1: 2,000 messages each); CHAOS_MESSAGES,
 * CHAOS_PEERS, CHAOS_SEND_INTERVAL_MS (mean pause between two messages) and
 * CHAOS_KILL_AFTER_SENT_MS (how long the killer goes on once everything is sent) override any.
 */
const SOAK = process.env.CHAOS_SOAK === '1';
const STRICT = process.env.CHAOS_STRICT === '1';
const envNumber = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const SEND_INTERVAL_MS = envNumber('CHAOS_SEND_INTERVAL_MS', SOAK ? 250 : 75);
/** The whole test, within vitest's timeout; what is left after the chaos goes to delivery. */
const BUDGET_MS = envNumber('CHAOS_BUDGET_MS', SOAK ? 3 * 3_600_000 : 170_000);

interface Variant {
  store: 'SQLite' | 'PostgreSQL';
  messages: number;
  peers: number;
  killAfterSentMs: number;
}

const VARIANTS = (
  [
    { store: 'SQLite', messages: SOAK ? 2_000 : 60, peers: 10, killAfterSentMs: SOAK ? 120_000 : 20_000 },
    { store: 'PostgreSQL', messages: SOAK ? 2_000 : 20, peers: SOAK ? 10 : 5, killAfterSentMs: SOAK ? 120_000 : 5_000 },
  ] satisfies Variant[]
).map((variant) => ({
  ...variant,
  messages: envNumber('CHAOS_MESSAGES', variant.messages),
  peers: envNumber('CHAOS_PEERS', variant.peers),
  killAfterSentMs: envNumber('CHAOS_KILL_AFTER_SENT_MS', variant.killAfterSentMs),
}));
const unavailable = postgresUnavailable();
const DAEMONS: readonly DaemonName[] = ['notifier', 'xgw'];

let system: System | undefined;
const stoppers: Array<() => Promise<void>> = [];

afterEach(async ({ task }) => {
  await Promise.allSettled(stoppers.splice(0).map((stop) => stop()));
  if (system && task.result?.state === 'fail') {
    // Kept for a look afterwards: logs, threads, state.
    await Promise.allSettled(DAEMONS.map((name) => system!.run(name, ['stop'])));
    cpSync(system.home, `${system.home}-failed`, { recursive: true });
    console.log(`chaos: the failed run's THECLAW_HOME is kept in ${system.home}-failed`);
  }
  await system?.stop();
  system = undefined;
});

interface Sent {
  peer: number;
  text: string;
  messageId: number;
}

describe.each(VARIANTS)('the whole system under chaos, its threads in $store', ({ store: kind, messages: MESSAGES, peers: PEERS, killAfterSentMs: KILL_AFTER_SENT_MS }) => {
  const onPostgres = kind === 'PostgreSQL';
  let cluster: PostgresCluster | undefined;
  beforeAll(async () => {
    if (onPostgres && !unavailable) cluster = await startPostgres();
  }, 60_000);
  afterAll(() => cluster?.stop());

  const skip = onPostgres && unavailable !== null;
  it.skipIf(skip)(`answers every message once while processes are killed at random${onPostgres ? ` (${NEEDS_POSTGRES})` : ''}`, { timeout: BUDGET_MS + 30_000 }, async () => {
    const started = Date.now();
    const deadline = started + BUDGET_MS;
    // A process dies every 200-500 ms here, far more often than any real crash: a turn of a few
    // hundred ms is cut off again and again, and after turn.max_attempts (3) the person would get
    // "answering failed 3 times" instead of the reply. That give-up is tested on its own
    // (src/agent/crash.test.ts); here every message must be answered, so the limit is out of reach.
    // On PostgreSQL a killed notifier's leases are free once it is started again (its reaper gone);
    // short ones keep any other case (a lease its holder could not release) within the chaos.
    const url = cluster ? await cluster.createDatabase('chaos') : undefined;
    const s = await startSystem({
      llm: { defaultStep: echoToolStep, defaultDelayMs: { min: 50, max: 500 } },
      logLevel: 'info',
      maxTurnAttempts: 50,
      ...(url && { env: { THECLAW_DATABASE_URL: url }, leases: { ttl_seconds: 4, heartbeat_seconds: 0.5 } }),
    });
    system = s;
    const store = await openThreadStore(s.home, s.env);
    stoppers.push(() => store.close());
    const killer = new Killer({ home: s.home, intervalMs: { min: 200, max: 500 } });
    const supervisors = new Map(DAEMONS.map((name) => [name, new Supervisor({ home: s.home, name, start: () => s.run(name, ['start']) })]));
    stoppers.push(() => killer.stop(), ...[...supervisors.values()].map((supervisor) => () => supervisor.stop()));

    // 10 peers, each with its own numbered messages (at least one: every peer's thread is checked), in a random interleaving.
    const peers = Array.from({ length: PEERS }, (_, i) => 7001 + i);
    const randomPeer = () => peers[Math.floor(Math.random() * peers.length)]!;
    const senders = shuffle([...peers, ...Array.from({ length: MESSAGES - PEERS }, randomPeer)]);
    const counters = new Map<number, number>();
    const messages: Sent[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      const peer = senders[i]!;
      const n = (counters.get(peer) ?? 0) + 1;
      counters.set(peer, n);
      const text = `p${peer}-m${n}`;
      messages.push({ peer, text, messageId: s.telegram.queueUpdate(textUpdate({ from: peer, text })).message.message_id as number });
      await sleep(Math.random() * 2 * SEND_INTERVAL_MS); // the load's shape, not a wait for anything
    }
    const allSent = Date.now();
    const answered = () => messages.filter((message) => repliesTo(s.telegram.sent, message).length > 0).length;

    // The killer goes on for a while after the last message, or until nearly all are answered.
    await until(() => Date.now() - allSent >= KILL_AFTER_SENT_MS || answered() >= 0.95 * MESSAGES, 'the end of the chaos', KILL_AFTER_SENT_MS + 5_000, 100);
    await killer.stop();
    const chaosEnded = Date.now();

    // Both daemons up again, then every message answered and the agent idle, within the budget.
    let waited = 'everything delivered';
    const left = () => Math.max(1_000, deadline - Date.now());
    try {
      await until(() => [...supervisors.values()].every((supervisor) => supervisor.running()), 'the daemons to be up', left());
      await until(() => answered() === MESSAGES, 'every message answered', left(), 100);
      await until(async () => isIdle(await agentStatus(s)), 'the agent to be idle', left(), 100);
      await sleep(1_500); // three sweeps: a late duplicate would show now
    } catch (error) {
      waited = (error as Error).message; // reported below with the counts; the assertions say what is wrong
    }
    await Promise.all([...supervisors.values()].map((supervisor) => supervisor.stop()));

    const sent = s.telegram.sent;
    const missing = messages.filter((message) => repliesTo(sent, message).length === 0);
    const recorded = recordedMessageIds(s.home);
    const xgwKills = killer.log.filter((kill) => kill.kind === 'xgw').map((kill) => kill.at);
    const duplicated = messages.filter((message) => repliesTo(sent, message).length > 1);
    const inWindow = duplicated.filter((message) => isSendWindowDuplicate(repliesTo(sent, message), recorded, xgwKills));
    const unexplained = duplicated.filter((message) => !inWindow.includes(message));
    const inbox = await threadEvents(store, s.home, join(s.home, 'agents', 'admin', 'inbox'));
    const checks = integrity(s.home);
    const storeChecks = url ? await postgresIntegrity(url) : [];
    const losses = lossLines(s.home);
    const each = <T>(pick: (supervisor: Supervisor) => T) => Object.fromEntries([...supervisors].map(([name, supervisor]) => [name, pick(supervisor)]));
    console.log(
      `chaos: ${JSON.stringify(
        {
          messages: MESSAGES,
          peers: PEERS,
          replies_sent: sent.length,
          answered: MESSAGES - missing.length,
          missing: missing.length,
          duplicated_in_send_window: inWindow.length,
          duplicated_otherwise: unexplained.length,
          inbox_events: inbox.length,
          model_requests: s.llm.requests.length,
          kills: killer.kills,
          kills_total: killer.log.length,
          restarts: each((supervisor) => supervisor.restarts),
          failed_starts: each((supervisor) => supervisor.failedStarts),
          start_failures: each((supervisor) => Object.fromEntries(supervisor.failures)),
          databases_checked: checks.length,
          store_checks: storeChecks.length,
          sending_s: (allSent - started) / 1000,
          chaos_s: (chaosEnded - started) / 1000,
          duration_s: (Date.now() - started) / 1000,
          waited,
        },
        null,
        2,
      )}`,
    );
    const show = (list: Sent[]) => list.map((message) => `${message.text} (#${message.messageId}): ${JSON.stringify(repliesTo(sent, message).map((reply) => `${reply.text} @${reply.at}`))}`);
    if (inWindow.length > 0) {
      console.log(`chaos: sent twice in xgw's documented window (handed to Telegram by an xgw killed before it wrote the key down):\n${show(inWindow).join('\n')}`);
    }
    if (losses.length > 0) console.log(`chaos: loss lines in the logs:\n${losses.slice(0, 20).join('\n')}`);
    if (waited !== 'everything delivered') console.log(`chaos: threads with work left:\n${JSON.stringify(await workLeft(s, store, peers), null, 2)}`);

    expect(show(missing).slice(0, 10), 'messages without a reply').toEqual([]);
    expect(show(unexplained).slice(0, 10), 'messages answered more than once').toEqual([]);
    if (STRICT) expect(show(inWindow), 'messages answered twice in the send window (CHAOS_STRICT)').toEqual([]);
    for (const message of messages) {
      const copies = inWindow.includes(message) ? 2 : 1;
      expect(repliesTo(sent, message).map((reply) => reply.text)).toEqual(Array(copies).fill(`reply to: ${message.text}`));
    }
    expect(sent, 'nothing sent besides the replies').toHaveLength(MESSAGES + inWindow.length);
    // Each peer's replies arrived in the order of its messages.
    for (const peer of peers) {
      const got = [...new Set(sent.filter((reply) => Number(reply.chat_id) === peer).map((reply) => reply.text))];
      expect(got).toEqual(messages.filter((message) => message.peer === peer).map((message) => `reply to: ${message.text}`));
    }
    // The inbox holds every message once; each peer's thread has each message once, with one reply.
    expect(inbox).toHaveLength(MESSAGES);
    for (const peer of peers) {
      const events = (await threadEvents(store, s.home, telegramThread(s.home, peer))).filter((event) => event.type === 'message');
      const inbound = events.filter((event) => event.source !== 'self');
      const replies = events.filter((event) => event.source === 'self').map((event) => parseMessageContent(event.content));
      expect(inbound.map((event) => parseMessageContent(event.content).text)).toEqual(messages.filter((m) => m.peer === peer).map((m) => m.text));
      expect(replies.map((reply) => reply.in_reply_to)).toEqual(inbound.map((event) => event.id));
    }
    expect(checks.filter((check) => check.result !== 'ok')).toEqual([]);
    expect(storeChecks.filter((check) => check.result !== 'ok')).toEqual([]);
    // The inbox, each person's thread, and the warden's feed of the commands the turns ran: files, or rows in PostgreSQL.
    const threads = ['agents/admin/inbox', 'feeds/toolcalls', ...peers.map((peer) => `agents/admin/threads/peers/telegram.main.${peer}`)];
    expect(await store.list()).toEqual(expect.arrayContaining(threads));
    const threadFiles = checks.filter((check) => check.file.endsWith('events.db')).map((check) => check.file);
    if (onPostgres) expect(threadFiles).toEqual([]);
    else expect(threadFiles.sort()).toEqual(threads.map((thread) => `${thread}/events.db`).sort());
    expect(losses).toEqual([]);
    expect(waited).toBe('everything delivered');
  });
});

describe("the chaos test's killer", () => {
  it("tells the system's processes by their command line", () => {
    const node = process.execPath;
    expect(victimKind([node, cliPath('agent'), 'run', 'admin'])).toBe('agent run');
    expect(victimKind([node, cliPath('agent'), 'deliver', '--thread', '/x', '--consumer', 'outbound'])).toBe('agent deliver');
    expect(victimKind([node, cliPath('notifier'), 'start', '--foreground', ''])).toBe('notifier');
    expect(victimKind([node, cliPath('xgw'), 'start', '--foreground', ''])).toBe('xgw');
    expect(victimKind([node, cliPath('xgw'), 'start', ''])).toBeNull(); // the CLI that starts the daemon
    expect(victimKind([node, cliPath('agent'), 'status', ''])).toBeNull();
    expect(victimKind([node, join(packageRoot(), 'dist', 'notifier', 'runner.js'), cliPath('agent')])).toBe('runner');
    expect(victimKind(['bash', '-c', 'agent run admin'])).toBeNull();
  });

  it('finds only processes of its own THECLAW_HOME', () => {
    expect(findVictims('/nonexistent/theclaw-home')).toEqual([]);
  });
});

/** Fisher-Yates, in place. */
function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

const repliesTo = (sent: FakeSentMessage[], message: Sent) => sent.filter((reply) => Number(reply.chat_id) === message.peer && reply.reply_parameters?.message_id === message.messageId);

function isIdle(status: AgentStatus): boolean {
  return status.pending === 0 && !status.running && status.undelivered === 0;
}

/** The platform message ids xgw wrote down under a delivery's key. */
function recordedMessageIds(home: string): Set<string> {
  const db = new Database(join(home, 'xgw', 'state.db'), { readonly: true });
  try {
    const rows = db.prepare("SELECT message_ids FROM deliveries WHERE channel_id = 'telegram:main'").pluck().all() as string[];
    return new Set(rows.flatMap((ids) => JSON.parse(ids) as string[]));
  } finally {
    db.close();
  }
}

/**
 * Whether two copies of a reply are the one duplicate xgw documents: the earlier copy was never
 * written down under the reply's key (so the xgw that handed it to Telegram did not live to
 * record the answer), the later one was (the retry), and an xgw was killed in between. The
 * kill may come up to a second before the fake carried out the earlier copy: its request was
 * on its way when its sender died.
 */
function isSendWindowDuplicate(copies: FakeSentMessage[], recorded: Set<string>, xgwKills: number[]): boolean {
  if (copies.length !== 2) return false;
  const [first, second] = [...copies].sort((a, b) => a.at - b.at) as [FakeSentMessage, FakeSentMessage];
  const id = (copy: FakeSentMessage) => String(copy.message.message_id);
  return !recorded.has(id(first)) && recorded.has(id(second)) && xgwKills.some((at) => at >= first.at - 1_000 && at <= second.at);
}

/** Every SQLite file under the home, with what `PRAGMA integrity_check` says of it. */
function integrity(home: string): Array<{ file: string; result: string }> {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.db')) files.push(path);
    }
  };
  walk(home);
  return files.map((file) => {
    const db = new Database(file);
    try {
      const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      return { file: file.slice(home.length + 1), result: rows.map((row) => row.integrity_check).join('; ') };
    } finally {
      db.close();
    }
  });
}

/** Lines of the system's logs that say a message was lost, given up on, or not written down. */
function lossLines(home: string): string[] {
  const logs = [join(home, 'logs', 'xgw.log'), join(home, 'logs', 'notifier.log'), join(home, 'agents', 'admin', 'logs', 'agent.log')];
  return logs.flatMap((log) =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .split('\n')
          .filter((line) => /gave up|dropped message|could not record/.test(line))
      : [],
  );
}

/** The events of a thread (by its path in the home), read through the system's store; [] before it exists. */
async function threadEvents(store: ThreadStore, home: string, path: string): Promise<ThreadEvent[]> {
  const thread = await store.open(threadName(home, path)).catch(() => null);
  if (!thread) return [];
  try {
    return await thread.peek({ limit: 100_000 });
  } finally {
    await thread.close();
  }
}

/** The inbox and each peer's thread with work left or unknown to notifier's sweep: what a stuck run looks like. */
async function workLeft(s: System, store: ThreadStore, peers: number[]): Promise<object[]> {
  const registered = new Set(store.leases ? await store.leases.subscribedThreads() : listThreads(s.home).map((path) => threadName(s.home, path)));
  const threads = ['agents/admin/inbox', ...peers.map((peer) => threadName(s.home, telegramThread(s.home, peer)))];
  const left = await Promise.all(
    threads.map(async (name): Promise<object[]> => {
      const thread = await store.open(name).catch(() => null);
      if (!thread) return [{ name, exists: false }];
      try {
        const consumers = (await thread.info()).consumers.map(({ consumer, progress, pending, subscribed, lease, failures, retry_at }) => ({
          consumer,
          progress,
          pending,
          subscribed,
          lease,
          failures,
          retry_at,
        }));
        const stuck = !registered.has(name) || consumers.some((consumer) => consumer.pending > 0);
        return stuck ? [{ name, registered: registered.has(name), consumers }] : [];
      } finally {
        await thread.close();
      }
    }),
  );
  return left.flat();
}
