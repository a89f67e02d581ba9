import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { parseMessageContent } from '../../core/message.js';
import {
  BWRAP,
  createTestHome,
  NEEDS_BWRAP,
  runTool,
  startFakeOpenAI,
  threadEvents,
  waitFor,
  writeFakePaiConfig,
  writeXgwConfig,
  XGW_CONFIG_WITH_GUESTS,
  type FakeLlmServer,
  type LooseJson,
  type TestHome,
} from '../../testing/index.js';
import { conversationWorkdir, loadAgentConfig, type AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';
import type { ToolcallRecord } from '../types.js';

// The tool policy in `agent run`, against a loopback server speaking the OpenAI wire protocol:
// who gets bash_exec, which commands run, and the owner's approval, decided from the chat while
// the asking turn waits, and from the CLI.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
const user = userInfo().username;
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: user, peerId: user });
/** A peer of a web chat: `main` is the owner's own (open, on loopback), `guests` the README's pairing one. */
const webchat = (instance: string, peer: string) => formatAddress({ kind: 'external', channelType: 'webchat', instance, conversationType: 'dm', conversationId: peer, peerId: peer });
const ownerWeb = webchat('main', 'a'.repeat(32));
const guest = webchat('guests', 'b'.repeat(32));
const telegram = (peer: string, conversationType = 'dm') =>
  formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType, conversationId: conversationType === 'dm' ? peer : '-100', peerId: peer });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server, { contextWindow: 100_000 });
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

function setPolicy(policy: Record<string, unknown>, sandbox?: string): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, policy, ...(sandbox ? { sandbox: { profile: sandbox } } : {}) }));
}

const send = (text: string, source = owner) => sendToAgent(t.home, 'helper', { text, source });
const run = () => runAgent('helper', { home: t.home, env: t.env });
const pathOf = (source: string) => routeMessage(dir, 'per-peer', source).path;
const replies = (source: string) => threadEvents(t.home, pathOf(source), "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content));
const toolcalls = (source: string) => threadEvents(t.home, pathOf(source), "type = 'record' AND subtype = 'toolcall'").map((event) => JSON.parse(event.content) as ToolcallRecord);
const completions = () => server.requests.filter((request) => request.path === '/v1/chat/completions');
const offered = (request: { body: LooseJson }) => Array.isArray(request.body.tools) && request.body.tools.length > 0;
const approvalCode = (text: string) => /\/approve ([a-z0-9]+)/.exec(text)?.[1];

describe('the tool policy in a run', () => {
  it("offers bash_exec in the owner's direct chat only, by default: a group and a stranger are answered without it", async () => {
    await send('hello from the owner');
    await send('hello from a stranger', telegram('555'));
    await send('hello from a group', telegram('42', 'group'));
    expect(await run()).toMatchObject({ handled: 3, replied: 3 });
    const bySender = (text: string) => completions().find((request) => JSON.stringify(request.body.messages).includes(text))!;
    expect(offered(bySender('hello from the owner'))).toBe(true);
    expect(offered(bySender('hello from a stranger'))).toBe(false);
    expect(offered(bySender('hello from a group'))).toBe(false);
    // The runtime facts say so, so that the model neither claims a shell it lacks nor is surprised.
    const system = (text: string) => JSON.stringify(bySender(text).body.messages);
    expect(system('hello from the owner')).toContain("- commands: run in a sandbox (writable: my workdir, my agent memory, this person's memory and my skills; network on)");
    expect(system('hello from a stranger')).toContain("- commands: none in this conversation (the owner's policy)");
  });

  it('runs the commands its patterns allow and refuses the rest with exit code 126, a command hidden in another included', async () => {
    setPolicy({ rules: [{ peer: 'owner', bash: { allow: ['echo', 'ls'], otherwise: 'deny' } }] }, 'none');
    const marker = join(dir.workdir, 'marker');
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo allowed' } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `echo $(touch ${marker})` } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `ls; touch ${marker}` } },
      { kind: 'text', text: 'done' },
    );
    await send('do things');
    expect(await run()).toMatchObject({ handled: 1, replied: 1 });
    const calls = toolcalls(owner);
    expect(calls.map((call) => call.exit_code)).toEqual([0, 126, 126]);
    expect(calls[0]!.output).toBe('allowed\n');
    expect(calls[1]!.output).toContain("denied by the owner's policy for this conversation: it did not run");
    expect(existsSync(marker)).toBe(false);
  });

  it('refuses a command line over the reading limit at once, telling the model to split it, and goes on with the next', async () => {
    setPolicy({ rules: [{ peer: 'owner', bash: { allow: ['echo'], otherwise: 'deny' } }] }, 'none');
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `echo ${'a'.repeat(160 * 1024)}` } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo short' } },
      { kind: 'text', text: 'done' },
    );
    await send('write a long line');
    expect(await run()).toMatchObject({ handled: 1, replied: 1 });
    const calls = toolcalls(owner);
    expect(calls.map((call) => call.exit_code)).toEqual([126, 0]);
    expect(calls[0]!.output).toContain("the command is 161 KB, over the policy's limit of 8 KB for reading a command: it did not run. Split it into shorter commands");
    expect(calls[1]!.output).toBe('short\n');
  });
});

