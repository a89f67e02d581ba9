import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { cliPath } from '../core/package.js';
import {
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
import type { ThreadEvent } from '../thread/index.js';
import { GatewayState } from '../xgw/index.js';
import { agentDir } from './agent-dir.js';
import { routeMessage } from './router.js';
import type { ToolcallRecord } from './types.js';

// The whole system, nothing in-process: notifier dispatches `agent run` and `agent deliver`, xgw
// carries the terminal conversation, and agent a asks agent b through `agent send` inside its
// bash_exec. Only the model is a loopback fake.

let t: TestHome;
let server: FakeLlmServer;
const user = userInfo().username;
const terminal = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: user, peerId: user });

const messagesOf = (request: RecordedRequest) => request.body.messages as LooseJson[];
const system = (request: RecordedRequest) => String(messagesOf(request).find((message) => message.role === 'system')?.content ?? '');

/** Agent a asks b with a command, says so, and passes b's answer on; b answers 42. */
function script(request: RecordedRequest): FakeStep {
  const last = messagesOf(request).at(-1);
  if (system(request).includes('AGENT-B')) return { kind: 'text', text: '42' };
  if (last?.role === 'tool') return { kind: 'text', text: 'I asked b; I will tell you.' };
  if (last?.content === '42') return { kind: 'text', text: 'b says: 42' };
  return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'agent send b --text "what is 6*7?"' } };
}

beforeEach(async () => {
  t = createTestHome();
  server = await startFakeOpenAI({ defaultStep: script });
  const write = (file: string, text: string) => {
    mkdirSync(join(t.home, file, '..'), { recursive: true });
    writeFileSync(join(t.home, file), text);
  };
  writeFakePaiConfig(t.home, server, { timeoutSeconds: 5 });
  write('notifier/config.yaml', 'sweep_interval_seconds: 0.5\nhandler_timeout_seconds: 30\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\n');
  write('xgw/config.yaml', 'channels:\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: a }\n');
  for (const id of ['a', 'b']) {
    expect((await runTool('agent', ['init', id], t.env)).code).toBe(0);
    writeFileSync(join(agentDir(t.home, id).identity), `# ${id}\n\nAGENT-${id.toUpperCase()}: a test agent.\n`);
    expect((await runTool('agent', ['start', id], t.env)).code).toBe(0);
  }
  for (const daemon of ['notifier', 'xgw'] as const) {
    const started = await runTool(daemon, ['start'], t.env);
    expect(started.code, started.stderr).toBe(0);
  }
});

afterEach(async () => {
  await runTool('xgw', ['stop'], t.env);
  await runTool('notifier', ['stop'], t.env);
  await server.close();
  t.cleanup();
});

const events = (path: string, filter = "type = 'message'"): ThreadEvent[] => threadEvents(t.home, path, filter);

describe('agent to agent through the real pipeline', () => {
  it("brings b's answer back into a's terminal conversation, and a's answer to the terminal", async () => {
    const chat = spawn(process.execPath, [cliPath('xgw'), 'chat', '--agent', 'a'], { env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    chat.stdout.on('data', (chunk) => (out += chunk));
    try {
      chat.stdin.write('ask b what 6*7 is\n');
      await waitFor(() => out.includes('b says: 42'), "a's answer on the terminal", 30_000);
      expect(out).toBe('I asked b; I will tell you.\nb says: 42\n');
    } finally {
      chat.kill();
    }

    const a = agentDir(t.home, 'a');
    const b = agentDir(t.home, 'b');
    const aThread = routeMessage(a, 'per-peer', terminal);
    // a's terminal thread: the person, a's note, b's answer (from b, into this conversation), a's answer.
    const aMessages = events(aThread.path);
    expect(aMessages.map((event) => [event.source, parseMessageContent(event.content).text])).toEqual([
      [terminal, 'ask b what 6*7 is'],
      ['self', 'I asked b; I will tell you.'],
      [`internal:reply:${aThread.threadId}:b`, '42'],
      ['self', 'b says: 42'],
    ]);
    const finalReply = parseMessageContent(aMessages[3]!.content);
    expect(finalReply.in_reply_to).toBe(aMessages[2]!.id);
    expect(finalReply.reply_context).toMatchObject({ kind: 'external', channel_id: 'terminal:local', peer_id: user });
    const [toolcall] = events(aThread.path, "type = 'record' AND subtype = 'toolcall'").map((event) => JSON.parse(event.content) as ToolcallRecord);
    expect(toolcall).toMatchObject({ command: 'agent send b --text "what is 6*7?"', exit_code: 0, in_reply_to: aMessages[0]!.id });

    // b's side: a's question from a's conversation, and b's answer addressed back to it.
    const bThread = routeMessage(b, 'per-peer', `internal:dm:${aThread.threadId}:a`);
    expect(bThread.path).toBe(join(b.threads, 'agents', `a.dm.${aThread.threadId}`));
    const bMessages = events(bThread.path);
    expect(bMessages.map((event) => [event.source, parseMessageContent(event.content).text])).toEqual([
      [`internal:dm:${aThread.threadId}:a`, 'what is 6*7?'],
      ['self', '42'],
    ]);
    // The question, b's answer and its delivery into a's inbox carry the message that asked, which a answers.
    expect(parseMessageContent(bMessages[1]!.content).reply_context).toEqual({
      kind: 'internal',
      conversation_type: 'dm',
      conversation_id: aThread.threadId,
      agent_id: 'a',
      asking_event_id: aMessages[0]!.id,
    });
    expect(parseMessageContent(aMessages[2]!.content).reply_context).toEqual({
      kind: 'internal',
      conversation_type: 'reply',
      conversation_id: aThread.threadId,
      agent_id: 'b',
      asking_event_id: aMessages[0]!.id,
    });

    // Everything delivered and acknowledged, nothing failed, nothing sent to the terminal by b.
    await waitFor(async () => {
      const status = JSON.parse((await runTool('agent', ['status', '--json'], t.env)).stdout) as { pending: number; undelivered: number }[];
      return status.every((row) => row.pending === 0 && row.undelivered === 0);
    }, 'every inbox and outbound consumer caught up');
    for (const path of [aThread.path, bThread.path]) expect(events(path, "type = 'record' AND subtype = 'error'")).toEqual([]);
    const state = new GatewayState(t.home);
    try {
      expect(
        state
          .mailbox('terminal:local', user)
          .filter((entry) => entry.role !== 'user')
          .map((entry) => [entry.role, entry.text]),
      ).toEqual([
        ['agent', 'I asked b; I will tell you.'],
        ['agent', 'b says: 42'],
      ]);
    } finally {
      state.close();
    }
    expect(server.requests.filter((request) => system(request).includes('AGENT-B'))).toHaveLength(1);
  });
});
