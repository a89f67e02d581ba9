import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress, parseAddress, type ExternalAddress } from '../core/address.js';
import { tryLock } from '../core/lock.js';
import { isAlive } from '../core/process.js';
import { formatMessageContent, parseMessageContent } from '../core/message.js';
import { readSession } from '../pai/index.js';
import {
  BWRAP,
  NEEDS_BWRAP,
  threadEvents,
  waitFor,
  createTestHome,
  runTool,
  startFakeOpenAI,
  writeFakePaiConfig,
  conversationOf,
  type FakeLlmOptions,
  type FakeLlmServer,
  type FakeStep,
  type LooseJson,
  type TestHome,
} from '../testing/index.js';
import { openThread, type ThreadEvent } from '../thread/index.js';
import { agentDir, type AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import type { ErrorRecord, ToolcallRecord, UsageRecord } from './types.js';

// `agent run` against a loopback server speaking the OpenAI wire protocol: the batch logic
// in-process (runAgent), and the real CLI where the process matters (locks).

let t: TestHome;
let dir: AgentDir;
const servers: FakeLlmServer[] = [];
const user = userInfo().username;
const terminal = (peer = user) => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  t.cleanup();
});

async function fakeServer(options: FakeLlmOptions = {}, contextWindow = 100_000): Promise<FakeLlmServer> {
  const server = await startFakeOpenAI(options);
  servers.push(server);
  writeFakePaiConfig(t.home, server, { contextWindow, modelFields: 'cost: { input: 1000, output: 2000 }' });
  return server;
}

function setAgentConfig(patch: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, ...patch }));
}

const send = (text: string, source = terminal()) => sendToAgent(t.home, 'helper', { text, source });
const run = () => runAgent('helper', { home: t.home, env: t.env });
const threadOf = (source = terminal()) => routeMessage(dir, 'per-peer', source);

const events = (path: string, filter?: string): ThreadEvent[] => threadEvents(t.home, path, filter);

function consumer(path: string, name: string) {
  const thread = openThread(path, { home: t.home });
  try {
    return thread.consumer(name);
  } finally {
    thread.close();
  }
}

const messages = (path: string) => events(path, "type = 'message'");
const replies = (path: string) => events(path, "type = 'message' AND source = 'self'").map((event) => ({ event, content: parseMessageContent(event.content) }));
const records = <T>(path: string, subtype: string) => events(path, `type = 'record' AND subtype = '${subtype}'`).map((event) => JSON.parse(event.content) as T);
const completions = (server: FakeLlmServer) => server.requests.filter((request) => request.path === '/v1/chat/completions');
const systemOf = (request: { body: LooseJson }) => (request.body.messages as LooseJson[]).find((message) => message.role === 'system')?.content as string;
const textsOf = (request: { body: LooseJson }) => (request.body.messages as LooseJson[]).map((message) => (typeof message.content === 'string' ? message.content : '')).join('\n');

