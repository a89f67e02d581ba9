import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { feedPath } from '../../core/layout.js';
import { parseMessageContent } from '../../core/message.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, startFakeOpenAI, threadEvents, writeFakePaiConfig, type FakeLlmServer, type LooseJson, type TestHome } from '../../testing/index.js';
import type { AgentDir } from '../agent-dir.js';
import { ACK_MAX_CHARS, HEARTBEAT_OK, heartbeatFinding, runHeartbeat, withinActiveHours } from './heartbeat.js';
import { initAgent, startAgent, stopAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';

// A heartbeat against a loopback server speaking the OpenAI wire protocol, in a real agent
// directory whose owner has a direct chat (the terminal) with it.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
const ownerThread = () => routeMessage(dir, 'per-peer', owner).path;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  await startAgent(t.home, 'helper');
  server = await startFakeOpenAI({ defaultStep: { kind: 'text', text: HEARTBEAT_OK } });
  writeFakePaiConfig(t.home, server, { modelFields: 'max_output_tokens: 50' });
  setConfig({ heartbeat: { every: '30m', prompt: 'Look at <<the checklist>>.' } });
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

function setConfig(fields: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, ...fields }));
}

/** The owner writes to the agent once, which answers: their direct chat exists. */
async function ownerSays(text: string): Promise<void> {
  await sendToAgent(t.home, 'helper', { text, source: owner });
  await runAgent('helper', { home: t.home, env: t.env });
}

