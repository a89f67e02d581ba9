import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { cliPath } from '../core/package.js';
import {
  expectSessionValid,
  threadEvents,
  createTestHome,
  runTool,
  startFakeOpenAI,
  writeFakePaiConfig,
  waitFor,
  type FakeLlmServer,
  type FakeStep,
  type LooseJson,
  type RecordedRequest,
  type TestHome,
} from '../testing/index.js';
import { readSession } from '../pai/index.js';
import { openThread, type ThreadEvent } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { sessionFile } from './context.js';
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
const step = (request: RecordedRequest): FakeStep => (holding !== null && lastUser(request).includes(holding) ? { kind: 'hang' } : { kind: 'text', text: `answer to ${lastUser(request)}` });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
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
    await send('first');
    await send('second');
    await send('third');
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
    await send('slow question', terminal('a'));
    await send('quick question', terminal('b'));
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

function setAgentConfig(patch: Record<string, unknown>): void {
  writeFileSync(dir.config, stringify({ ...(parse(readFileSync(dir.config, 'utf8')) as object), ...patch }));
}

const texts = (path: string) => events(path).map((event) => [event.source === 'self' ? 'self' : 'in', parseMessageContent(event.content).text, parseMessageContent(event.content).notice ?? null]);

describe('a turn that kills its run', () => {
  it('is given up with an error notice after turn.max_attempts runs died during it, without another model call; the messages behind it are answered', async () => {
    setAgentConfig({ turn: { timeout_seconds: 60, max_attempts: 3 } });
    await send('poison');
    await send('after it');
    holding = 'poison';
    for (let run = 1; run <= 3; run++) {
      const { child, exited } = startRun();
      await waitFor(() => asked('poison') === run, `the model call of run ${run}`);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    }
    const path = routeMessage(dir, 'per-peer', terminal()).path;
    expect(texts(path)).toEqual([['in', 'poison', null]]);

    const again = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ handled: 2, replied: 1, errors: 1 });
    expect(asked('poison')).toBe(3); // not billed a fourth time
    expect(texts(path)).toEqual([
      ['in', 'poison', null],
      ['self', 'I could not answer: answering failed 3 times. The owner has been told.', 'error'],
      ['in', 'after it', null],
      ['self', 'answer to after it', null],
    ]);
    const [poison] = events(path);
    const errors = events(path, "type = 'record' AND subtype = 'error'").map((event) => JSON.parse(event.content));
    expect(errors).toEqual([{ in_reply_to: poison!.id, stage: 'turn', error: 'answering failed 3 times', kind: 'crashed' }]);
    expect(inboxProgress()).toBe(2);
  });

  it('does not count a run that failed because the model was unavailable', async () => {
    setAgentConfig({ turn: { timeout_seconds: 60, max_attempts: 1 } });
    await send('during an outage');
    holding = null;
    server.enqueue({ kind: 'error', status: 503 }, { kind: 'error', status: 503 }, { kind: 'error', status: 503 });
    const down = await runTool('agent', ['run', 'helper'], t.env);
    expect(down.code).not.toBe(0);
    const again = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ handled: 1, replied: 1, errors: 0 });
    expectAnsweredOnce(routeMessage(dir, 'per-peer', terminal()).path, ['during an outage']);
  });

  it('resumes when retried after a kill: the command that finished is not run again, the one that was running is reported interrupted, and one reply comes', async () => {
    const counter = join(t.home, 'counter');
    const pidFile = join(t.home, 'sleep.pid');
    // `none`: the commands write in the home and give their host pid (a sandbox has its own pids).
    setAgentConfig({ sandbox: { profile: 'none' } });
    await send('count once, then wait');
    server.enqueue(
      { kind: 'tool_call', id: 'call-count', name: 'bash_exec', arguments: { command: `echo x >> ${counter}` } },
      { kind: 'tool_call', id: 'call-wait', name: 'bash_exec', arguments: { command: `echo $$ > ${pidFile}; exec sleep 600` } },
    );
    const { child, exited } = startRun();
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 'the second command to run');
    child.kill('SIGKILL');
    await exited;
    // The killed run's command group outlives it (it is its own process group): not ours to leave behind.
    process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
    expect(readFileSync(counter, 'utf8')).toBe('x\n');

    // A model that sees no results starts the work over; one that sees them finishes.
    server.enqueue((request) =>
      (request.body.messages as LooseJson[]).some((message) => message.role === 'tool')
        ? { kind: 'text', text: 'counted' }
        : { kind: 'tool_call', id: 'call-again', name: 'bash_exec', arguments: { command: `echo x >> ${counter}` } },
    );
    const again = await runTool('agent', ['run', 'helper', '--json'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(readFileSync(counter, 'utf8')).toBe('x\n'); // the side effect happened once
    expect(server.requests).toHaveLength(3);
    const resumed = server.requests[2]!.body.messages as LooseJson[];
    expect(resumed.filter((message) => message.role === 'user').map((message) => message.content)).toEqual(['count once, then wait']);
    expect(resumed.filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, JSON.parse(message.content).exit_code])).toEqual([
      ['call-count', 0],
      ['call-wait', 125],
    ]);
    expect(JSON.parse(resumed.at(-1)!.content).stderr).toMatch(/^interrupted: the turn was killed while this ran; it may or may not have finished/);
    const path = routeMessage(dir, 'per-peer', terminal()).path;
    expect(texts(path)).toEqual([
      ['in', 'count once, then wait', null],
      ['self', 'counted', null],
    ]);
    const commands = events(path, "type = 'record' AND subtype = 'toolcall'").map((event) => JSON.parse(event.content) as { command: string; exit_code: number });
    expect(commands.map((record) => [record.command.split(' ')[0], record.exit_code])).toEqual([
      ['echo', 0],
      ['echo', 125],
    ]);
    expectSessionValid(readSession(sessionFile(dir, routeMessage(dir, 'per-peer', terminal()))));
  });
});