describe('agent run: one message', () => {
  it('records the inbound message, the tool call and usage, and a reply that answers it, with the context it built', async () => {
    const server = await fakeServer();
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo marker-$((6*7))', comment: 'compute' } }, { kind: 'text', text: 'It is 42.' });
    writeFileSync(join(dir.memory, 'agent.md'), 'AGENT-MEMORY: prefer short answers\n');
    const route = threadOf();
    writeFileSync(join(dir.memory, `user-${route.peerKey}.md`), 'PERSON-MEMORY: likes cats\n');
    writeFileSync(join(dir.memory, 'user-telegram.main.99.md'), 'SOMEONE-ELSE\n');
    writeFileSync(dir.identity, '# helper\n\nIDENTITY-MARK: I am a test agent.\n');
    const inboxId = await send('what is 6*7?');

    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });

    const all = events(route.path);
    expect(all.map((event) => [event.type, event.subtype, event.source])).toEqual([
      ['message', null, terminal()],
      ['record', 'attempt', 'self'],
      ['record', 'usage', 'self'],
      ['record', 'toolcall', 'self'],
      ['record', 'usage', 'self'],
      ['message', null, 'self'],
    ]);
    const inbound = all[0]!;
    const inboundContent = parseMessageContent(inbound.content);
    expect(inboundContent.text).toBe('what is 6*7?');
    const [toolcall] = records<ToolcallRecord>(route.path, 'toolcall');
    expect(toolcall).toEqual({ in_reply_to: inbound.id, command: 'echo marker-$((6*7))', comment: 'compute', exit_code: 0, output: 'marker-42\n', duration_ms: expect.any(Number) });
    const usage = records<UsageRecord>(route.path, 'usage');
    expect(usage).toHaveLength(2);
    for (const [index, record] of usage.entries()) {
      expect(record).toMatchObject({ in_reply_to: inbound.id, provider: 'fake', model: 'm1' });
      expect(record.input_tokens).toBe(Math.ceil(completions(server)[index]!.bytes / 4));
      expect(record.output_tokens).toBeGreaterThan(0);
      expect(record.cost).toBeCloseTo((record.input_tokens * 1000 + record.output_tokens * 2000) / 1e6, 9);
      expect(record.duration_ms).toBeGreaterThanOrEqual(0);
    }
    const [reply] = replies(route.path);
    expect(reply!.content).toEqual({ text: 'It is 42.', attachments: [], reply_context: inboundContent.reply_context, in_reply_to: inbound.id });
    expect(reply!.content.reply_context).toEqual({ kind: 'external', channel_id: 'terminal:local', conversation_type: 'dm', conversation_id: user, peer_id: user });

    // The context the model saw: identity, memory layers of this agent and this person, runtime facts.
    const [first, second] = completions(server);
    const system = systemOf(first!);
    expect(system).toMatch(/^# helper\n\nIDENTITY-MARK: I am a test agent\./);
    expect(system).toContain('AGENT-MEMORY: prefer short answers');
    expect(system).toContain('PERSON-MEMORY: likes cats');
    expect(system).not.toContain('SOMEONE-ELSE');
    expect(system).toContain('## Runtime');
    expect(system).toContain(`- agent: helper (directory ${dir.root}; workdir ${dir.workdir})`);
    expect(system).toContain(`- from: ${user} via terminal:local (dm ${user})`);
    expect(system).toContain(`- thread: ${route.threadId}`);
    expect(first!.body.tools.map((tool: LooseJson) => tool.function.name)).toEqual(['bash_exec']);
    expect(first!.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'what is 6*7?' });
    // The tool result went back to the model.
    expect(JSON.parse(second!.body.messages.at(-1).content)).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });

    // The session file is the call's workspace.
    const session = readSession(join(dir.sessions, `${route.threadId}.jsonl`));
    expect(session.map((line) => line.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(session.at(-1)).toMatchObject({ role: 'assistant', content: 'It is 42.' });

    // The inbox is acknowledged; the new thread has the outbound consumer with one reply waiting.
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: inboxId, pending: 0 });
    const outbound = consumer(route.path, 'outbound');
    expect(outbound).toMatchObject({ subscribed: true, filter: "type = 'message' AND source = 'self'", pending: 1 });
    expect(outbound!.handler).toMatch(/ deliver --consumer outbound$/); // its thread comes from THECLAW_THREAD: the home can move

    // The next message carries the earlier turn as history, not the records.
    await send('and 7*7?');
    await run();
    const third = completions(server).at(-1)!;
    expect(third.body.messages.filter((message: LooseJson) => message.role !== 'system').map((message: LooseJson) => [message.role, message.content])).toEqual([
      ['user', 'what is 6*7?'],
      ['assistant', 'It is 42.'],
      ['user', 'and 7*7?'],
    ]);
    expect(replies(route.path).map((r) => r.content.text)).toEqual(['It is 42.', 'echo: and 7*7?']);
  });

  it('records NO_REPLY as a decision and leaves nothing to deliver', async () => {
    const server = await fakeServer();
    server.enqueue({ kind: 'text', text: 'NO_REPLY' });
    await send('ok, thanks');
    expect(await run()).toEqual({ handled: 1, replied: 0, errors: 0 });
    const route = threadOf();
    const inbound = messages(route.path)[0]!;
    expect(records(route.path, 'decision')).toEqual([{ in_reply_to: inbound.id, decision: 'no_reply' }]);
    expect(replies(route.path)).toEqual([]);
    expect(consumer(route.path, 'outbound')).toMatchObject({ subscribed: true, pending: 0 });
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ pending: 0 });
  });

  it('does nothing, and calls no model, when the inbox is empty', async () => {
    const server = await fakeServer();
    expect(await run()).toEqual({ handled: 0, replied: 0, errors: 0 });
    expect(server.requests).toEqual([]);
    expect(existsSync(dir.runLock)).toBe(false);
  });
});

