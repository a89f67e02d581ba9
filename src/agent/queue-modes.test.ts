import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { cliPath } from '../core/package.js';
import { createTestHome, startFakeOpenAI, threadEvents, waitFor, writeFakePaiConfig, type FakeLlmServer, type LooseJson, type RecordedRequest, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { QUEUE_MODE_ENV } from './conversation/queue-mode.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';
import type { DecisionRecord } from './types.js';

// Queue modes (issue 23 §3) in real runs against the fake model server, whose recorded requests
// show how many calls each mode makes and what each one carried. One home for the file; each test
// is a person of its own (a conversation of its own), its mode set with /queue or by default.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
/** The home's environment without the test suite's default mode: a direct chat collects, as a user's does. */
let env: NodeJS.ProcessEnv;
const DEBOUNCE_MS = 150;

beforeAll(async () => {
  t = createTestHome();
  env = { ...t.env, [QUEUE_MODE_ENV]: undefined };
  dir = await initAgent(t.home, 'helper');
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, queue: { debounce_ms: DEBOUNCE_MS }, sandbox: { profile: 'none' }, policy: { rules: [{ bash: 'allow' }] } }));
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server, { timeoutSeconds: 20 });
});

afterAll(async () => {
  await server.close();
  t.cleanup();
});

const person = (peer: string) => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });
const send = (peer: string, text: string) => sendToAgent(t.home, 'helper', { text, source: person(peer) });
const run = () => runAgent('helper', { home: t.home, env });
const threadOf = (peer: string) => routeMessage(dir, 'per-peer', person(peer)).path;
const completions = () => server.requests.filter((request) => request.path === '/v1/chat/completions');
/** The calls made from here on, for the requests a test's turns made. */
const callsFrom = () => {
  const before = completions().length;
  return () => completions().slice(before);
};
const userTexts = (request: RecordedRequest) => (request.body.messages as LooseJson[]).filter((message) => message.role === 'user').map((message) => message.content as string);
const replies = (peer: string) => threadEvents(t.home, threadOf(peer), "type = 'message' AND source = 'self'").map((event) => ({ id: event.id, ...parseMessageContent(event.content) }));
const decisions = (peer: string) => threadEvents(t.home, threadOf(peer), "type = 'record' AND subtype = 'decision'").map((event) => JSON.parse(event.content) as DecisionRecord);
const inbound = (peer: string) => threadEvents(t.home, threadOf(peer), `type = 'message' AND source != 'self'`);
const inboxProgress = () => {
  const inbox = openThread(dir.inbox, { home: t.home });
  try {
    return inbox.consumer('inbox')?.progress ?? 0;
  } finally {
    inbox.close();
  }
};

