import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, startFakeOpenAI, threadEvents, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import type { AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';

// Spend caps in `agent run`, against a loopback server speaking the OpenAI wire protocol: each
// call reports 450 tokens; the model's largest answer is 50, so a call reserves about 55.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
const telegram = (peer: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: peer, peerId: peer });

beforeEach(async () => {
  t = createTestHome();
  dir = initAgent(t.home, 'helper');
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
      sendToAgent(t.home, 'helper', { text, source: owner });
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
    sendToAgent(t.home, 'helper', { text: 'a1', source: telegram('1') });
    await runAgent('helper', { home: t.home, env: t.env });
    sendToAgent(t.home, 'helper', { text: 'a2', source: telegram('1') }); // 450 + 51 > 500
    sendToAgent(t.home, 'helper', { text: 'b1', source: telegram('2') });
    await runAgent('helper', { home: t.home, env: t.env });
    expect(calls()).toBe(2);
    expect(messages(telegram('1')).map((m) => m.text)).toEqual(['an answer', "I could not answer: your share of today's budget (500 tokens) is used up. The owner has been told."]);
    expect(messages(telegram('2')).map((m) => m.text)).toEqual(['an answer']);
  });
});