describe.skipIf(!BWRAP)(`the owner's approval (${NEEDS_BWRAP})`, () => {
  it('asks the owner in their direct chat, and runs the command once they answer /approve, while the turn waits', async () => {
    setPolicy({ rules: [{ channel: 'telegram', bash: 'ask' }] });
    await send('hi'); // the owner has a direct chat with the agent: the request goes there
    await run();
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo approved > marker' } }, { kind: 'text', text: 'done' });
    await send('please make the marker', telegram('555'));
    const running = run();
    const request = await waitFor(() => replies(owner).find((reply) => reply.notice === 'approval'), 'the approval request in the owner chat', 10_000);
    expect(request.text).toBe(
      `Agent helper asks to run a command for ${routeMessage(dir, 'per-peer', telegram('555')).threadId}:\necho approved > marker\nReply /approve ${approvalCode(request.text)} to run it or /deny ${approvalCode(request.text)}, within 5 min.`,
    );
    expect(request.reply_context).toMatchObject({ channel_id: 'terminal:local', conversation_type: 'dm', peer_id: user });

    // A stranger cannot approve it.
    await send(`/approve ${approvalCode(request.text)}`, telegram('555'));
    await send(`/approve ${approvalCode(request.text)}`);
    expect(await running).toMatchObject({ handled: 3, replied: 3 });
    expect(toolcalls(telegram('555'))).toMatchObject([{ command: 'echo approved > marker', exit_code: 0 }]);
    // In the stranger's conversation's own workdir, not the owner's.
    expect(readFileSync(join(conversationWorkdir(dir, routeMessage(dir, 'per-peer', telegram('555')).threadId), 'marker'), 'utf8')).toBe('approved\n');
    expect(existsSync(join(dir.workdir, 'marker'))).toBe(false);
    // The stranger's /approve waited behind the turn of its conversation.
    expect(replies(telegram('555')).map((reply) => reply.text)).toEqual(['done', 'Only the owner can approve or deny commands.']);
    expect(replies(owner).at(-1)!.text).toBe('Approved: echo approved > marker');
  });

  it('gives the model exit code 126 when the owner denies, from the terminal too, or lets the request expire', async () => {
    // Long enough for two CLI calls on a loaded machine before the second request expires.
    setPolicy({ rules: [{ channel: 'telegram', bash: 'ask' }], approval_timeout_seconds: 6 });
    await send('hi');
    await run();
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo one' } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo two' } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo three' } },
      { kind: 'text', text: 'done' },
    );
    await send('run three things', telegram('555'));
    const running = run();
    const requests = () => replies(owner).filter((reply) => reply.notice === 'approval');
    const first = await waitFor(() => requests()[0], 'the first request', 10_000);
    await send(`/deny ${approvalCode(first.text)}`);
    const second = await waitFor(() => requests()[1], 'the second request', 10_000);
    const listed = await runTool('agent', ['approvals', 'helper', '--json'], t.env);
    expect(JSON.parse(listed.stdout)).toMatchObject([{ code: approvalCode(second.text), command: 'echo two' }]);
    const denied = await runTool('agent', ['deny', 'helper', approvalCode(second.text)!], t.env);
    expect(denied).toMatchObject({ code: 0, stdout: 'denied: echo two\n' });
    // The third is left to expire.
    expect(await running).toMatchObject({ handled: 2, replied: 2 });
    expect(toolcalls(telegram('555')).map((call) => [call.exit_code, call.output])).toEqual([
      [126, expect.stringContaining('the owner denied this command')],
      [126, expect.stringContaining('the owner denied this command')],
      [126, expect.stringContaining('the owner did not approve this command within 6 s')],
    ]);
    const late = await runTool('agent', ['approve', 'helper', approvalCode(requests()[2]!.text)!], t.env);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain('expired');
  });
});