describe('agent run: errors', () => {
  it('records an unrecoverable 401 as an error without retrying, tells the person, and still answers the next message', async () => {
    const server = await fakeServer();
    server.enqueue({ kind: 'error', status: 401, message: 'Incorrect API key provided.' });
    await send('first');
    await send('second');
    expect(await run()).toEqual({ handled: 2, replied: 1, errors: 1 });
    const route = threadOf();
    const [first, second] = messages(route.path).filter((event) => event.source !== 'self');
    const [error] = records<ErrorRecord>(route.path, 'error');
    expect(error).toMatchObject({ in_reply_to: first!.id, stage: 'llm', kind: 'auth', status: 401 });
    expect(error!.error).toMatch(/\S/);
    expect(replies(route.path).map((r) => [r.content.in_reply_to, r.content.notice, r.content.text])).toEqual([
      [first!.id, 'error', 'I could not answer: the model refused the request (401). The owner has been told.'],
      [second!.id, undefined, 'echo: second'],
    ]);
    expect(completions(server)).toHaveLength(2);
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: 2, pending: 0 });
    expect(readFileSync(dir.log, 'utf8')).toMatch(/\[ERROR\] run: no answer to thread .* event \d+/);
  });

  it('waits as long as Retry-After asks after a 429, then answers', async () => {
    const server = await fakeServer();
    server.enqueue({ kind: 'error', status: 429, retryAfterSeconds: 0.4 });
    await send('hello');
    const started = Date.now();
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(completions(server)).toHaveLength(2);
    expect(records(threadOf().path, 'error')).toEqual([]);
    expect(replies(threadOf().path).map((r) => r.content.text)).toEqual(['echo: hello']);
    expect(readFileSync(dir.log, 'utf8')).toMatch(/\[WARN\] run: retry 1 of the model call for thread .* in 400 ms \(rate_limit, HTTP 429\)/);
  });

  it('gives each sender of a shared (per-channel) thread their own memory, and answers each of them', async () => {
    const server = await fakeServer();
    setAgentConfig({ routing: { default: 'per-channel' } });
    const alice = terminal('alice');
    const bob = terminal('bob');
    writeFileSync(join(dir.memory, `user-${routeMessage(dir, 'per-peer', alice).peerKey}.md`), 'alice likes tea\n');
    writeFileSync(join(dir.memory, `user-${routeMessage(dir, 'per-peer', bob).peerKey}.md`), 'bob likes coffee\n');
    await send('hi from alice', alice);
    await send('hi from bob', bob);
    expect(await run()).toEqual({ handled: 2, replied: 2, errors: 0 });
    const systems = completions(server).map((request) => JSON.stringify(request.body.messages[0]));
    expect(systems[0]).toContain('alice likes tea');
    expect(systems[0]).not.toContain('bob likes coffee');
    expect(systems[1]).toContain('bob likes coffee');
    expect(systems[1]).not.toContain('alice likes tea');
  });

  it('sends the answer where the source says, whatever reply_context the content claims', async () => {
    await fakeServer();
    const inbox = openThread(dir.inbox, { home: t.home });
    inbox.push({
      source: terminal('alice'),
      type: 'message',
      content: JSON.stringify({ text: 'hello', reply_context: { kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: '666', peer_id: '666', message_id: '1' } }),
    });
    inbox.close();
    await run();
    const [reply] = replies(threadOf(terminal('alice')).path);
    expect(reply!.content.reply_context).toEqual({ kind: 'external', channel_id: 'terminal:local', conversation_type: 'dm', conversation_id: 'alice', peer_id: 'alice' });
  });

  it("records a model that cannot be resolved as each message's error and acknowledges them", async () => {
    await fakeServer();
    setAgentConfig({ pai: { provider: 'nosuch', model: 'x' } });
    await send('first');
    await send('second');
    expect(await run()).toEqual({ handled: 2, replied: 0, errors: 2 });
    expect(records<ErrorRecord>(threadOf().path, 'error')).toEqual([
      expect.objectContaining({ stage: 'llm', error: expect.stringContaining('unknown provider nosuch') }),
      expect.objectContaining({ stage: 'llm', error: expect.stringContaining('unknown provider nosuch') }),
    ]);
    expect(await run()).toEqual({ handled: 0, replied: 0, errors: 0 });
  });

  it('retries recoverable errors only as often as the agent config says, then leaves the message (and the next) waiting for the model', async () => {
    const server = await fakeServer();
    setAgentConfig({ retry: { max_attempts: 2 } });
    server.enqueue({ kind: 'error', status: 500 }, { kind: 'error', status: 503 }, { kind: 'text', text: 'answered once the model is back' });
    await send('first');
    await send('second');
    await expect(run()).rejects.toMatchObject({ name: 'ModelOutage', kind: 'upstream' });
    expect(completions(server)).toHaveLength(2);
    expect(records<ErrorRecord>(threadOf().path, 'error')).toEqual([]);
    expect(replies(threadOf().path)).toEqual([]);
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: 0, pending: 2 });
    expect(await run()).toEqual({ handled: 2, replied: 2, errors: 0 });
    expect(replies(threadOf().path).map((r) => r.content.text)).toEqual(['answered once the model is back', 'echo: second']);
  });

  it('skips a message whose source cannot be routed, acknowledging it, and answers the rest', async () => {
    await fakeServer();
    const inbox = openThread(dir.inbox, { home: t.home });
    inbox.push({ source: 'external:broken', type: 'message', content: '{"text":"x"}' });
    inbox.close();
    await send('fine');
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: 2, pending: 0 });
    expect(readFileSync(dir.log, 'utf8')).toContain('inbox event 1 cannot be routed');
  });
});

