import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import {
  completionRequests,
  conversationOf,
  createTestHome,
  startFakeOpenAI,
  systemPromptOf,
  threadEvents,
  writeFakePaiConfig,
  type FakeLlmServer,
  type FakeStep,
  type RecordedRequest,
  type TestHome,
  storedThread,
} from '../../testing/index.js';
import { initThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { SUMMARISER_PROMPT } from './compaction.js';
import { initAgent } from '../lifecycle.js';
import { CONDENSE_PROMPT } from './memory-condense.js';
import { FLUSH_PROMPT, flushMemory, parseFlush } from './memory-flush.js';
import { searchMemory } from '../memory/memory-search.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';
import type { CompactionRecord, ErrorRecord, MemoryCondenseRecord, MemoryFlushRecord, RoutingMode } from '../types.js';

// Memory upkeep through the run loop, against the fake model: the flush before a compaction
// (facts to the person's or group's file, notes to its daily notes), and a memory file over its
// cap condensed after the turn. The fake recognises the runtime's calls by their system prompts.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;

const telegram = (peer: string, chat = peer) =>
  formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: chat === peer ? 'dm' : 'group', conversationId: chat, peerId: peer });
const ANN = telegram('4242');
const BOB = telegram('5353');
const GROUP_ANN = telegram('4242', '-77');
const GROUP_BOB = telegram('5353', '-77');

const systemOf = systemPromptOf;
const isFlush = (request: RecordedRequest) => systemOf(request) === FLUSH_PROMPT;
const isCondense = (request: RecordedRequest) => systemOf(request) === CONDENSE_PROMPT;
const isSummariser = (request: RecordedRequest) => systemOf(request) === SUMMARISER_PROMPT;
/** The calls that answer messages. */
const turns = () => completionRequests(server).filter((request) => !isFlush(request) && !isCondense(request) && !isSummariser(request));
const echo = (request: RecordedRequest): FakeStep => ({ kind: 'text', text: `echo: ${conversationOf(request).at(-1)}` });

/** The flush's answer: a fact for each "remember …" the person said, and a note. */
function flushAnswer(request: RecordedRequest): FakeStep {
  const said = [...conversationOf(request)[0]!.matchAll(/^User: (?:\[[^\]]*\] )?remember (.+)$/gm)].map((match) => match[1]);
  return { kind: 'text', text: `FACTS:\n${said.length ? said.map((fact) => `- ${fact}`).join('\n') : '- none'}\nNOTES:\n- Talked about what to remember.` };
}

let flushStep: (request: RecordedRequest) => FakeStep;
let condenseStep: (request: RecordedRequest) => FakeStep;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  flushStep = flushAnswer;
  condenseStep = () => ({ kind: 'text', text: '## About the person\n- Condensed: likes tea.' });
  server = await startFakeOpenAI({ defaultStep: (request) => (isFlush(request) ? flushStep(request) : isCondense(request) ? condenseStep(request) : echo(request)) });
  writeFakePaiConfig(t.home, server);
  // More messages than a call carries compacts the older ones: at the 4th message, the 4 before the last 2.
  setConfig({ context: { recent_messages: 4, keep_recent: 2 } });
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

function setConfig(patch: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, ...patch }));
}

const run = () => runAgent('helper', { home: t.home, env: t.env });
const send = (text: string, source = ANN) => sendToAgent(t.home, 'helper', { text, source });
const route = (source = ANN, mode: RoutingMode = 'per-peer') => routeMessage(dir, mode, source);
const records = <T>(subtype: string, source = ANN, mode: RoutingMode = 'per-peer') =>
  threadEvents(t.home, route(source, mode).path, `type = 'record' AND subtype = '${subtype}'`).map((event) => JSON.parse(event.content) as T);
const personFile = (source = ANN) => join(dir.memory, `user-${route(source).peerKey}.md`);
const today = () => new Date().toISOString().slice(0, 10);

