import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { cliPath } from '../core/package.js';
import { threadEvents, createTestHome, runTool, startFakeOpenAI, writeFakePaiConfig, waitFor, type FakeLlmServer, type FakeStep, type LooseJson, type RecordedRequest, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/thread.js';
import type { ThreadEvent } from '../thread/types.js';
import type { AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { sendToAgent } from './send.js';

// The real `agent run` process killed with SIGKILL at the worst moments, then run again: every
// inbox message is answered exactly once.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
let children: ChildProcess[] = [];
const user = userInfo().username;
const terminal = (peer = user) => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });

/** Requests whose last user message contains this text hang (the server holds the call) while `holding` is set. */
let holding: string | null = null;
const lastUser = (request: RecordedRequest) => ((request.body.messages as LooseJson[]).findLast((message) => message.role === 'user')?.content as string) ?? '';
const step = (request: RecordedRequest): FakeStep =>
  holding !== null && lastUser(request).includes(holding) ? { kind: 'hang' } : { kind: 'text', text: `answer to ${lastUser(request)}` };

beforeEach(async () => {
  t = createTestHome();
  dir = initAgent(t.home, 'helper');
  holding = null;
  server = await startFakeOpenAI({ defaultStep: step });
  writeFakePaiConfig(t.home, server, { timeoutSeconds: 20 });
});

afterEach(async () => {
  for (const child of children) child.kill('SIGKILL');
  children = [];
  await server.close();
  t.cleanup();
});

function startRun(): { child: ChildProcess; exited: Promise<NodeJS.Signals | number | null> } {
  const child = spawn(process.execPath, [cliPath('agent'), 'run', 'helper'], { env: t.env, stdio: 'ignore' });
  children.push(child);
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  return { child, exited };
}

const events = (path: string, filter = "type = 'message'"): ThreadEvent[] => (existsSync(join(path, 'events.db')) ? threadEvents(t.home, path, filter) : []);

function inboxProgress(): number {
  const thread = openThread(dir.inbox, { home: t.home });
  try {
    return thread.consumer('inbox')?.progress ?? 0;
  } finally {
    thread.close();
  }
}

/** Every inbound message of the thread once, each answered by exactly one reply, in order. */
function expectAnsweredOnce(path: string, texts: string[]): void {
  const all = events(path);
  const inbound = all.filter((event) => event.source !== 'self');
  const replies = all.filter((event) => event.source === 'self').map((event) => parseMessageContent(event.content));
  expect(inbound.map((event) => parseMessageContent(event.content).text)).toEqual(texts);
  expect(replies.map((reply) => reply.in_reply_to)).toEqual(inbound.map((event) => event.id));
  expect(replies.map((reply) => reply.text)).toEqual(texts.map((text) => `answer to ${text}`));
}

const send = (text: string, source = terminal()) => sendToAgent(t.home, 'helper', { text, source });
const asked = (text: string) => server.requests.filter((request) => lastUser(request) === text).length;

describe('agent run after SIGKILL', () => {
  it('answers every message exactly once after being killed during its model call', async () => {
    send('first');
    send('second');
    send('third');
    holding = 'first';
    const { child, exited } = startRun();
    await waitFor(() => asked('first') === 1, 'the model call for the first message');
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const path = routeMessage(dir, 'per-peer', terminal()).path;
    expect(events(path).map((event) => parseMessageContent(event.content).text)).toEqual(['first']); // in the thread, not answered
    expect(inboxProgress()).toBe(0);
    expect(existsSync(dir.runLock)).toBe(true); // the dead run's lock

    holding = null;
    const again = await runTool('agent', ['run', 'helper'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expectAnsweredOnce(path, ['first', 'second', 'third']);
    expect(inboxProgress()).toBe(3);
    expect(existsSync(dir.runLock)).toBe(false);
    expect([asked('first'), asked('second'), asked('third')]).toEqual([2, 1, 1]);
  });

  it('does not answer again a message whose reply was stored before the kill, when its ack could not be', async () => {
    // The inbox's first message (peer a) is slow; the second (peer b) is answered meanwhile, in its
    // own thread. Its ack must wait for the first, so the kill leaves it answered but unacknowledged.
    send('slow question', terminal('a'));
    send('quick question', terminal('b'));
    holding = 'slow question';
    const { child, exited } = startRun();
    const pathB = routeMessage(dir, 'per-peer', terminal('b')).path;
    await waitFor(() => {
      try {
        return events(pathB).some((event) => event.source === 'self');
      } catch {
        return false; // the run is creating the thread at this moment
      }
    }, 'the reply to b');
    await waitFor(() => asked('slow question') === 1, 'the model call for a');
    child.kill('SIGKILL');
    await exited;
    expect(inboxProgress()).toBe(0);

    holding = null;
    const again = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ handled: 2, replied: 1, errors: 0 });
    expectAnsweredOnce(pathB, ['quick question']);
    expectAnsweredOnce(routeMessage(dir, 'per-peer', terminal('a')).path, ['slow question']);
    expect(asked('quick question')).toBe(1);
    expect(inboxProgress()).toBe(2);
    expect(readFileSync(dir.log, 'utf8')).toMatch(/inbox event 2 was handled before \(thread .* event 1\); not answered twice/);

    // Nothing is left for another run.
    const idle = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(JSON.parse(idle.stdout)).toEqual({ handled: 0, replied: 0, errors: 0 });
  });
});