describe('agent run: a conversation is a conversation', () => {
  const telegram = (peer: string, conversationType = 'dm', conversationId = peer) =>
    formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType, conversationId, peerId: peer });
  /** Pushes a message as xgw does: with the platform's message id in its reply context. */
  function receive(source: string, text: string, messageId: string): void {
    const address = parseAddress(source) as ExternalAddress;
    const reply_context = {
      kind: 'external' as const,
      channel_id: `${address.channelType}:${address.instance}`,
      conversation_type: address.conversationType,
      conversation_id: address.conversationId,
      peer_id: address.peerId,
      message_id: messageId,
    };
    const inbox = openThread(dir.inbox, { home: t.home });
    inbox.push({ source, type: 'message', content: formatMessageContent({ text, attachments: [], reply_context }) });
    inbox.close();
  }
  /** Pushes another agent's answer to a question our thread asked, as agent deliver does. */
  function answer(threadId: string, text: string, askingEventId?: number): void {
    const reply_context = { kind: 'internal' as const, conversation_type: 'reply', conversation_id: threadId, agent_id: 'expert', ...(askingEventId ? { asking_event_id: askingEventId } : {}) };
    const inbox = openThread(dir.inbox, { home: t.home });
    inbox.push({ source: `internal:reply:${threadId}:expert`, type: 'message', content: formatMessageContent({ text, attachments: [], reply_context }) });
    inbox.close();
  }

  it("answers a group in the group, with the group's memory and none of a member's direct messages or memory", async () => {
    const server = await fakeServer();
    const dm = telegram('42');
    const group = telegram('42', 'group', '-100');
    writeFileSync(join(dir.memory, `user-${routeMessage(dir, 'per-peer', dm).peerKey}.md`), 'PERSON-MEMORY: PIN hint\n');
    writeFileSync(join(dir.memory, `group-${routeMessage(dir, 'per-peer', group).groupKey}.md`), 'GROUP-MEMORY: the chess club\n');
    receive(dm, 'my PIN is 4321', '1');
    await run();
    receive(group, 'hello everyone', '2');
    receive(telegram('43', 'group', '-100'), 'hi from 43', '3');
    expect(await run()).toEqual({ handled: 2, replied: 2, errors: 0 });

    const [dmRequest, ...groupRequests] = completions(server);
    expect(systemOf(dmRequest!)).toContain('PERSON-MEMORY');
    for (const request of groupRequests) {
      const text = JSON.stringify(request.body);
      expect(text).not.toContain('4321');
      expect(text).not.toContain('PERSON-MEMORY');
      expect(systemOf(request)).toContain('GROUP-MEMORY: the chess club');
      expect(systemOf(request)).toContain('- a group conversation: everyone in it reads my answer');
    }
    // Several people write in a group: the history names them.
    expect(textsOf(groupRequests[1]!)).toContain('[42 via telegram:main (group -100)] hello everyone');
    const groupThread = routeMessage(dir, 'per-peer', group);
    expect(groupThread.path).toBe(join(dir.threads, 'sessions', 'telegram.main.group.-100'));
    expect(replies(groupThread.path).map((r) => r.content.reply_context)).toEqual([
      { kind: 'external', channel_id: 'telegram:main', conversation_type: 'group', conversation_id: '-100', peer_id: '42', message_id: '2' },
      { kind: 'external', channel_id: 'telegram:main', conversation_type: 'group', conversation_id: '-100', peer_id: '43', message_id: '3' },
    ]);
    expect(replies(routeMessage(dir, 'per-peer', dm).path).map((r) => r.content.reply_context)).toEqual([
      { kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: '42', peer_id: '42', message_id: '1' },
    ]);
  });

  it("passes an agent's answer on to the message that asked, not to whoever wrote last; without one it is kept, and recorded", async () => {
    await fakeServer();
    setAgentConfig({ routing: { default: 'per-channel' } });
    const channel = routeMessage(dir, 'per-channel', telegram('alice'));
    receive(telegram('alice'), 'ask the expert about my PIN', '10');
    await run();
    receive(telegram('bob'), 'hello', '11');
    await run();
    const [asking] = messages(channel.path).filter((event) => event.source !== 'self');
    const ourReplyToBob = replies(channel.path)[1]!.event;

    answer(channel.threadId, 'the PIN is 9999', asking!.id);
    answer(channel.threadId, 'an answer asked by an older agent send');
    answer(channel.threadId, 'an answer naming a reply of ours', ourReplyToBob.id);
    answer(channel.threadId, 'an answer naming a message yet to come', 1_000);
    expect(await run()).toEqual({ handled: 4, replied: 4, errors: 0 });

    const relays = replies(channel.path).slice(2);
    expect(relays.map((r) => [r.content.text, r.content.reply_context])).toEqual([
      ['echo: the PIN is 9999', { kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: 'alice', peer_id: 'alice', message_id: '10' }],
      ['echo: an answer asked by an older agent send', undefined],
      ['echo: an answer naming a reply of ours', undefined],
      ['echo: an answer naming a message yet to come', undefined],
    ]);
    const problems = records<ErrorRecord>(channel.path, 'error');
    expect(problems).toEqual(
      relays
        .slice(1)
        .map((r) => expect.objectContaining({ in_reply_to: r.content.in_reply_to, stage: 'route', error: expect.stringMatching(/^the answer of agent expert names .*not passed on to anyone$/) })),
    );
    expect(readFileSync(dir.log, 'utf8')).toMatch(/\[WARN\] run: the answer in thread channel-telegram\.main to event \d+ is kept there: the answer of agent expert names no asking message/);
  });

  it('keeps the asking message of a question only when the question comes from the conversation it names', async () => {
    await fakeServer();
    const inbox = openThread(dir.inbox, { home: t.home });
    const claim = (conversation: string, agent: string) => ({ kind: 'internal', conversation_type: 'dm', conversation_id: conversation, agent_id: agent, asking_event_id: 5 });
    inbox.push({ source: 'internal:dm:peer-x:other', type: 'message', content: JSON.stringify({ text: 'honest', reply_context: claim('peer-x', 'other') }) });
    inbox.push({ source: 'internal:dm:peer-x:other', type: 'message', content: JSON.stringify({ text: 'another conversation', reply_context: claim('peer-y', 'other') }) });
    inbox.push({ source: 'internal:dm:peer-x:other', type: 'message', content: JSON.stringify({ text: 'another agent', reply_context: claim('peer-x', 'third') }) });
    inbox.close();
    await run();
    expect(replies(join(dir.threads, 'agents', 'other.dm.peer-x')).map((r) => r.content.reply_context)).toEqual([
      { kind: 'internal', conversation_type: 'dm', conversation_id: 'peer-x', agent_id: 'other', asking_event_id: 5 },
      { kind: 'internal', conversation_type: 'dm', conversation_id: 'peer-x', agent_id: 'other' },
      { kind: 'internal', conversation_type: 'dm', conversation_id: 'peer-x', agent_id: 'other' },
    ]);
  });
});

