import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { isAlive } from '../core/process.js';
import { createTestHome, startFakeOpenAI, threadEvents, waitFor, writeFakePaiConfig, type FakeLlmServer, type LooseJson, type RecordedRequest, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { SUMMARISER_PROMPT } from './turn/compaction.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import type { DecisionRecord, ResetRecord, ToolcallRecord, UsageRecord } from './types.js';

// Chat commands in `agent run`, in-process against the fake model: answered without a model call
// (but for /new's summary), the thread state they leave, and /stop ending a running turn.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;

const person = (peer = 'ann') => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server, { modelFields: 'cost: { input: 1000, output: 2000 }' });
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

const send = (text: string, source = person()) => sendToAgent(t.home, 'helper', { text, source });
const run = () => runAgent('helper', { home: t.home, env: t.env });
const route = (source = person()) => routeMessage(dir, 'per-peer', source);
const completions = () => server.requests.filter((request) => request.path === '/v1/chat/completions');
const isSummariser = (request: RecordedRequest) => request.body.messages[0]?.content === SUMMARISER_PROMPT;
const conversation = (request: RecordedRequest) => (request.body.messages as LooseJson[]).filter((message) => message.role !== 'system').map((message) => [message.role, message.content]);
const systemOf = (request: RecordedRequest) => request.body.messages[0].content as string;
const records = <T>(subtype: string, source = person()) => threadEvents(t.home, route(source).path, `type = 'record' AND subtype = '${subtype}'`).map((event) => JSON.parse(event.content) as T);
const replies = (source = person()) => threadEvents(t.home, route(source).path, "type = 'message' AND source = 'self'").map((event) => ({ id: event.id, ...parseMessageContent(event.content) }));
const inbound = (source = person()) => threadEvents(t.home, route(source).path, "type = 'message' AND source != 'self'");
const lastReply = (source = person()) => replies(source).at(-1)!.text;
const threadSummary = () => join(dir.memory, `thread-${route().threadId}.md`);

function setAgentConfig(patch: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, ...patch }));
}