describe('the memory flush before a compaction', () => {
  it("puts a fact said early into the person's memory file, with a daily note, and a later turn has it after the conversation was reset", async () => {
    await send('remember I am allergic to peanuts');
    for (let i = 2; i <= 5; i++) await send(`turn ${i}`);
    expect(await run()).toEqual({ handled: 5, replied: 5, errors: 0 });

    const [compaction] = records<CompactionRecord>('compaction');
    const inbound = threadEvents(t.home, route().path, "type = 'message' AND source != 'self'");
    const [flush, ...more] = records<MemoryFlushRecord>('memory');
    expect(more).toEqual([]);
    const key = route().peerKey!;
    expect(flush).toEqual({
      action: 'flush',
      from_id: inbound[0]!.id,
      to_id: compaction!.to_id,
      file: `memory/user-${key}.md`,
      lines: ['- I am allergic to peanuts'],
      daily_file: `memory/daily/user-${key}/${today()}.md`,
      daily_lines: ['- Talked about what to remember.'],
      at: expect.stringMatching(new RegExp(`^${today()}T`)),
    } satisfies MemoryFlushRecord);
    expect(readFileSync(personFile(), 'utf8')).toBe(`## Noted ${today()}\n- I am allergic to peanuts\n`);
    const hhmm = flush!.at.slice(11, 16);
    expect(readFileSync(join(dir.root, flush!.daily_file), 'utf8')).toBe(`# ${today()}\n\n## ${hhmm} UTC\n- Talked about what to remember.\n`);

    // One flush call, beside the summariser, for the turns it folds: no tools, bounded input.
    const [flushCall, ...moreFlushes] = completionRequests(server).filter(isFlush);
    expect(moreFlushes).toEqual([]);
    expect(flushCall!.body.tools ?? []).toEqual([]);
    expect(conversationOf(flushCall!)).toEqual([
      'Already in memory:\n(nothing yet)\n\nConversation:\nUser: remember I am allergic to peanuts\nAssistant: echo: remember I am allergic to peanuts\nUser: turn 2\nAssistant: echo: turn 2',
    ]);
    // The turn that compacted already reads the fact as the person's memory.
    expect(systemOf(turns()[3]!)).toContain(`## What I know about this person\n## Noted ${today()}\n- I am allergic to peanuts\n\n## `);
    expect(systemOf(turns()[3]!)).toContain(`- daily notes of this person, one file a day (memory search finds them): ${join(dir.memory, 'daily', `user-${key}`)}/`);

    // A fresh conversation: no summary, no history; the person's memory still has the fact.
    await send('/reset');
    await send('what am I allergic to?');
    await run();
    const last = turns().at(-1)!;
    expect(conversationOf(last)).toEqual(['what am I allergic to?']);
    expect(systemOf(last)).not.toContain('Summary of this conversation');
    expect(systemOf(last)).toContain('- I am allergic to peanuts');

    // The daily note is found by the conversation's search, dated.
    const hits = await searchMemory(t.home, 'helper', 'talked remember', {}, { THECLAW_AGENT: 'helper', THECLAW_CONVERSATION: route().threadId });
    expect(hits).toContainEqual(expect.objectContaining({ kind: 'memory', where: flush!.daily_file, time: today(), text: `${hhmm} UTC\n- Talked about what to remember.` }));
  });

  it('never blocks the compaction or the answer when it fails: a warning, and the file untouched', async () => {
    flushStep = () => ({ kind: 'error', status: 400, message: 'the flush is broken' });
    for (let i = 1; i <= 5; i++) await send(`remember fact ${i}`);
    expect(await run()).toEqual({ handled: 5, replied: 5, errors: 0 });
    expect(records('compaction')).toHaveLength(1);
    expect(records('memory')).toEqual([]);
    expect(existsSync(personFile())).toBe(false);
    expect(records<ErrorRecord>('error')).toEqual([
      expect.objectContaining({ stage: 'memory', severity: 'warning', kind: 'invalid_request', status: 400, error: expect.stringContaining('the memory flush before the compaction failed') }),
    ]);
  });

  it("in a group writes the group's file, never a member's; a thread several people's direct chats share is not flushed", async () => {
    await send('remember the picnic is on Saturday', GROUP_ANN);
    await send('remember I bring the bread', GROUP_BOB);
    for (let i = 3; i <= 5; i++) await send(`turn ${i}`, i % 2 ? GROUP_ANN : GROUP_BOB);
    expect(await run()).toEqual({ handled: 5, replied: 5, errors: 0 });
    const group = route(GROUP_ANN);
    expect(readFileSync(join(dir.memory, `group-${group.groupKey}.md`), 'utf8')).toBe(`## Noted ${today()}\n- the picnic is on Saturday\n- I bring the bread\n`);
    expect(readdirSync(join(dir.memory, 'daily'))).toEqual([`group-${group.groupKey}`]);
    expect(existsSync(personFile(ANN)) || existsSync(personFile(BOB))).toBe(false);

    setConfig({ routing: { default: 'per-channel' }, context: { recent_messages: 4, keep_recent: 2 } });
    for (let i = 1; i <= 5; i++) await send(`remember private thing ${i}`, i % 2 ? ANN : BOB);
    await run();
    expect(records('compaction', ANN, 'per-channel')).toHaveLength(1);
    expect(records('memory', ANN, 'per-channel')).toEqual([]);
    expect(completionRequests(server).filter(isFlush)).toHaveLength(1); // the group's
    expect(existsSync(personFile(ANN)) || existsSync(personFile(BOB))).toBe(false);
  });

  it('can be turned off (context.memory_flush: false)', async () => {
    setConfig({ context: { recent_messages: 4, keep_recent: 2, memory_flush: false } });
    for (let i = 1; i <= 5; i++) await send(`remember fact ${i}`);
    await run();
    expect(records('compaction')).toHaveLength(1);
    expect(completionRequests(server).filter(isFlush)).toEqual([]);
  });
});