const completions = () => server.requests.filter((request) => request.path === '/v1/chat/completions');
const beat = (now?: Date) => runHeartbeat('helper', { home: t.home, env: t.env, now });
const heartbeatRecords = () => (existsSync(join(dir.heartbeat, 'events.db')) ? threadEvents(t.home, dir.heartbeat) : []);
const ownerMessages = () => threadEvents(t.home, ownerThread(), "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content));

describe('a heartbeat', () => {
  it("that finds nothing sends nothing: one small call with no person's memory and no conversation, a decision record", async () => {
    await ownerSays('my <<owner words>>');
    writeFileSync(join(dir.memory, `user-${routeMessage(dir, 'per-peer', owner).peerKey}.md`), '<<person memory>>');
    writeFileSync(join(dir.memory, 'agent.md'), '<<agent memory>>');
    const before = completions().length;

    expect(await beat()).toEqual({ outcome: 'ok', tokens: expect.any(Number) });
    const calls = completions().slice(before);
    expect(calls).toHaveLength(1);
    const messages: LooseJson[] = calls[0]!.body.messages;
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    const sent = JSON.stringify(messages);
    for (const secret of ['<<person memory>>', '<<owner words>>', '<<agent memory>>', '## How I work']) expect(sent).not.toContain(secret);
    expect(messages[0].content).toMatch(/^# helper\n\nI am helper, a personal assistant agent/);
    expect(messages[0].content).toContain(`If nothing needs my owner, I answer exactly ${HEARTBEAT_OK}`);
    expect(messages[1].content).toBe('Look at <<the checklist>>.');

    expect(ownerMessages()).toHaveLength(1); // the answer to "my <<owner words>>" only
    const records = heartbeatRecords();
    expect(records.map((event) => event.subtype)).toEqual(['heartbeat', 'usage', 'decision']);
    expect(JSON.parse(records[2]!.content)).toEqual({ in_reply_to: records[0]!.id, decision: 'no_reply' });
    const usage = JSON.parse(records[1]!.content);
    // The whole request, tool definition included, in the fake's tokens (bytes / 4).
    console.log(`one idle heartbeat: ${usage.input_tokens} input + ${usage.output_tokens} output tokens (request of ${calls[0]!.bytes} bytes)`);
    expect(usage.input_tokens).toBeLessThan(600);
  });

  it('that finds something tells the owner in their direct chat, once: the next beat is told what it said', async () => {
    await ownerSays('hello');
    server.enqueue({ kind: 'text', text: 'The backup failed last night.' });
    expect(await beat()).toMatchObject({ outcome: 'told_owner', text: 'The backup failed last night.' });
    const told = ownerMessages().at(-1)!;
    expect(told.text).toBe('The backup failed last night.');
    expect(told.notice).toBeUndefined();
    expect(told.reply_context).toMatchObject({ kind: 'external', channel_id: 'terminal:local', conversation_type: 'dm' });
    expect(JSON.parse(heartbeatRecords().at(-1)!.content)).toMatchObject({ decision: 'told_owner', text: 'The backup failed last night.' });

    expect(await beat()).toMatchObject({ outcome: 'ok' });
    expect(completions().at(-1)!.body.messages[1].content).toMatch(/^Look at <<the checklist>>\.\n\nWhat I told my owner last \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\): The backup failed last night\.$/);
    expect(ownerMessages()).toHaveLength(2);
  });

  it('is skipped entirely, without a call or a record, while the agent is stopped, outside its hours, before the owner has a chat, and without a heartbeat', async () => {
    expect(await beat()).toEqual({ outcome: 'skipped', reason: 'the owner has no direct chat with helper yet, where a finding would go' });
    await ownerSays('hello');
    const calls = completions().length;

    await stopAgent(t.home, 'helper');
    expect(await beat()).toEqual({ outcome: 'skipped', reason: 'agent helper is stopped (agent start helper)' });
    await startAgent(t.home, 'helper');

    setConfig({ heartbeat: { every: '30m', active_hours: '08:00-22:00' } });
    expect(await beat(new Date(2026, 0, 1, 3, 0))).toEqual({ outcome: 'skipped', reason: 'outside its active hours (08:00-22:00)' });

    setConfig({ heartbeat: undefined });
    expect((await beat()).outcome).toBe('skipped');

    expect(completions()).toHaveLength(calls);
    expect(heartbeatRecords()).toEqual([]);
  });

  it('is skipped entirely once the day’s budget is spent, and runs while it is not', async () => {
    setConfig({ budget: { daily_tokens: 1000 } });
    server.enqueue({ kind: 'text', text: 'hi', usage: { input: 300, output: 10 } });
    await ownerSays('hello');
    expect((await beat()).outcome).toBe('ok'); // 310 spent; the beat reserves its prompt and 50
    server.enqueue({ kind: 'text', text: 'hi', usage: { input: 600, output: 10 } });
    await ownerSays('again');
    const calls = completions().length;
    const records = heartbeatRecords().length;
    expect(await beat()).toEqual({ outcome: 'skipped', reason: "over its budget: today's budget of 1,000 tokens is used up" });
    expect(completions()).toHaveLength(calls);
    expect(heartbeatRecords()).toHaveLength(records);
  });

  it("runs commands under the policy of the owner's direct chat, and on its own model when it has one", async () => {
    await ownerSays('hello');
    await beat();
    expect(
      completions()
        .at(-1)!
        .body.tools?.map((tool: LooseJson) => tool.function.name),
    ).toEqual(['bash_exec']);
    expect(completions().at(-1)!.body.messages[0].content).toContain('- commands: run in a sandbox');

    writeFakePaiConfig(t.home, server, { modelFields: 'max_output_tokens: 50' });
    const pai = readFileSync(join(t.home, 'pai', 'config.yaml'), 'utf8').replace('models: [{ id: m1', 'models: [{ id: m2 }, { id: m1');
    writeFileSync(join(t.home, 'pai', 'config.yaml'), pai);
    setConfig({ policy: { rules: [{ peer: 'owner', bash: 'deny' }] }, heartbeat: { every: '30m', model: 'fake/m2' } });
    await beat();
    const last = completions().at(-1)!.body;
    expect(last.tools).toBeUndefined();
    expect(last.model).toBe('m2');
    expect(last.messages[0].content).not.toContain('- commands:');
    const usage = JSON.parse(heartbeatRecords().find((event) => event.subtype === 'usage' && event.id > 3)!.content);
    expect(usage).toMatchObject({ provider: 'fake', model: 'm2' });
    console.log(`one idle heartbeat without bash_exec (the owner's policy denies it): ${usage.input_tokens} input + ${usage.output_tokens} output tokens`);
  });

  it("sends its commands to the warden's feed like a turn's, with their record's id and secret values removed", async () => {
    await ownerSays('hello');
    t.env.HEARTBEAT_TEST_TOKEN = 'hb-secret-value-123456';
    writeFakePaiConfig(t.home, server, { modelFields: 'max_output_tokens: 50', providerFields: ', api_key_env: HEARTBEAT_TEST_TOKEN' });
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo hb-secret-value-123456 | wc -c' } }, { kind: 'text', text: HEARTBEAT_OK });
    await beat();
    const record = heartbeatRecords().find((event) => event.subtype === 'toolcall')!;
    expect(JSON.parse(record.content)).toMatchObject({ exit_code: 0 });
    const feed = threadEvents(t.home, feedPath(t.home, 'toolcalls')).map((event) => JSON.parse(event.content));
    expect(feed).toEqual([{ agent: 'helper', thread: 'heartbeat', event: record.id, command: expect.not.stringContaining('hb-secret-value'), exit_code: 0 }]);
    expect(feed[0].command).toMatch(/^echo .+ \| wc -c$/);
  });

  it.skipIf(!BWRAP)(`searches the memory every conversation of the owner's sees, the agent's, and no conversation's thread (${NEEDS_BWRAP})`, async () => {
    await ownerSays('My locker code is Ostrich.');
    writeFileSync(join(dir.memory, 'agent.md'), 'My owner keeps a boat called Marguerite.\n');
    const search = (words: string) => ({ kind: 'tool_call' as const, name: 'bash_exec', arguments: { command: `agent memory search helper ${words}` } });
    server.enqueue(search('Marguerite'), search('Ostrich'), { kind: 'text', text: HEARTBEAT_OK });
    await beat();
    const printed = (completions().at(-1)!.body.messages as LooseJson[]).filter((message) => message.role === 'tool').map((message) => JSON.parse(String(message.content)));
    expect(printed[0], printed[0]?.stderr).toMatchObject({ exit_code: 0, stdout: expect.stringContaining('My owner keeps a boat called Marguerite.') });
    expect(printed[1]).toMatchObject({ exit_code: 0, stdout: 'nothing found\n' }); // the owner's chat is a person's conversation
  });

  it("that the model refuses is recorded, goes to the maintainer's feed and fails; an outage only misses the beat", async () => {
    await ownerSays('hello');
    server.enqueue({ kind: 'error', status: 401 });
    await expect(beat()).rejects.toThrow(/^the heartbeat got no answer: the model refused the request \(401\)$/);
    const error = heartbeatRecords().find((event) => event.subtype === 'error')!;
    expect(JSON.parse(error.content)).toMatchObject({ stage: 'llm', kind: 'auth', status: 401 });
    const feed = threadEvents(t.home, feedPath(t.home, 'errors')).map((event) => JSON.parse(event.content));
    expect(feed).toEqual([{ agent: 'helper', thread: 'heartbeat', stage: 'llm', kind: 'auth', status: 401, reason: 'the model refused the request (401)' }]);

    server.enqueue({ kind: 'error', status: 503 }, { kind: 'error', status: 503 }, { kind: 'error', status: 503 });
    await expect(beat()).rejects.toThrow(/the model is failing \(503\)/);
    expect(threadEvents(t.home, feedPath(t.home, 'errors'))).toHaveLength(1);
    expect(ownerMessages()).toHaveLength(1);
  });
});

describe("a heartbeat's answer", () => {
  const dressed = fc.tuple(fc.constantFrom('', '**', '`', '"'), fc.constantFrom('', '.', '!'), fc.constantFrom('', ' ', '\n'));

  it('is nothing to report when it is HEARTBEAT_OK, dressed or with a few words at either end, NO_REPLY or empty', () => {
    fc.assert(
      fc.property(dressed, fc.string({ maxLength: ACK_MAX_CHARS }), fc.boolean(), ([mark, stop, space], words, atEnd) => {
        const token = `${mark}${HEARTBEAT_OK}${mark}${stop}`;
        const text = atEnd ? `${words.trim()}${space}${token}` : `${token}${space}${words.trim()}`;
        expect(heartbeatFinding(text)).toBeNull();
      }),
    );
    for (const text of ['', '  ', 'NO_REPLY', '\nNO_REPLY\n']) expect(heartbeatFinding(text)).toBeNull();
  });

  it('is a finding when it says something without the token, or more than a few words with it', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((text) => text.trim() !== '' && text.trim() !== 'NO_REPLY' && !text.includes(HEARTBEAT_OK)),
        (text) => {
          expect(heartbeatFinding(text)).toBe(text.trim());
        },
      ),
    );
    const long = 'x'.repeat(ACK_MAX_CHARS + 1);
    expect(heartbeatFinding(`${HEARTBEAT_OK}\n${long}`)).toBe(long);
  });
});

