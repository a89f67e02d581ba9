import { existsSync, mkdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import { openThread, type ThreadInfo } from '../thread/index.js';
import { defaultIdentity, SYSTEM_AGENTS } from './identity.js';
import type { AgentStatus } from './lifecycle.js';

// The real `agent` CLI in a temp THECLAW_HOME: init, start, stop, status, list, send.

let t: TestHome;
const user = userInfo().username;

beforeEach(() => {
  t = createTestHome();
});

afterEach(() => {
  t.cleanup();
});

const agent = (args: string[], env: NodeJS.ProcessEnv = t.env) => runTool('agent', args, env);
const root = (id: string) => join(t.home, 'agents', id);

async function ok(args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  const result = await agent(args, env);
  expect(result.code, `agent ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

async function inboxInfo(id: string): Promise<ThreadInfo> {
  const result = await runTool('thread', ['info', '--thread', join(root(id), 'inbox'), '--json'], t.env);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as ThreadInfo;
}

function inboxEvents(id: string) {
  const thread = openThread(join(root(id), 'inbox'), { home: t.home });
  try {
    return thread.peek({ limit: 1000 });
  } finally {
    thread.close();
  }
}

describe('agent init', () => {
  it('creates the directory tree, the texts, a config naming the agent and an inbox thread', async () => {
    const out = await ok(['init', 'helper']);
    expect(out).toContain(`created agent helper in ${root('helper')}`);
    for (const dir of ['sessions', 'memory', 'threads', 'threads/peers', 'threads/channels', 'threads/sessions', 'threads/agents', 'threads/main', 'workdir', 'logs']) {
      expect(statSync(join(root('helper'), dir)).isDirectory(), dir).toBe(true);
    }
    expect(readFileSync(join(root('helper'), 'IDENTITY.md'), 'utf8')).toMatch(/^# helper\n\nI am helper/);
    expect(readFileSync(join(root('helper'), 'USAGE.md'), 'utf8')).toContain('agent send helper --text');
    const config = parse(readFileSync(join(root('helper'), 'config.yaml'), 'utf8'));
    expect(config).toMatchObject({ agent_id: 'helper', kind: 'user', routing: { default: 'per-peer' }, deliver: { max_attempts: 3 } });
    expect(existsSync(join(root('helper'), 'inbox', 'events.db'))).toBe(true);
    expect(await inboxInfo('helper')).toMatchObject({ events: 0, consumers: [] });
    expect(readFileSync(join(root('helper'), 'logs', 'agent.log'), 'utf8')).toMatch(/^\[\d{4}-\d\d-\d\dT[^\]]+\] \[INFO\] initialised agent helper \(user\)\n$/);
  });

  it('refuses an existing agent with exit 1 and leaves it as it was', async () => {
    await ok(['init', 'helper']);
    const identity = join(root('helper'), 'IDENTITY.md');
    const before = readFileSync(identity, 'utf8');
    const again = await agent(['init', 'helper']);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(/^Error: agent helper exists already \(.*\) - .+\n$/);
    expect(readFileSync(identity, 'utf8')).toBe(before);
    const json = await agent(['init', 'helper', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ error: expect.stringContaining('exists already'), suggestion: expect.stringContaining('rm -rf') });
  });

  it('completes what an interrupted init left (a directory without config.yaml), keeping the files already there', async () => {
    await ok(['init', 'helper']);
    const identity = join(root('helper'), 'IDENTITY.md');
    writeFileSync(identity, 'You are my helper.\n');
    rmSync(join(root('helper'), 'config.yaml'));
    rmSync(join(root('helper'), 'memory'), { recursive: true });
    expect((await agent(['status', 'helper'])).code).toBe(1); // not an agent yet
    await ok(['init', 'helper']);
    expect(readFileSync(identity, 'utf8')).toBe('You are my helper.\n');
    expect(existsSync(join(root('helper'), 'memory'))).toBe(true);
    expect(await inboxInfo('helper')).toMatchObject({ events: 0 });
    await ok(['start', 'helper']);
  });

  it.each([['../x'], ['A B'], ['a'.repeat(70)], ['-x'], ['']])('refuses the id %j as a usage error (exit 2) and creates nothing', async (id) => {
    const result = await agent(['init', id]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^Error: .+ - .+\n$/);
    expect(existsSync(join(t.home, 'x'))).toBe(false);
    expect(existsSync(join(t.home, 'agents')) ? (await agent(['list', '--json'])).stdout : '[]\n').toBe('[]\n');
  });

  it.each([['owner'], ['other']])("refuses %s, a policy rule's peer keyword, as an agent id (exit 2)", async (id) => {
    const result = await agent(['init', id]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`Error: the agent id ${id} is reserved: policy rules use it as a keyword for peers - choose another id\n`);
    expect(existsSync(root(id))).toBe(false);
  });

  it('gives admin the admin identity and usage, as a system agent', async () => {
    await ok(['init', 'admin']);
    expect(readFileSync(join(root('admin'), 'IDENTITY.md'), 'utf8')).toBe(SYSTEM_AGENTS.admin.identity);
    expect(readFileSync(join(root('admin'), 'USAGE.md'), 'utf8')).toBe(SYSTEM_AGENTS.admin.usage);
    expect(parse(readFileSync(join(root('admin'), 'config.yaml'), 'utf8'))).toMatchObject({ agent_id: 'admin', kind: 'system' });
    await ok(['init', 'writer', '--kind', 'system', '--provider', 'fake', '--model', 'm1']);
    expect(parse(readFileSync(join(root('writer'), 'config.yaml'), 'utf8'))).toMatchObject({ kind: 'system', pai: { provider: 'fake', model: 'm1' } });
    expect((await agent(['init', 'other', '--kind', 'boss'])).code).toBe(2);
  });
});

describe("agent init and the model's window", () => {
  const paiConfig = (window: number, maxOutput = 4096) =>
    `default: small/m1\nproviders:\n  small: { api: openai-completions, base_url: "http://127.0.0.1:9/v1", models: [{ id: m1, context_window: ${window}, max_output_tokens: ${maxOutput} }, { id: big, context_window: 200000 }] }\n`;
  const writePai = (text: string) => {
    mkdirSync(join(t.home, 'pai'), { recursive: true });
    writeFileSync(join(t.home, 'pai', 'config.yaml'), text);
  };

  it('refuses a model whose window cannot hold the identity, the memory caps, a message and the reply, creating nothing', async () => {
    writePai(paiConfig(8_000));
    const result = await agent(['init', 'helper']);
    expect(result.code).toBe(1);
    // Identity (the default one), caps 2000 + 1000 + 1500, reserve 1000 + max_output_tokens 4096.
    const identity = Math.ceil(defaultIdentity('helper').length / 4);
    expect(result.stderr).toBe(
      `Error: the model small/m1 has a window of 8000 tokens, less than the ${identity + 4500 + 5096} this agent needs (identity ${identity} + memory caps 4500 + 5096 for the message and the reply) - choose a model with a larger window (--provider, --model), or give small/m1 a smaller max_output_tokens in $THECLAW_HOME/pai/config.yaml\n`,
    );
    expect(existsSync(root('helper'))).toBe(false);

    // Either fix works: a larger model, or a smaller reply.
    await ok(['init', 'helper', '--provider', 'small', '--model', 'big']);
    writePai(paiConfig(8_000, 1_024));
    await ok(['init', 'writer']);
  });
});

describe('agent start, stop, status, list', () => {
  it('start subscribes the inbox with the run handler; stop unsubscribes and keeps the progress', async () => {
    await ok(['init', 'helper']);
    expect(await ok(['start', 'helper', '--json'])).toBe('{"id":"helper","started":true}\n');
    const [consumer] = (await inboxInfo('helper')).consumers;
    expect(consumer).toMatchObject({ consumer: 'inbox', subscribed: true, filter: "type = 'message'", progress: 0 });
    expect(consumer!.handler).toMatch(/ run helper$/);
    expect(consumer!.handler).toContain(join('dist', 'agent', 'cli.js'));

    // Progress made while started survives stop and start.
    await ok(['send', 'helper', '--text', 'one']);
    await ok(['send', 'helper', '--text', 'two']);
    const thread = openThread(join(root('helper'), 'inbox'), { home: t.home });
    thread.ack('inbox', 1);
    thread.close();
    expect(await ok(['stop', 'helper'])).toBe('stopped helper (its messages wait until: agent start helper)\n');
    expect((await inboxInfo('helper')).consumers[0]).toMatchObject({ consumer: 'inbox', subscribed: false, progress: 1, pending: 1 });
    expect(JSON.parse(await ok(['stop', 'helper', '--json']))).toEqual({ id: 'helper', started: false, was_started: false });
    await ok(['send', 'helper', '--text', 'while stopped']);
    await ok(['start', 'helper']);
    expect((await inboxInfo('helper')).consumers[0]).toMatchObject({ subscribed: true, progress: 1, pending: 2 });
  });

  it('status and list print the documented shapes, and a missing agent is exit 1', async () => {
    expect(await ok(['list'])).toBe('no agents yet: agent init <id>\n');
    expect(JSON.parse(await ok(['status', '--json']))).toEqual([]);
    await ok(['init', 'helper']);
    await ok(['init', 'admin']);
    await ok(['start', 'admin']);
    await ok(['send', 'helper', '--text', 'hello']);

    const status = JSON.parse(await ok(['status', 'helper', '--json'])) as AgentStatus;
    expect(status).toEqual({
      id: 'helper',
      kind: 'user',
      started: false,
      pending: 1,
      running: false,
      last_activity: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      model: '(pai default)',
      threads: 0,
      undelivered: 0,
      damaged: [],
    });
    const all = JSON.parse(await ok(['status', '--json'])) as AgentStatus[];
    expect(all.map((row) => [row.id, row.kind, row.started, row.pending])).toEqual([
      ['admin', 'system', true, 0],
      ['helper', 'user', false, 1],
    ]);
    expect(JSON.parse(await ok(['list', '--json']))).toEqual([
      { id: 'admin', kind: 'system', started: true, model: '(pai default)' },
      { id: 'helper', kind: 'user', started: false, model: '(pai default)' },
    ]);
    expect(await ok(['list'])).toBe('admin  system  started  (pai default)\nhelper  user  stopped  (pai default)\n');
    expect(await ok(['status', 'helper'])).toMatch(/^helper {2}user {2}stopped {2}pending 1 {2}undelivered 0 {2}threads 0 {2}last activity \d{4}-.+ {2}model \(pai default\)\n$/);

    const missing = await agent(['status', 'nobody']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`Error: there is no agent nobody - create it with: agent init nobody (agent list shows the agents in ${t.home})\n`);
    const typo = await agent(['status', 'helpr']);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toBe(`Error: there is no agent helpr - did you mean helper? (agent list shows the agents in ${t.home})\n`);
    // Too far from every agent to be a typo of one.
    expect((await agent(['status', 'hx'])).stderr).toMatch(/^Error: there is no agent hx - create it with: agent init hx /);
    const missingJson = await agent(['status', 'nobody', '--json']);
    expect(missingJson.code).toBe(1);
    expect(JSON.parse(missingJson.stdout)).toMatchObject({ error: 'there is no agent nobody' });
    expect((await agent(['start', 'nobody'])).code).toBe(1);
  });

  it('status reads past a conversation whose events.db has no schema (its creator was killed in the midst): it holds nothing', async () => {
    await ok(['init', 'helper']);
    const thread = openThread(join(t.home, 'agents', 'helper', 'threads', 'peers', 'telegram.main.1'), { home: t.home, create: true });
    thread.push({ type: 'message', source: 'telegram:main:1', content: '{"text":"hi"}' });
    thread.close();
    const left = join(t.home, 'agents', 'helper', 'threads', 'peers', 'telegram.main.2');
    mkdirSync(left);
    writeFileSync(join(left, 'events.db'), '');
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(join(left, 'events.db'), aMinuteAgo, aMinuteAgo);
    expect(JSON.parse(await ok(['status', 'helper', '--json']))).toMatchObject({ id: 'helper', threads: 1, damaged: [] });
  });
});

describe('agent chat', () => {
  it('with TheClaw not running says only that, and that theclaw up starts it: no banner first', async () => {
    await ok(['init', 'helper']);
    const result = await agent(['chat', 'helper']);
    expect(result).toMatchObject({ code: 1, stdout: '', stderr: `Error: xgw is not running - start TheClaw with theclaw up (data directory ${t.home})\n` });
  });
});

/** What agent send adds while notifier is not running, as in these tests. */
const DOWN = ' (TheClaw is not running: it is answered after theclaw up)';

describe('agent send', () => {
  it('pushes as the terminal user by default, as --source, and as the calling agent inside bash_exec', async () => {
    await ok(['init', 'helper']);
    const fromTerminal = await agent(['send', 'helper', '--text', 'from the terminal']);
    // stdout is the event id alone, for scripts; stderr says where the answer will appear.
    expect(fromTerminal).toMatchObject({ code: 0, stdout: '1\n', stderr: `the answer appears in the terminal chat: agent chat helper${DOWN}\n` });
    const fromTelegram = await agent(['send', 'helper', '--text', 'from telegram', '--source', 'external:telegram:main:dm:42:42', '--json']);
    expect(fromTelegram.stderr).toBe('');
    expect(JSON.parse(fromTelegram.stdout)).toEqual({ id: 2 });
    const fromAgent = await agent(['send', 'helper', '--text', 'from an agent'], { ...t.env, THECLAW_AGENT: 'other', THECLAW_CONVERSATION: 't' });
    expect(fromAgent.stderr).toBe(`the answer comes back to agent other's conversation t${DOWN}\n`);

    const [terminal, telegram, internal] = inboxEvents('helper');
    const terminalSource = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: user, peerId: user });
    expect(terminalSource).toBe(`external:terminal:local:dm:${encodeURIComponent(user)}:${encodeURIComponent(user)}`);
    expect(terminal).toMatchObject({ id: 1, type: 'message', source: terminalSource });
    expect(parseMessageContent(terminal!.content)).toEqual({
      text: 'from the terminal',
      attachments: [],
      reply_context: { kind: 'external', channel_id: 'terminal:local', conversation_type: 'dm', conversation_id: user, peer_id: user },
    });
    expect(telegram).toMatchObject({ source: 'external:telegram:main:dm:42:42' });
    expect(parseMessageContent(telegram!.content).reply_context).toEqual({ kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: '42', peer_id: '42' });
    expect(internal).toMatchObject({ source: 'internal:dm:t:other' });
    expect(parseMessageContent(internal!.content)).toMatchObject({ text: 'from an agent', reply_context: { kind: 'internal', conversation_type: 'dm', conversation_id: 't', agent_id: 'other' } });
  });

  it('refuses self, a malformed source, sending to oneself and a missing agent', async () => {
    await ok(['init', 'helper']);
    for (const source of ['self', 'external:x', 'internal:dm:a%zz:b']) {
      const result = await agent(['send', 'helper', '--text', 'x', '--source', source]);
      expect(result.code, source).toBe(2);
      expect(result.stderr).toMatch(/^Error: .+ - .+\n$/);
    }
    const toSelf = await agent(['send', 'helper', '--text', 'x'], { ...t.env, THECLAW_AGENT: 'helper' });
    expect(toSelf.code).toBe(2);
    expect(toSelf.stderr).toContain('cannot send to itself');
    expect((await agent(['send', 'nobody', '--text', 'x'])).code).toBe(1);
    expect((await agent(['send', 'helper'])).code).toBe(2);
    expect(inboxEvents('helper')).toEqual([]);
  });

  it('stores a repeated --idempotency-key once', async () => {
    await ok(['init', 'helper']);
    expect(await ok(['send', 'helper', '--text', 'once', '--idempotency-key', 'k1'])).toBe('1\n');
    expect(await ok(['send', 'helper', '--text', 'once', '--idempotency-key', 'k1'])).toBe('1\n');
    expect(inboxEvents('helper')).toHaveLength(1);
  });
});