describe('chat commands: answered without the model', () => {
  it('answers /help, /status and /usage from the runtime, as replies to the command, and gives /x to the model', async () => {
    await send('hello');
    await run();
    expect(completions()).toHaveLength(1);
    const [usage] = records<UsageRecord>('usage');

    await send('/help');
    await send('/status');
    await send('/usage@some_bot');
    await send('still here'); // waits behind /status in the inbox
    expect(await run()).toEqual({ handled: 4, replied: 4, errors: 0 });
    expect(completions()).toHaveLength(2); // only for 'still here'

    const [help, status, usageReply] = replies().slice(1);
    const commands = inbound().slice(1, 4);
    expect([help, status, usageReply].map((reply) => reply!.in_reply_to)).toEqual(commands.map((event) => event.id));
    expect(help!.reply_context).toEqual({ kind: 'external', channel_id: 'terminal:local', conversation_type: 'dm', conversation_id: 'ann', peer_id: 'ann' });
    expect(help!.text).toMatch(
      /^Commands:\n\/new - .*\n\/reset - .*\n\/stop - .*\n\/status - .*\n\/usage - .*\n\/approve - .*\n\/deny - .*\n\/tasks - .*\n\/model - .*\n\/think - .*\n\/compact - .*\n\/verbose - .*\n\/queue - .*\n\/help - .*\nAnything else goes to the agent\.$/,
    );

    const figures = `1 model call, ${usage!.input_tokens} in + ${usage!.output_tokens} out tokens, $${usage!.cost.toFixed(4)}`;
    const today = new Date().toISOString().slice(0, 10);
    expect(status!.text.split('\n')).toEqual([
      'Agent: helper',
      'Model: fake/m1',
      'Thinking: off',
      'Verbose: on',
      'Queue mode: followup',
      `Today (${today}, UTC): this conversation ${figures}; all conversations ${figures}`,
      'Queue: 2 messages waiting in the inbox',
    ]);
    expect(usageReply!.text).toBe(`This conversation today (${today}, UTC): ${figures}\nIn total: ${figures}`);
    // Each outcome is keyed like a model's reply: a crash and rerun answers no command twice.
    expect(await run()).toEqual({ handled: 0, replied: 0, errors: 0 });

    await send('/x marks the spot');
    await run();
    expect(completions()).toHaveLength(3);
    expect(lastReply()).toBe('echo: /x marks the spot');
    // The model's conversation leaves the commands and their answers out.
    expect(conversation(completions().at(-1)!)).toEqual([
      ['user', 'hello'],
      ['assistant', 'echo: hello'],
      ['user', 'still here'],
      ['assistant', 'echo: still here'],
      ['user', '/x marks the spot'],
    ]);
  });

  it('/reset starts a fresh conversation in the same thread: the old messages stay, the next call does not see them, nothing is saved', async () => {
    await send('my name is Ann');
    await run();
    writeFileSync(threadSummary(), 'EARLIER-SUMMARY: Ann likes tea\n');
    await send('/reset');
    await run();
    expect(completions()).toHaveLength(1);
    expect(lastReply()).toBe('Started a new conversation. Nothing of the old one was saved.');
    const resetCommand = inbound().at(-1)!;
    expect(records<ResetRecord>('reset')).toEqual([{ to_id: resetCommand.id, command: 'reset', summary_file: null }]);
    expect(existsSync(threadSummary())).toBe(false);
    expect(readdirSync(join(dir.memory, 'archive')).map((name) => readFileSync(join(dir.memory, 'archive', name), 'utf8'))).toEqual(['EARLIER-SUMMARY: Ann likes tea\n']);
    expect(existsSync(join(dir.memory, 'conversations'))).toBe(false);

    await send('what is my name?');
    await run();
    const next = completions().at(-1)!;
    expect(conversation(next)).toEqual([['user', 'what is my name?']]);
    expect(systemOf(next)).not.toContain('EARLIER-SUMMARY');
    // The old conversation is still in the thread.
    expect(inbound().map((event) => parseMessageContent(event.content).text)).toEqual(['my name is Ann', '/reset', 'what is my name?']);
  });

  it('/new saves a summary of the old conversation to memory with the summariser, then starts a fresh one', async () => {
    await send('my name is Ann');
    await run();
    writeFileSync(threadSummary(), 'EARLIER-SUMMARY: Ann likes tea\n');
    server.enqueue({ kind: 'text', text: 'SUMMARY: the user is Ann, who likes tea.' });
    await send('/new');
    await run();

    // One call, the summariser's, with the earlier summary and the turns since.
    expect(completions()).toHaveLength(2);
    const summariser = completions()[1]!;
    expect(isSummariser(summariser)).toBe(true);
    expect(summariser.body.tools).toBeUndefined();
    const input = conversation(summariser)[0]![1] as string;
    expect(input).toContain('EARLIER-SUMMARY: Ann likes tea');
    expect(input).toContain('User: my name is Ann\nAssistant: echo: my name is Ann');
    expect(input).not.toContain('/new');

    const command = inbound().at(-1)!;
    const [reset] = records<ResetRecord>('reset');
    const sentAt = threadEvents(t.home, dir.inbox).at(-1)!.created_at;
    const file = join('conversations', route().threadId, `${sentAt.replaceAll(':', '-')}.md`);
    expect(reset).toEqual({ to_id: command.id, command: 'new', summary_file: file });
    expect(readFileSync(join(dir.memory, file), 'utf8')).toBe('SUMMARY: the user is Ann, who likes tea.\n');
    expect(lastReply()).toBe(`Started a new conversation. A summary of the old one is saved in memory/${file}.`);
    expect(existsSync(threadSummary())).toBe(false);

    // A /new right after: nothing to summarise, no call.
    await send('/new');
    await run();
    expect(completions()).toHaveLength(2);
    expect(lastReply()).toBe('Started a new conversation. The old one was empty: there was nothing to save.');

    await send('what is my name?');
    await run();
    const next = completions().at(-1)!;
    expect(conversation(next)).toEqual([['user', 'what is my name?']]);
    expect(systemOf(next)).not.toContain('EARLIER-SUMMARY');
    expect(systemOf(next)).toContain(`- summaries of this conversation's earlier parts (before a /new): ${join(dir.memory, 'conversations', route().threadId)}/`);
  });

  it('starts the history after the later of the last compaction and the last reset, and compacts only the fresh conversation', async () => {
    setAgentConfig({ context: { recent_messages: 2, keep_recent: 1, compaction_threshold: 0.7 } });
    for (const text of ['one', 'two', 'three']) {
      await send(text);
      await run();
    }
    expect(records('compaction')).toHaveLength(1);
    expect(existsSync(threadSummary())).toBe(true);
    await send('/reset');
    await run();
    await send('four');
    await run();
    expect(conversation(completions().at(-1)!)).toEqual([['user', 'four']]);
    await send('five');
    await run();
    expect(conversation(completions().at(-1)!)).toEqual([
      ['user', 'four'],
      ['assistant', 'echo: four'],
      ['user', 'five'],
    ]);
    await send('six');
    await run();
    expect(records('compaction')).toHaveLength(2);
    const summariser = completions().filter(isSummariser).at(-1)!;
    const input = conversation(summariser)[0]![1] as string;
    expect(input).toBe('Conversation to add:\nUser: four\nAssistant: echo: four\nUser: five');
    expect(conversation(completions().at(-1)!)).toEqual([
      ['assistant', 'echo: five'],
      ['user', 'six'],
    ]);
  });

  it('/new without a model saves the earlier summary as it is and says why', async () => {
    await send('my name is Ann');
    await run();
    writeFileSync(threadSummary(), 'EARLIER-SUMMARY: Ann likes tea\n');
    setAgentConfig({ pai: { provider: 'nosuch', model: 'x' } });
    await send('/new');
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(completions()).toHaveLength(1);
    const [reset] = records<ResetRecord>('reset');
    expect(reset!.summary_error).toContain('unknown provider nosuch');
    expect(readFileSync(join(dir.memory, reset!.summary_file!), 'utf8')).toBe('EARLIER-SUMMARY: Ann likes tea\n');
    expect(lastReply()).toMatch(
      /^Started a new conversation\. The model could not summarise the old one \(.*unknown provider nosuch.*\), so only its earlier summary was saved, to memory\/conversations\/.+\.md\.$/,
    );
  });
});