describe('agent run: concurrency and order', () => {
  it('handles different threads at once', async () => {
    const server = await fakeServer();
    // Each call is answered only once all three are at the server together (or, one at a time, after
    // the wait gives up): counted at the server, not timed, so a loaded machine cannot fail it. The
    // calls start apart by however long each conversation takes to prepare: pai waits for them.
    writeFakePaiConfig(t.home, server, { timeoutSeconds: 30 });
    const together: FakeStep = async (request) => {
      await waitFor(() => server.maxInFlight === 3, 'three calls at the model at once', 10_000).catch(() => {});
      return { kind: 'text', text: `echo: ${conversationOf(request).at(-1)}` };
    };
    server.enqueue(together, together, together);
    for (const peer of ['p1', 'p2', 'p3']) await send(`hello from ${peer}`, terminal(peer));
    expect(await run()).toEqual({ handled: 3, replied: 3, errors: 0 });
    expect(server.maxInFlight).toBe(3);
    for (const peer of ['p1', 'p2', 'p3']) expect(replies(threadOf(terminal(peer)).path).map((r) => r.content.text)).toEqual([`echo: hello from ${peer}`]);
    expect(completions(server)).toHaveLength(3);
  });

  it('answers messages that arrive while it runs in the same run, each conversation still in order, up to its batch size', async () => {
    const server = await fakeServer({ defaultDelayMs: 400 });
    setAgentConfig({ concurrency: 2 });
    await send('first', terminal('p1'));
    const running = runAgent('helper', { home: t.home, env: t.env, batchSize: 4 });
    await waitFor(() => completions(server).length === 1, "the first message's model call", 10_000);
    await send('second', terminal('p1'));
    await send('hello', terminal('p2'));
    await send('hi', terminal('p3'));
    await send('too many for this run', terminal('p4'));
    // p2 joins the free slot at once; p1's second waits behind its first; p3 takes the slot p2 frees.
    expect(await running).toEqual({ handled: 4, replied: 4, errors: 0 });
    expect(replies(threadOf(terminal('p1')).path).map((r) => r.content.text)).toEqual(['echo: first', 'echo: second']);
    for (const peer of ['p2', 'p3']) expect(replies(threadOf(terminal(peer)).path)).toHaveLength(1);
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: 4, pending: 1 });
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
  });

  it('answers the messages of one thread strictly in order, each with the previous answers in its context', async () => {
    const server = await fakeServer({ defaultDelayMs: 150 });
    setAgentConfig({ concurrency: 4 });
    await send('one');
    await send('two');
    await send('hello from elsewhere', terminal('other'));
    await send('three');
    const started = Date.now();
    expect(await run()).toEqual({ handled: 4, replied: 4, errors: 0 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(3 * 150);
    const route = threadOf();
    const inbound = messages(route.path).filter((event) => event.source !== 'self');
    expect(inbound.map((event) => parseMessageContent(event.content).text)).toEqual(['one', 'two', 'three']);
    const answered = replies(route.path);
    expect(answered.map((r) => r.content.in_reply_to)).toEqual(inbound.map((event) => event.id));
    expect(answered.map((r) => r.content.text)).toEqual(['echo: one', 'echo: two', 'echo: three']);
    // Each reply follows its own message in the thread: in → out → in → out → in → out.
    expect(messages(route.path).map((event) => event.source === 'self')).toEqual([false, true, false, true, false, true]);
    const mine = completions(server).filter((request) => systemOf(request).includes(`- thread: ${route.threadId}`));
    expect(mine.map((request) => textsOf(request).includes('echo: one'))).toEqual([false, true, true]);
    expect(mine.map((request) => textsOf(request).includes('echo: two'))).toEqual([false, false, true]);
    expect(consumer(dir.inbox, 'inbox')).toMatchObject({ progress: 4, pending: 0 });
  });
});

