import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import type { XgwRequest } from '../xgw/index.js';
import { createTestHome, listenAsXgw, startFakeOpenAI, threadEvents, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome, type XgwListener } from '../testing/index.js';
import type { AgentDir } from './agent-dir.js';
import { SUMMARISER_PROMPT } from './turn/compaction.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';

// The session's chat commands (/model, /think, /verbose): stored per conversation, used by its next turn, which the
// fake model server's recorded requests show.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;

const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: 'ann', peerId: 'ann' });
const peer = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: '5151', peerId: '5151' });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server);
  // Two models at the fake provider: the agent (on pai's default) may use either.
  writeFileSync(
    join(t.home, 'pai', 'config.yaml'),
    ['default: fake/m1', 'providers:', `  fake: { api: openai-completions, base_url: "${server.url}", models: [{ id: m1 }, { id: m2 }] }`, 'timeout_seconds: 2', ''].join('\n'),
  );
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

const send = (text: string, source = owner) => sendToAgent(t.home, 'helper', { text, source });
const run = () => runAgent('helper', { home: t.home, env: t.env });
const completions = () => server.requests.filter((request) => request.path === '/v1/chat/completions');
const lastModel = () => completions().at(-1)!.body.model as string;
const lastReply = (source = owner) =>
  threadEvents(t.home, routeMessage(dir, 'per-peer', source).path, "type = 'message' AND source = 'self'")
    .map((event) => parseMessageContent(event.content).text)
    .at(-1)!;

describe('chat commands: /model', () => {
  it("lists the allowed models, switches this conversation's turns to one, shows it in /status, and /model default goes back", async () => {
    await send('/model');
    await run();
    expect(lastReply().split('\n')).toEqual(["Model: fake/m1 (the agent's)", 'Allowed:', '- fake/m1', '- fake/m2', 'Switch with /model <name>; /model default goes back.']);

    await send('/model m2');
    await send('hello');
    await run();
    expect(lastModel()).toBe('m2');
    await send('/status');
    await run();
    expect(lastReply().split('\n')[1]).toBe('Model: fake/m2');

    // Another conversation keeps the agent's model.
    await send('hello', peer);
    await run();
    expect(lastModel()).toBe('m1');

    await send('/model nosuch');
    await run();
    expect(lastReply()).toBe("Error: nosuch is not one of this agent's models - pick one of: fake/m1, fake/m2");
    await send('/model default');
    await send('hello again');
    await run();
    expect(lastModel()).toBe('m1');
    expect(completions()).toHaveLength(3);
  });

  it('refuses /model to anyone but the owner, and their turns keep the model', async () => {
    await send('/model fake/m2', peer);
    await send('hi', peer);
    await run();
    expect(lastModel()).toBe('m1');
    const texts = threadEvents(t.home, routeMessage(dir, 'per-peer', peer).path, "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content).text);
    expect(texts[0]).toBe('Error: only the owner may use /model (it changes what the agent costs) - ask the owner');
  });
});

describe('chat commands: /think', () => {
  it("asks this conversation's turns for pi-ai's reasoning level, shows it in /status, and /think off stops asking", async () => {
    await send('hello');
    await run();
    expect(completions().at(-1)!.body.reasoning_effort).toBeUndefined();

    await send('/think high');
    await send('hello');
    await run();
    expect(lastReply()).toBe('echo: hello');
    expect(completions().at(-1)!.body.reasoning_effort).toBe('high');
    await send('/status');
    await run();
    expect(lastReply().split('\n')[2]).toBe('Thinking: high');

    // Another conversation is not asked to think; its person may not change that.
    await send('/think medium', peer);
    await send('hello', peer);
    await run();
    expect(completions().at(-1)!.body.reasoning_effort).toBeUndefined();
    expect(lastReply(peer)).toBe('echo: hello');

    await send('/think loud');
    await run();
    expect(lastReply()).toBe('Error: loud is not a thinking level - use /think off|low|medium|high');
    await send('/think off');
    await send('hello');
    await run();
    expect(completions().at(-1)!.body.reasoning_effort).toBeUndefined();
    expect(completions()).toHaveLength(4);
  });
});

describe('chat commands: /verbose', () => {
  let xgw: XgwListener;
  let told: XgwRequest[];

  beforeEach(async () => {
    // Stands in for xgw's control socket: it takes the progress the turns tell it.
    xgw = await listenAsXgw(t.home);
    told = xgw.told;
  });

  afterEach(async () => {
    await xgw.close();
  });

  const shownCommands = () => told.flatMap((request) => (request.op === 'tool_progress' ? [(request as { command: string }).command] : []));
  const turnWith = async (command: string) => {
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command } }, { kind: 'text', text: 'done' });
    await send('go');
    await run();
  };

  it('shows this chat the commands a turn runs until /verbose off, and again after /verbose on; /status says which', async () => {
    await turnWith('echo one');
    await waitFor(() => shownCommands().length === 1, 'the first command shown');
    await send('/verbose off');
    await run();
    expect(lastReply()).toBe('The commands the agent runs are no longer shown in this chat.');
    await turnWith('echo two');
    await send('/status');
    await run();
    expect(lastReply().split('\n')[3]).toBe('Verbose: off');
    await send('/verbose on');
    await turnWith('echo three');
    await waitFor(() => shownCommands().length >= 2, 'the third command shown');
    expect(shownCommands()).toEqual(['echo one', 'echo three']);
  });
});

describe('chat commands: /compact', () => {
  it('folds the conversation into its summary now, with the instructions given to the summariser, and the next turn carries only what was kept', async () => {
    const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
    writeFileSync(dir.config, stringify({ ...config, context: { keep_recent: 1 } }));
    for (const text of ['one', 'two']) {
      await send(text);
      await run();
    }
    server.enqueue({ kind: 'text', text: 'SUMMARY: the user counted to two.' });
    await send('/compact keep every number');
    await run();
    const summariser = completions().at(-1)!;
    const messages = summariser.body.messages as { role: string; content: string }[];
    expect(messages[0]!.content).toBe(`${SUMMARISER_PROMPT}\nThe person also asked of this summary: keep every number`);
    expect(messages[1]!.content).toBe('Conversation to add:\nUser: one\nAssistant: echo: one\nUser: two');
    expect(lastReply()).toMatch(/^Compacted the conversation up to its last message into its summary \(memory\/thread-.+\.md, 33 characters\)\.$/);

    await send('three');
    await run();
    const next = completions().at(-1)!;
    expect((next.body.messages as { role: string; content: string }[]).filter((message) => message.role !== 'system').map((message) => message.content)).toEqual(['echo: two', 'three']);
    expect(next.body.messages[0].content).toContain('SUMMARY: the user counted to two.');
  });
});