describe('chat commands: /stop', () => {
  it('ends the running turn within the run: the tool process group is killed, the turn gets a stopped decision, and the /stop answers "Stopped."', async () => {
    const pidFile = join(t.home, 'sleep.pid');
    // `none`: the command writes its host pid in the home (a sandbox has its own pids).
    setAgentConfig({ sandbox: { profile: 'none' } });
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: `sleep 60 & echo $! > ${pidFile}; wait` } }, { kind: 'text', text: 'not reached' });
    await send('wait a minute');
    const running = run();
    const pid = Number(await waitFor(() => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim() : ''), 'the sleep to start'));
    expect(isAlive({ pid, start: null })).toBe(true);

    const stopId = await send('/stop');
    const started = Date.now();
    // The /stop joins the running run, and is answered in it once the stopped turn ends, without the model.
    expect(await running).toEqual({ handled: 2, replied: 1, errors: 0 });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(5_000);
    await waitFor(() => !isAlive({ pid, start: null }), 'the sleep to be gone', 2_000);

    const [turn] = inbound();
    expect(records<DecisionRecord>('decision')).toEqual([{ in_reply_to: turn!.id, decision: 'stopped', stopped_by_inbox_id: stopId }]);
    const [toolcall] = records<ToolcallRecord>('toolcall');
    expect(toolcall).toMatchObject({ exit_code: 124, output: expect.stringContaining('[bash_exec: aborted; the command and its children were killed]') });
    expect(completions()).toHaveLength(1); // no call after the abort
    expect(records('error')).toEqual([]);

    expect(replies().map((reply) => reply.text)).toEqual(['Stopped.']);
    expect(completions()).toHaveLength(1);

    await send('/stop');
    await run();
    expect(lastReply()).toBe('Nothing is running.');
  });

  it('stops the turns of its conversation queued before it in the batch, and nothing else', async () => {
    await send('first');
    await send('second');
    await send('hello', person('bob'));
    const stopId = await send('/stop');
    await send('after the stop');
    expect(await run()).toEqual({ handled: 5, replied: 3, errors: 0 });
    const [first, second] = inbound();
    expect(records<DecisionRecord>('decision')).toEqual([
      { in_reply_to: first!.id, decision: 'stopped', stopped_by_inbox_id: stopId },
      { in_reply_to: second!.id, decision: 'stopped', stopped_by_inbox_id: stopId },
    ]);
    expect(replies().map((reply) => reply.text)).toEqual(['Stopped.', 'echo: after the stop']);
    expect(replies(person('bob')).map((reply) => reply.text)).toEqual(['echo: hello']);
    expect(completions()).toHaveLength(2);
  });

  it("shows a person who is not the owner only their own conversation in /status: no model, no other conversation's usage, no queue", async () => {
    const peer = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: '5151', peerId: '5151' });
    await send('hello from the owner');
    await send('hello from a peer', peer);
    await run();
    const ownUsage = records<UsageRecord>('usage', peer);
    expect(ownUsage).toHaveLength(1);
    await send('/status', peer);
    await send('/status');
    await send('still here'); // waits behind both in the inbox
    await run();

    const today = new Date().toISOString().slice(0, 10);
    const own = `1 model call, ${ownUsage[0]!.input_tokens} in + ${ownUsage[0]!.output_tokens} out tokens, $${ownUsage[0]!.cost.toFixed(4)}`;
    const statusLines = (source?: string) =>
      replies(source)
        .find((reply) => reply.text.startsWith('Agent:'))!
        .text.split('\n');
    expect(statusLines(peer)).toEqual(['Agent: helper', `Today (${today}, UTC): this conversation ${own}`]);
    // The owner still sees the whole agent.
    expect(statusLines()).toEqual([
      'Agent: helper',
      'Model: fake/m1',
      'Thinking: off',
      'Verbose: on',
      'Queue mode: followup',
      expect.stringMatching(new RegExp(`^Today \\(${today}, UTC\\): this conversation 1 model call, .*; all conversations 2 model calls, `)),
      'Queue: 1 message waiting in the inbox',
    ]);
  });

  it('takes a group /stop only when it addressed the agent', async () => {
    const group = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'group', conversationId: '-100', peerId: '5' });
    const inbox = openThread(dir.inbox, { home: t.home });
    const push = (fields: object) => inbox.push({ source: group, type: 'message', content: JSON.stringify({ text: '/status', attachments: [], ...fields }) });
    push({ addressed: false });
    push({ addressed: true });
    inbox.close();
    await run();
    expect(completions()).toHaveLength(1);
    expect(replies(group).map((reply) => reply.text.split('\n')[0])).toEqual(['echo: /status', 'Agent: helper']);
  });
});