describe('who is the owner: a person, not a channel type', () => {
  beforeEach(() => writeXgwConfig(t.home, XGW_CONFIG_WITH_GUESTS));

  it("reads the owner's own web chats from xgw's config: open on loopback, none without a config", () => {
    expect(loadAgentConfig(dir).policy.ownerWebchats).toEqual(['webchat:main']);
    writeXgwConfig(t.home, XGW_CONFIG_WITH_GUESTS.replace('port: 18790, access: open', 'port: 18790, access: pairing'));
    expect(loadAgentConfig(dir).policy.ownerWebchats).toEqual([]);
    writeXgwConfig(t.home, 'channels: [ { id: webchat:main } ]\n'); // not a config xgw runs
    expect(loadAgentConfig(dir).policy.ownerWebchats).toEqual([]);
  });

  it("answers a guest of the README's guest web chat under the non-owner rule, unless policy.owners lists them", async () => {
    await send('hello from the owner', ownerWeb);
    await send('hello from a guest', guest);
    expect(await run()).toMatchObject({ handled: 2, replied: 2 });
    const bySender = (text: string) => completions().findLast((request) => JSON.stringify(request.body.messages).includes(text))!;
    expect(offered(bySender('hello from the owner'))).toBe(true);
    expect(offered(bySender('hello from a guest'))).toBe(false);

    setPolicy({ owners: [`webchat:guests:${'b'.repeat(32)}`] });
    await send('hello again from a listed guest', guest);
    expect(await run()).toMatchObject({ handled: 1, replied: 1 });
    expect(offered(bySender('hello again from a listed guest'))).toBe(true);
  });
});

describe.skipIf(!BWRAP)(`who is the owner: approvals (${NEEDS_BWRAP})`, () => {
  beforeEach(() => writeXgwConfig(t.home, XGW_CONFIG_WITH_GUESTS));

  it("asks the owner in their own web chat though a guest wrote last, and takes no guest's /approve", async () => {
    setPolicy({ rules: [{ channel: 'telegram', bash: 'ask' }] });
    await send('hi', ownerWeb);
    await send('hi, I am a guest', guest); // wrote last: under the old rule, the request went to them
    await run();
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo approved > marker' } }, { kind: 'text', text: 'done' });
    await send('please make the marker', telegram('555'));
    const running = run();
    const request = await waitFor(() => replies(ownerWeb).find((reply) => reply.notice === 'approval'), "the approval request in the owner's web chat", 10_000);
    expect(replies(guest).filter((reply) => reply.notice === 'approval')).toEqual([]);

    await send(`/approve ${approvalCode(request.text)}`, guest);
    await send(`/approve ${approvalCode(request.text)}`, ownerWeb);
    expect(await running).toMatchObject({ handled: 3, replied: 3 });
    expect(replies(guest).at(-1)!.text).toBe('Only the owner can approve or deny commands.');
    expect(replies(ownerWeb).at(-1)!.text).toBe('Approved: echo approved > marker');
    // The command ran in the asking Telegram peer's conversation, in its own workdir.
    expect(readFileSync(join(conversationWorkdir(dir, routeMessage(dir, 'per-peer', telegram('555')).threadId), 'marker'), 'utf8')).toBe('approved\n');
  });
});
