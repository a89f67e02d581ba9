import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type postgres from 'postgres';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import type { FakeStep, LooseJson } from '../../testing/fake-llm.js';
import { startFakeTelegram, textUpdate, type FakeTelegram } from '../../testing/fake-telegram.js';
import { runTool, startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable } from '../../testing/postgres.js';
import { startTwoHosts, type HostName, type TwoHosts } from '../../testing/two-hosts.js';
import { threadName, type ThreadStore } from '../../thread/index.js';
import { agentDir } from '../agent-dir.js';
import { initAgent, startAgent, subscribeOutbound } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';
import { closeThreadStores } from '../threads.js';
import { deliverReplies } from './deliver.js';
import { resendGivenUp } from './resend.js';

/**
 * A reply delivered by the host that owns its channel, without the agent's directory there: two
 * "hosts" (two homes, THECLAW_HOST a and b) on one PostgreSQL store. a's gateway owns Telegram (a
 * fake); the agent's directory is on b only, where its turns run (in-process). a delivers the
 * replies (`agent deliver` in-process, as a's notifier would run it): the text and the file the
 * turn attached reach the person once, and a refused send is retried and given up after the
 * agent's `deliver.max_attempts` (2, set on b), all without an `agents/helper` on a. The person
 * is the agent's owner, whose chat may run the command that attaches the file.
 */

const unavailable = postgresUnavailable();
const PEER = 4242;
const REPORT = 'quarterly numbers\n';
let two: TwoHosts | undefined;
let store: ThreadStore;
let admin: postgres.Sql;
let telegram: FakeTelegram;
let llm: FakeLlmServer;
let hosts: Record<HostName, TestHome>;
let envs: Record<HostName, NodeJS.ProcessEnv>;

/** Asked for the report, the agent writes it and attaches it; otherwise it answers in words. */
const step: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === 'user' && JSON.stringify(last.content).includes('report')) {
    return { kind: 'tool_call', name: 'bash_exec', arguments: { command: `printf '${REPORT.replace('\n', '\\n')}' > report.txt && agent attach report.txt` } };
  }
  return { kind: 'text', text: last?.role === 'tool' ? 'Here is the report.' : 'pong' };
};

beforeAll(async () => {
  if (unavailable) return;
  [telegram, llm] = await Promise.all([startFakeTelegram(), startFakeOpenAI({ defaultStep: step })]);
  two = await startTwoHosts('deliver_hosts', { a: { TELEGRAM_TOKEN: telegram.token } });
  ({ homes: hosts, envs, store, admin } = two);
  writeFakePaiConfig(hosts.b.home, llm);
  await initAgent(hosts.b.home, 'helper', {}, envs.b);
  const config = agentDir(hosts.b.home, 'helper').config;
  writeFileSync(config, stringify({ ...(parse(readFileSync(config, 'utf8')) as object), deliver: { max_attempts: 2 }, policy: { owners: [`telegram:main:${PEER}`] } }));
  await startAgent(hosts.b.home, 'helper', envs.b);
  mkdirSync(join(hosts.a.home, 'xgw'), { recursive: true });
  writeFileSync(
    join(hosts.a.home, 'xgw', 'config.yaml'),
    `channels:\n  - { id: telegram:main, type: telegram, token_env: TELEGRAM_TOKEN, api_root: "${telegram.apiRoot}", access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: helper }\n`,
  );
  const started = await runTool('xgw', ['start'], envs.a);
  if (started.code !== 0) throw new Error(`xgw start on a: ${started.stderr}`);
}, 120_000);

afterAll(async () => {
  if (two) await runTool('xgw', ['stop'], envs.a);
  await closeThreadStores();
  await Promise.allSettled([telegram?.close(), llm?.close()]);
  await two?.stop();
});

/** Tells the agent `text` on a's Telegram, runs its turn on b, and returns its conversation's thread name. */
async function ask(text: string): Promise<string> {
  const inbox = await store.open('agents/helper/inbox');
  try {
    const before = (await inbox.info()).events;
    telegram.queueUpdate(textUpdate({ from: PEER, text }));
    await waitFor(async () => (await inbox.info()).events > before, 'the message in the inbox', 15_000, 20);
  } finally {
    await inbox.close();
  }
  expect(await runAgent('helper', { home: hosts.b.home, env: envs.b })).toMatchObject({ handled: 1, replied: 1 });
  const [name] = (await store.list()).filter((thread) => thread.startsWith('agents/helper/threads/peers/'));
  return name!;
}

/** The conversation's deliveries as stored: where they run, and their handler. */
async function outbound(thread: string): Promise<{ run_on: string; handler: string }> {
  const [row] = await admin<{ run_on: string; handler: string }[]>`
    SELECT c.run_on, c.handler FROM theclaw.consumers c JOIN theclaw.threads t ON t.thread = c.thread WHERE t.name = ${thread} AND c.consumer = 'outbound'`;
  return row!;
}

/** Delivers the conversation's replies on a, as a's notifier would: with what its handler carries. */
async function deliverOnA(thread: string) {
  const carried = /--max-attempts (\d+)/.exec((await outbound(thread)).handler);
  return deliverReplies({ consumer: 'outbound', home: hosts.a.home, env: { ...envs.a, THECLAW_THREAD: thread }, ...(carried ? { maxAttempts: Number(carried[1]) } : {}) });
}

