import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { userInfo } from 'node:os';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { parseMessageContent } from '../../core/message.js';
import { completionRequests, createTestHome, startFakeOpenAI, systemPromptOf, threadEvents, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../../testing/index.js';
import { SUMMARISER_PROMPT } from '../turn/compaction.js';
import { CONDENSE_PROMPT } from '../turn/memory-condense.js';
import { FLUSH_PROMPT } from '../turn/memory-flush.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';

// Spend caps in `agent run`, against a loopback server speaking the OpenAI wire protocol: each
// call reports 450 tokens; the model's largest answer is 50, so a call reserves about 55.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
const telegram = (peer: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: peer, peerId: peer });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI({ defaultStep: { kind: 'text', text: 'an answer', usage: { input: 400, output: 50 } } });
  writeFakePaiConfig(t.home, server, { modelFields: 'max_output_tokens: 50' });
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

function setBudget(budget: Record<string, number>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, budget }));
}

const messages = (source: string) => threadEvents(t.home, routeMessage(dir, 'per-peer', source).path, "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content));
const calls = () => server.requests.filter((request) => request.path === '/v1/chat/completions').length;

describe('spend caps', () => {
  it("answers until the day's tokens would pass the cap, then gives a notice without calling the model, and tells the owner once", async () => {
    setBudget({ daily_tokens: 940 });
    for (const text of ['one', 'two', 'three', 'four']) {
      await sendToAgent(t.home, 'helper', { text, source: owner });
      await runAgent('helper', { home: t.home, env: t.env });
    }
    expect(calls()).toBe(2); // 450 + 450 spent: the third, reserving 52, would pass the 940
    const said = messages(owner);
    expect(said.filter((m) => !m.notice).map((m) => m.text)).toEqual(['an answer', 'an answer']);
    expect(said.filter((m) => m.notice === 'error').map((m) => m.text)).toEqual([
      "I could not answer: today's budget of 940 tokens is used up. The owner has been told.",
      "I could not answer: today's budget of 940 tokens is used up. The owner has been told.",
    ]);
    expect(said.filter((m) => m.notice === 'approval').map((m) => m.text)).toEqual([
      "helper stopped answering for today: today's budget of 940 tokens is used up (budget.daily_tokens in its config.yaml). Messages get a notice until tomorrow (UTC).",
    ]);
  });

  it("caps each person's share: one past it gets the notice, another is still answered", async () => {
    setBudget({ per_peer_daily_tokens: 500 });
    await sendToAgent(t.home, 'helper', { text: 'a1', source: telegram('1') });
    await runAgent('helper', { home: t.home, env: t.env });
    await sendToAgent(t.home, 'helper', { text: 'a2', source: telegram('1') }); // 450 + 51 > 500
    await sendToAgent(t.home, 'helper', { text: 'b1', source: telegram('2') });
    await runAgent('helper', { home: t.home, env: t.env });
    expect(calls()).toBe(2);
    expect(messages(telegram('1')).map((m) => m.text)).toEqual(['an answer', "I could not answer: your share of today's budget (500 tokens) is used up. The owner has been told."]);
    expect(messages(telegram('2')).map((m) => m.text)).toEqual(['an answer']);
  });
});

describe('spend caps and the upkeep calls', () => {
  // Compacting as soon as more than 2 messages wait: the third turn folds the first ones, the
  // summariser and the memory flush each a call of their own.
  function compactEarly(budget: Record<string, number>, extra: Record<string, unknown> = {}): void {
    const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
    writeFileSync(dir.config, stringify({ ...config, budget, context: { recent_messages: 2, keep_recent: 1, ...extra } }));
  }
  const path = () => routeMessage(dir, 'per-peer', owner).path;
  const records = (subtype: string) => threadEvents(t.home, path(), `type = 'record' AND subtype = '${subtype}'`).map((event) => JSON.parse(event.content) as Record<string, unknown>);
  const ledgerTotal = () => {
    const db = new Database(dir.state, { readonly: true });
    try {
      return db.prepare('SELECT COALESCE(SUM(tokens), 0) FROM spend').pluck().get() as number;
    } finally {
      db.close();
    }
  };
  const systems = () => completionRequests(server).map(systemPromptOf);
  const say = async (text: string) => {
    await sendToAgent(t.home, 'helper', { text, source: owner });
    await runAgent('helper', { home: t.home, env: t.env });
  };

  it("records the compaction's summary and the memory flush as usage with their purpose, counted by the ledger and /usage", async () => {
    compactEarly({ daily_tokens: 100_000 });
    for (const text of ['one', 'two', 'three']) await say(text);
    expect(systems().filter((system) => system === SUMMARISER_PROMPT)).toHaveLength(1);
    expect(systems().filter((system) => system === FLUSH_PROMPT)).toHaveLength(1);
    const usage = records('usage');
    expect(usage).toHaveLength(5); // three answers, the summary, the flush
    expect(usage.map((record) => record.purpose ?? 'answer').sort()).toEqual(['answer', 'answer', 'answer', 'compaction', 'memory_flush']);
    // All charged to the person the turns were for: their per-peer cap counts the upkeep too.
    const db = new Database(dir.state, { readonly: true });
    try {
      expect(db.prepare('SELECT peer, tokens FROM spend').all()).toEqual([{ peer: routeMessage(dir, 'per-peer', owner).peerKey, tokens: 5 * 450 }]);
    } finally {
      db.close();
    }
    await say('/usage');
    expect(messages(owner).at(-1)!.text).toMatch(/In total: 5 model calls, 2,000 in \+ 250 out tokens, .*\nOf these in total, summaries and memory upkeep: 2 model calls, 800 in \+ 100 out tokens/);
  });

  it('makes no upkeep call that would pass the cap: the answer still goes out with the fallbacks, the next message gets the notice', async () => {
    // 900 spent after two answers; the third reserves 51 (951), a summary or flush 50 and its input more.
    compactEarly({ daily_tokens: 1_000 }, { memory_caps: { agent: 100 } });
    await say('one');
    await say('two');
    // A memory file over its cap: its rewrite after the answer would pass the cap too.
    writeFileSync(join(dir.memory, 'agent.md'), `- ${'a lasting note. '.repeat(60)}\n`);
    await say('three');
    expect(calls()).toBe(3);
    expect(systems().filter((system) => [SUMMARISER_PROMPT, FLUSH_PROMPT, CONDENSE_PROMPT].includes(system))).toEqual([]); // only the turns' own calls
    expect(messages(owner).map((m) => m.text)).toEqual(['an answer', 'an answer', 'an answer']);
    expect(records('compaction')).toEqual([]);
    expect(records('error').map((record) => [record.stage, record.severity, record.kind])).toEqual(
      expect.arrayContaining([
        ['compaction', 'warning', 'over_budget'],
        ['memory', 'warning', 'over_budget'],
      ]),
    );
    expect(records('error').find((record) => record.stage === 'compaction')!.error).toMatch(/not made: today's budget of 1,000 tokens is used up/);
    expect(ledgerTotal()).toBe(3 * 450);
    // The rewrite was put off, not used up: the file's version is not claimed.
    const db = new Database(dir.state, { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) FROM memory_condensed').pluck().get()).toBe(0);
    } finally {
      db.close();
    }
    await say('four');
    expect(calls()).toBe(3);
    expect(messages(owner).at(-1)).toMatchObject({ notice: 'error', text: "I could not answer: today's budget of 1,000 tokens is used up. The owner has been told." });
  });
});