describe('flushMemory', () => {
  it('is applied from its record after a crash, asks once, adds no line twice, and covers each turn once', async () => {
    const thread = initThread(join(t.home, 'flush'), { home: t.home });
    const file = join(dir.memory, 'user-x.md');
    writeFileSync(file, '# Ann\n- I am allergic to peanuts\n');
    const inputs: string[] = [];
    const settings = {
      dir,
      thread: storedThread(thread),
      file,
      cap: 1_000,
      contextWindow: 100_000,
      mixedPeople: false,
      summarise: async (_system: string, input: string) => {
        inputs.push(input);
        return 'FACTS:\n- I am allergic to peanuts\n- my sister is Clara\nNOTES:\n- none';
      },
      redact: (text: string) => text,
      logger: createLogger(join(t.home, 'test.log')),
      inReplyTo: 0,
    };
    try {
      const push = (text: string, source = ANN) => thread.push({ source, type: 'message', content: JSON.stringify({ text }) });
      const ids = ['remember my sister is Clara', 'noted', 'ok', 'fine'].map((text, i) => push(text, i % 2 ? 'self' : ANN));
      const covered = thread.peek({ filter: "type = 'message'" });
      const after = '# Ann\n- I am allergic to peanuts\n\n## Noted ' + today() + '\n- my sister is Clara\n';

      const record = await flushMemory(settings, covered);
      expect(record).toMatchObject({ from_id: ids[0], to_id: ids[3], lines: ['- I am allergic to peanuts', '- my sister is Clara'], daily_lines: [] });
      expect(inputs[0]).toMatch(/^Already in memory:\n# Ann\n- I am allergic to peanuts\n\nConversation:\nUser: remember my sister is Clara\nAssistant: noted\n/);
      // What the file held already is not added again; no note, no daily file.
      expect(readFileSync(file, 'utf8')).toBe(after);
      expect(existsSync(join(dir.memory, 'daily'))).toBe(false);

      // A crash after the record, before the file was written: the retry (the same range) writes
      // it from the record, without asking again; once more changes nothing.
      writeFileSync(file, '# Ann\n- I am allergic to peanuts\n');
      expect(await flushMemory(settings, covered)).toEqual(record);
      expect(readFileSync(file, 'utf8')).toBe(after);
      expect(await flushMemory(settings, covered)).toEqual(record);
      expect(readFileSync(file, 'utf8')).toBe(after);
      expect(inputs).toHaveLength(1);
      expect(thread.peek({ filter: "type = 'record' AND subtype = 'memory'" })).toHaveLength(1);

      // A later compaction covering these turns again (the one before failed) and more: only the
      // new ones go into its flush.
      const later = push('remember I moved to Porto');
      expect(await flushMemory(settings, thread.peek({ filter: "type = 'message'" }))).toMatchObject({ from_id: later, to_id: later });
      expect(inputs[1]).toMatch(/\nConversation:\nUser: remember I moved to Porto$/);
      expect(thread.peek({ filter: "type = 'record' AND subtype = 'memory'" })).toHaveLength(2);
    } finally {
      thread.close();
    }
  });

  it('reads its answer as bounded single-line items under FACTS and NOTES, whatever the model wrote (property)', () => {
    expect(parseFlush('**FACTS:**\n- likes tea\n* has a cat\nchatter\nNOTES:\n- none\n- went to Porto')).toEqual({ facts: ['likes tea', 'has a cat'], notes: ['went to Porto'] });
    expect(parseFlush('- a fact before any heading')).toEqual({ facts: [], notes: [] });
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constantFrom('FACTS:', 'NOTES:', '- none', '', '- '),
            fc.string({ maxLength: 400 }),
            fc.string().map((s) => `- ${s}`),
          ),
          { maxLength: 80 },
        ),
        (lines) => {
          const { facts, notes } = parseFlush(lines.join('\n'));
          expect(facts.length).toBeLessThanOrEqual(20);
          expect(notes.length).toBeLessThanOrEqual(10);
          for (const item of [...facts, ...notes]) {
            expect(item).not.toMatch(/\n/);
            expect(item.length).toBeGreaterThan(0);
            expect(item.length).toBeLessThanOrEqual(300);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('a memory file over its cap', () => {
  const overCap = Array.from({ length: 60 }, (_, i) => `- note ${String(i).padStart(2, '0')}: the person likes tea, and said so again.`).join('\n');

  it('is condensed after the answer, under its cap, the old version archived and the change recorded; later turns read it whole', async () => {
    setConfig({ context: { memory_caps: { person: 200 } } });
    writeFileSync(personFile(), overCap);
    // The condensing call comes after the answer is in the thread.
    let answeredFirst: boolean | undefined;
    condenseStep = (request) => {
      answeredFirst = threadEvents(t.home, route().path, "type = 'message' AND source = 'self'").length === 1;
      return { kind: 'text', text: `## About the person\n- Condensed: likes tea. ${conversationOf(request)[0]!.split('\n')[0]}` };
    };
    await send('hello');
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
    expect(answeredFirst).toBe(true);
    // This turn read the file cut to its cap (the fallback), and it was condensed after.
    expect(systemOf(turns()[0]!)).toContain('[... memory truncated:');
    const condensed = readFileSync(personFile(), 'utf8');
    expect(condensed).toBe('## About the person\n- Condensed: likes tea. Length: at most 90 words (about 120 tokens); it is about 780 tokens now.\n');
    const [record, ...more] = records<MemoryCondenseRecord>('memory');
    expect(more).toEqual([]);
    expect(record).toEqual({
      action: 'condense',
      file: `memory/user-${route().peerKey}.md`,
      layer: 'person',
      version: expect.stringMatching(/^[0-9a-f]{16}$/),
      archive: expect.stringMatching(new RegExp(`^memory/archive/user-${route().peerKey}/${today()}T[0-9-]+\\.[0-9]+Z\\.md$`)),
      tokens_before: 780,
      tokens_after: Math.ceil(condensed.trim().length / 4),
      cap: 200,
    });
    expect(record!.tokens_after).toBeLessThanOrEqual(200);
    expect(readFileSync(join(dir.root, record!.archive), 'utf8')).toBe(`${overCap}\n`);
    // Its conversation's search still finds what only the archived version holds.
    expect((await searchMemory(t.home, 'helper', 'note 42', {}, { THECLAW_AGENT: 'helper', THECLAW_CONVERSATION: route().threadId }))[0]).toMatchObject({ where: record!.archive });

    await send('and now?');
    await run();
    expect(systemOf(turns()[1]!)).toContain(`## What I know about this person\n${condensed}`);
    expect(systemOf(turns()[1]!)).not.toContain('[... memory truncated');
    expect(completionRequests(server).filter(isCondense)).toHaveLength(1);
  });

  it('stays cut to its cap when the condensed text would still be over it, tried once per version, and the answers go out', async () => {
    setConfig({ context: { memory_caps: { person: 200 } } });
    writeFileSync(personFile(), overCap);
    condenseStep = () => ({ kind: 'text', text: overCap.slice(0, 1_000) });
    await send('one');
    await send('two');
    expect(await run()).toEqual({ handled: 2, replied: 2, errors: 0 });
    expect(readFileSync(personFile(), 'utf8')).toBe(overCap);
    expect(existsSync(join(dir.memory, 'archive'))).toBe(false);
    expect(records('memory')).toEqual([]);
    expect(completionRequests(server).filter(isCondense)).toHaveLength(1);
    expect(records<ErrorRecord>('error').map((record) => record.error)).toEqual([
      expect.stringContaining('is about 780 tokens, over its cap of 200 (context.memory_caps.person): its middle is left out'),
      expect.stringContaining('could not be condensed, so its middle stays left out of the context until the file changes: the condensed text is still about 250 tokens, over the cap of 200'),
    ]);
    for (const request of turns()) expect(systemOf(request)).toContain('[... memory truncated:');
    const replies = threadEvents(t.home, route().path, "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content).text);
    expect(replies).toEqual(['echo: one', 'echo: two']);
  });
});