describe.skipIf(unavailable !== null)(`replies delivered by another host than the agent's${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it("sends the text and the file an agent on host b attached through host a's Telegram, once, with no agent directory on a", async () => {
    const thread = await ask('send me the report');
    // a's notifier runs it: the conversation's deliveries go with the channel's owner.
    expect(await outbound(thread)).toMatchObject({ run_on: 'channel:telegram:main', handler: expect.stringMatching(/deliver --consumer outbound --max-attempts 2$/) });

    expect(await deliverOnA(thread)).toEqual({ delivered: 1, skipped: 0, failed: false });
    expect(await deliverOnA(thread)).toEqual({ delivered: 0, skipped: 0, failed: false });
    expect(telegram.sent.map((sent) => sent.file ?? sent.text)).toEqual(['Here is the report.', { kind: 'document', name: 'report.txt', bytes: Buffer.from(REPORT) }]);
    expect(existsSync(join(hosts.a.home, 'agents', 'helper'))).toBe(false);
  });

  it("retries a refused send and gives it up after the agent's deliver.max_attempts, told and kept on a for theclaw retry", async () => {
    const thread = await ask('ping');
    const sentBefore = telegram.sent.length;
    for (let n = 0; n < 2; n++) telegram.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
    expect(await deliverOnA(thread)).toEqual({ delivered: 0, skipped: 0, failed: true });
    expect(await deliverOnA(thread)).toEqual({ delivered: 0, skipped: 1, failed: false });
    expect(telegram.sent.length).toBe(sentBefore);

    const conversation = await store.open(thread);
    const [record] = await conversation.peek({ filter: "type = 'record' AND subtype = 'error'" });
    expect(JSON.parse(record!.content)).toMatchObject({ stage: 'deliver', error: expect.stringContaining('not delivered after 2 attempt(s)') });
    expect(await conversation.consumer('outbound')).toMatchObject({ pending: 0 });
    await conversation.close();
    const feed = await store.open('feeds/errors');
    expect((await feed.peek()).map((event) => JSON.parse(event.content))).toEqual([
      expect.objectContaining({ agent: 'helper', stage: 'deliver', reason: 'the reply was not delivered after 2 attempt(s)' }),
    ]);
    await feed.close();
    expect(readFileSync(join(hosts.a.home, 'logs', 'deliver.log'), 'utf8')).toMatch(/gave up on event \d+ of agents\/helper\/threads\/peers\//);

    // Kept on a, where `theclaw retry` sends it once the person can be reached again.
    expect(await resendGivenUp(hosts.a.home, envs.a)).toEqual([{ agent: 'helper', thread, event_id: expect.any(Number), outcome: 'sent' }]);
    expect(telegram.sent.slice(sentBefore).map((sent) => sent.text)).toEqual(['pong']);
    expect(await resendGivenUp(hosts.a.home, envs.a)).toEqual([]);
    expect(existsSync(join(hosts.a.home, 'agents', 'helper'))).toBe(false);
  });

  it("passes an answer into the asking agent's inbox from a host without the answering agent's directory", async () => {
    await initAgent(hosts.a.home, 'asker', {}, envs.a);
    await startAgent(hosts.a.home, 'asker', envs.a);
    // asker's command asked helper, from asker's conversation with ann (agent send in its turn).
    const askEnv = { ...envs.b, THECLAW_AGENT: 'asker', THECLAW_CONVERSATION: 'peer-terminal.local.ann', THECLAW_ASKING_EVENT: '1' };
    await sendToAgent(hosts.b.home, 'helper', { text: 'what is 6*7?', env: askEnv });
    expect(await runAgent('helper', { home: hosts.b.home, env: envs.b })).toMatchObject({ handled: 1, replied: 1 });
    const helperInbox = await store.open('agents/helper/inbox');
    const [question] = await helperInbox.peek({ last: 1 });
    await helperInbox.close();
    const thread = threadName(hosts.b.home, routeMessage(agentDir(hosts.b.home, 'helper'), 'per-peer', question!.source).path);
    expect(await outbound(thread)).toMatchObject({ run_on: null });

    expect(await deliverOnA(thread)).toEqual({ delivered: 1, skipped: 0, failed: false });
    const inbox = await store.open('agents/asker/inbox');
    const answers = (await inbox.peek()).filter((event) => event.source.startsWith('internal:'));
    await inbox.close();
    expect(answers.map((event) => [event.source, JSON.parse(event.content).text])).toEqual([['internal:reply:peer-terminal.local.ann:helper', 'pong']]);
    expect(existsSync(join(hosts.a.home, 'agents', 'helper'))).toBe(false);
  });

  it("runs a task's result on the asker's host, which keeps the task, and an answer to another agent on any", async () => {
    const cases = [
      ['task', 'agent:asker'],
      ['reply', null],
    ] as const;
    for (const [conversationType, runOn] of cases) {
      const name = `agents/helper/threads/agents/${conversationType}`;
      const thread = await store.open(name, { create: true });
      await subscribeOutbound(thread, formatAddress({ kind: 'internal', conversationType, conversationId: 'c1', agentId: 'asker' }), 'helper', 3);
      await thread.close();
      expect(await outbound(name)).toEqual({ run_on: runOn, handler: expect.stringMatching(/deliver --consumer outbound$/) });
    }
  });
});