describe('agent run: the processes of a turn', () => {
  it("under the profile none, keeps what a command left running (setsid included) for the turn's next command, kills it when the turn ends, and leaves no turn noted", async () => {
    const server = await fakeServer();
    setAgentConfig({ sandbox: { profile: 'none' } });
    const pidFile = join(t.home, 'sleeper.pid');
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `setsid sleep 600 & echo $! > ${pidFile}; echo started` } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `kill -0 $(cat ${pidFile}) && echo alive` } },
      { kind: 'text', text: 'done' },
    );
    await send('start a server');
    expect(await run()).toMatchObject({ handled: 1, replied: 1 });

    const outputs = events(threadOf().path, "subtype = 'toolcall'").map((event) => (JSON.parse(event.content) as ToolcallRecord).output);
    expect(outputs).toEqual(['started\n', 'alive\n']);
    expect(isAlive({ pid: Number(readFileSync(pidFile, 'utf8')), start: null }), 'the setsid sleep is gone after the run').toBe(false);
    expect(readdirSync(dir.turnProcesses)).toEqual([]);
  });
});

describe.skipIf(!BWRAP)(`agent run: the sandbox (${NEEDS_BWRAP})`, () => {
  it("runs the model's commands in the sandbox by default: env holds none of the daemon's variables, the home shows only the agents", async () => {
    const server = await fakeServer();
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'env' } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'ls -A "$THECLAW_HOME"; cat "$THECLAW_HOME/pai/config.yaml"' } },
      { kind: 'text', text: 'looked' },
    );
    await send('what can you see?');
    const daemonEnv = { ...t.env, DAEMON_ONLY: 'daemon-value', THECLAW_THREAD: dir.inbox, THECLAW_CONSUMER: 'inbox' };
    expect(await runAgent('helper', { home: t.home, env: daemonEnv })).toMatchObject({ handled: 1, replied: 1 });

    const [env, home] = events(threadOf().path, "subtype = 'toolcall'").map((event) => JSON.parse(event.content) as ToolcallRecord);
    expect(env!.exit_code).toBe(0);
    expect(env!.output).toContain('THECLAW_AGENT=helper\n');
    expect(env!.output).toContain(`THECLAW_AGENT_DIR=${dir.root}\n`);
    expect(env!.output).not.toMatch(/DAEMON_ONLY|daemon-value|THECLAW_THREAD|THECLAW_CONSUMER|VITEST/);
    // pai's config (and with it the fake model's address) is hidden with the rest of the home.
    expect(home!.exit_code).not.toBe(0);
    expect(home!.output).toMatch(/^\.bin\nagents\n/);
    expect(home!.output).not.toContain('base_url');
  });
});