describe('active hours', () => {
  const time = fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }));
  const hhmm = ([h, m]: [number, number]) => `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`;

  it('A-B and B-A share no minute and together cover the day', () => {
    fc.assert(
      fc.property(time, time, time, (a, b, at) => {
        fc.pre(hhmm(a) !== hhmm(b));
        const now = new Date(2026, 5, 1, at[0], at[1]);
        expect(withinActiveHours(`${hhmm(a)}-${hhmm(b)}`, now)).toBe(!withinActiveHours(`${hhmm(b)}-${hhmm(a)}`, now));
      }),
    );
  });

  it('include the start, not the end, and may run past midnight', () => {
    const at = (h: number, m = 0) => new Date(2026, 5, 1, h, m);
    expect(withinActiveHours('08:00-22:00', at(8))).toBe(true);
    expect(withinActiveHours('08:00-22:00', at(21, 59))).toBe(true);
    expect(withinActiveHours('08:00-22:00', at(22))).toBe(false);
    expect(withinActiveHours('22:00-06:00', at(23))).toBe(true);
    expect(withinActiveHours('22:00-06:00', at(5, 59))).toBe(true);
    expect(withinActiveHours('22:00-06:00', at(12))).toBe(false);
    expect(withinActiveHours('08:00-00:00', at(23, 59))).toBe(true);
    expect(withinActiveHours(undefined, at(3))).toBe(true);
  });
});