describe('queue mode collect (the default in a direct chat)', () => {
  it('answers three messages sent at once in one turn: one model call with all three, one reply to the last; the others joined it', async () => {
    const calls = callsFrom();
    await send('ann', 'hi');
    await send('ann', 'can you');
    const last = await send('ann', 'check my calendar');
    expect(await run()).toEqual({ handled: 3, replied: 1, errors: 0 });
    expect(calls()).toHaveLength(1);
    expect(userTexts(calls()[0]!)).toEqual(['hi\n\ncan you\n\ncheck my calendar']);
    const [first, second, third] = inbound('ann');
    expect(replies('ann').map((reply) => [reply.text, reply.in_reply_to])).toEqual([['echo: hi\n\ncan you\n\ncheck my calendar', third!.id]]);
    expect(decisions('ann')).toEqual([
      { in_reply_to: first!.id, decision: 'joined', turn_of: third!.id },
      { in_reply_to: second!.id, decision: 'joined', turn_of: third!.id },
    ]);
    expect(inboxProgress()).toBe(last);
    // The next turn's history has them once each, as the person wrote them.
    await send('ann', 'thanks');
    await run();
    expect(userTexts(completions().at(-1)!)).toEqual(['hi', 'can you', 'check my calendar', 'thanks']);
  });

  it('never collects a chat command: it is answered on its own, in its place, and /status and /queue tell the mode', async () => {
    const calls = callsFrom();
    await send('bo', 'one');
    await send('bo', '/status');
    await send('bo', 'two');
    await send('bo', '/queue');
    await send('bo', '/queue loud');
    expect(await run()).toEqual({ handled: 5, replied: 5, errors: 0 });
    expect(calls().map((call) => userTexts(call).at(-1))).toEqual(['one', 'two']);
    const texts = replies('bo').map((reply) => reply.text);
    expect(texts[0]).toBe('echo: one');
    expect(texts[1]!.split('\n')).toContain('Queue mode: collect, debounce 0.15 s');
    expect(texts[2]).toBe('echo: two');
    expect(texts[3]!.split('\n')).toEqual([
      "Queue mode: collect, debounce 0.15 s (the agent's)",
      'Modes:',
      '- collect: messages that come close together are one turn with one answer',
      '- steer: a message that comes while the agent works is given to it before its next step',
      '- followup: each message is answered on its own, in order',
      '- interrupt: a new message stops what the agent is doing and is answered instead',
      'Set it with /queue <mode>; /queue default goes back.',
    ]);
    expect(texts[4]).toBe('Error: loud is not a queue mode - use /queue collect|steer|followup|interrupt|default');
  });

  it('re-delivers collected messages after the run is killed mid-turn, and answers them once', async () => {
    server.enqueue({ kind: 'hang' });
    const calls = callsFrom();
    const before = inboxProgress();
    await send('cy', 'first');
    await send('cy', 'second');
    const last = await send('cy', 'third');
    const child = spawn(process.execPath, [cliPath('agent'), 'run', 'helper'], { env, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await waitFor(() => server.inFlight === 1, 'the collected turn to call the model');
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    expect(userTexts(calls()[0]!).at(-1)).toBe('first\n\nsecond\n\nthird');
    expect(inboxProgress()).toBe(before); // nothing acknowledged: all three come again

    expect(await run()).toEqual({ handled: 3, replied: 1, errors: 0 });
    expect(calls()).toHaveLength(2);
    expect(userTexts(calls()[1]!).join('\n')).toMatch(/first[\s\S]*second[\s\S]*third/);
    expect(replies('cy')).toHaveLength(1);
    expect(inboxProgress()).toBe(last);
    expect(await run()).toEqual({ handled: 0, replied: 0, errors: 0 });
  });
});

describe('queue mode steer', () => {
  it('gives a running turn the message that came during its command, before its next model call: one answer that saw it', async () => {
    await send('di', '/queue steer');
    await run();
    expect(replies('di').at(-1)!.text).toBe('Queue mode: steer for this conversation: a message that comes while the agent works is given to it before its next step.');
    const calls = callsFrom();
    let correction = 0;
    server.enqueue(
      () => {
        void send('di', 'no, the other one').then((id) => (correction = id)); // typed while the agent works
        return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo looking' } };
      },
      { kind: 'text', text: 'Done, with the other one.' },
    );
    await send('di', 'open the file');
    expect(await run()).toEqual({ handled: 2, replied: 1, errors: 0 });
    expect(calls()).toHaveLength(2);
    const second = calls()[1]!.body.messages as LooseJson[];
    expect(second.slice(-3).map((message) => message.role)).toEqual(['assistant', 'tool', 'user']);
    expect(second.at(-1).content).toBe('no, the other one');
    const [, ask, joined] = inbound('di');
    expect(
      replies('di')
        .slice(1)
        .map((reply) => [reply.text, reply.in_reply_to]),
    ).toEqual([['Done, with the other one.', ask!.id]]);
    expect(decisions('di')).toEqual([{ in_reply_to: joined!.id, decision: 'joined', turn_of: ask!.id }]);
    expect(inboxProgress()).toBe(correction);
  });
});

describe('queue mode interrupt', () => {
  it('stops the running turn when a new message comes, and answers the new one', async () => {
    await send('ed', '/queue interrupt');
    await run();
    const calls = callsFrom();
    let newer = 0;
    server.enqueue(() => {
      void send('ed', 'forget that, what time is it?').then((id) => (newer = id));
      return { kind: 'hang' };
    });
    await send('ed', 'write me a long poem');
    expect(await run()).toEqual({ handled: 2, replied: 1, errors: 0 });
    expect(calls().map((call) => userTexts(call).at(-1))).toEqual(['write me a long poem', 'forget that, what time is it?']);
    const [, poem, question] = inbound('ed');
    expect(decisions('ed')).toEqual([{ in_reply_to: poem!.id, decision: 'stopped', stopped_by_inbox_id: newer }]);
    expect(
      replies('ed')
        .slice(1)
        .map((reply) => [reply.text, reply.in_reply_to]),
    ).toEqual([['echo: forget that, what time is it?', question!.id]]);
  });
});

describe('queue mode followup', () => {
  it('answers each message in its own turn, in order', async () => {
    await send('flo', '/queue followup');
    const calls = callsFrom();
    await send('flo', 'first');
    await send('flo', 'second');
    expect(await run()).toEqual({ handled: 3, replied: 3, errors: 0 });
    expect(calls().map((call) => userTexts(call).at(-1))).toEqual(['first', 'second']);
    expect(replies('flo').map((reply) => reply.text)).toEqual(['Queue mode: followup for this conversation: each message is answered on its own, in order.', 'echo: first', 'echo: second']);
  });
});