describe('agent run: the run lock (real CLI)', () => {
  it('exits 1 while a live process holds run.lock, and reclaims it once that process is dead', async () => {
    await fakeServer();
    await send('hello');
    const holder = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const attempt = tryLock(dir.runLock, holder.pid!);
      expect(attempt.acquired).toBe(true);
      const blocked = await runTool('agent', ['run', 'helper'], t.env);
      expect(blocked.code).toBe(1);
      expect(blocked.stderr).toBe(`Error: agent helper is already running (pid ${holder.pid}) - wait for that run to finish; notifier starts the next one\n`);
      expect(consumer(dir.inbox, 'inbox')).toBeNull(); // the inbox was not even read
      expect(readFileSync(dir.log, 'utf8')).toContain(`run skipped: run.lock is held by pid ${holder.pid}`);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve(null) : holder.once('exit', resolve)));
    }
    expect(existsSync(dir.runLock)).toBe(true); // left behind by the dead holder
    const result = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(existsSync(dir.runLock)).toBe(false);
    expect(replies(threadOf().path)).toHaveLength(1);
  });

  it('exits 1 for a missing agent and 0 with nothing to do', async () => {
    await fakeServer();
    const missing = await runTool('agent', ['run', 'nobody'], t.env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^Error: there is no agent nobody - /);
    const idle = await runTool('agent', ['run', 'helper'], t.env);
    expect(idle).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(agentDir(t.home, 'helper').runLock).toBe(dir.runLock);
  });
});
