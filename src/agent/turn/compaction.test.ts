import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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
  type RecordedRequest,
  type TestHome,
  storedThread,
} from '../../testing/index.js';
import { initThread, type ThreadEvent } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { compactIfNeeded, SUMMARISER_PROMPT } from './compaction.js';
import { FLUSH_PROMPT } from './memory-flush.js';
import { writeSummary } from '../memory/memory-store.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { defaultSource, sendToAgent } from '../send.js';
import type { CompactionRecord } from '../types.js';

// Compaction through the whole run loop, against the fake server, whose default step echoes the
// last user message: for the summarising call that is the summariser's input, so the "summary"
// holds the covered turns verbatim and a fact from turn 1 can be traced into later requests.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
/** The terminal as the OS user: what `agent send` uses outside a turn. */
const source = defaultSource({});
const WINDOW = 2000;
const THRESHOLD = 0.7;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  server = await startFakeOpenAI();
  writeFakePaiConfig(t.home, server, { contextWindow: WINDOW });
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, context: { keep_recent: 2, compaction_threshold: THRESHOLD } }));
  // A system prompt of a realistic share of the small window.
  writeFileSync(join(dir.memory, 'agent.md'), Array.from({ length: 12 }, (_, i) => `- note ${i}: keep answers short and check facts before replying.`).join('\n'));
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

/** The calls of the turns and the compaction; the memory flush beside it is memory-upkeep.test.ts's. */
const completions = () => completionRequests(server).filter((request) => systemPromptOf(request) !== FLUSH_PROMPT);
const systemOf = systemPromptOf;
const nonSystem = conversationOf;
const isSummariser = (request: RecordedRequest) => systemOf(request) === SUMMARISER_PROMPT;
const occurrences = (text: string, part: string) => text.split(part).length - 1;

const events = (path: string, filter?: string): ThreadEvent[] => threadEvents(t.home, path, filter);

describe('compaction in the run loop', () => {
  it('folds older turns into the thread memory file once the context passes the threshold, keeping a turn-1 fact', async () => {
    await sendToAgent(t.home, 'helper', { text: 'my cat is called Zorro', source });
    for (let i = 2; i <= 45; i++) await sendToAgent(t.home, 'helper', { text: `turn ${String(i).padStart(2, '0')} ok`, source });
    expect(await runAgent('helper', { home: t.home, env: t.env })).toEqual({ handled: 45, replied: 45, errors: 0 });

    const route = routeMessage(dir, 'per-peer', source);
    const summaryFile = join(dir.memory, `thread-${route.threadId}.md`);
    expect(existsSync(summaryFile)).toBe(true);
    const compactions = events(route.path, "type = 'record' AND subtype = 'compaction'").map((event) => JSON.parse(event.content) as CompactionRecord);
    expect(compactions.length).toBeGreaterThanOrEqual(1);
    const inbound = events(route.path, "type = 'message'").filter((event) => event.source !== 'self');
    const [first] = compactions;
    expect(first).toEqual({ from_id: inbound[0]!.id, to_id: expect.any(Number), summary_file: `thread-${route.threadId}.md`, summary_chars: expect.any(Number) });
    expect(first!.to_id).toBeGreaterThan(first!.from_id);
    // Each compaction starts after the previous one ended.
    compactions.slice(1).forEach((record, i) => {
      expect(record.from_id).toBeGreaterThan(compactions[i]!.to_id);
    });

    // The summarising call: independent (no tools, no session), its input has the turn-1 fact.
    const requests = completions();
    const at = requests.findIndex(isSummariser);
    const summariser = requests[at]!;
    expect(summariser.body.tools ?? []).toEqual([]);
    expect(nonSystem(summariser)).toHaveLength(1);
    expect(nonSystem(summariser)[0]).toMatch(/^Conversation to add:\nUser: my cat is called Zorro\nAssistant: echo: my cat is called Zorro\nUser: turn 02 ok\n/);

    // The request right after it: under the threshold, the summary once (in the system prompt),
    // and none of the covered messages again as history.
    const next = requests[at + 1]!;
    expect(isSummariser(next)).toBe(false);
    expect(next.bytes / 4).toBeLessThan(THRESHOLD * WINDOW);
    const summary = `echo: ${nonSystem(summariser)[0]}`;
    expect(first!.summary_chars).toBe(summary.length);
    expect(occurrences(systemOf(next), summary)).toBe(1);
    expect(occurrences(nonSystem(next).join('\n'), 'Zorro')).toBe(0);
    expect(systemOf(next)).toContain('## Summary of this conversation so far\necho: Conversation to add:\nUser: my cat is called Zorro');
    const coveredTexts = inbound.filter((event) => event.id <= first!.to_id).map((event) => parseMessageContent(event.content).text);
    for (const text of coveredTexts) expect(nonSystem(next)).not.toContain(text);
    const kept = inbound
      .filter((event) => event.id > first!.to_id)
      .slice(0, 2)
      .map((event) => parseMessageContent(event.content).text);
    expect(nonSystem(next)).toEqual([kept[0], `echo: ${kept[0]}`, kept[1]]);

    // No call ever overflowed the window, and every later call still knows the cat's name.
    for (const request of requests) expect(request.bytes / 4).toBeLessThan(WINDOW);
    for (const request of requests.slice(at + 1)) expect(JSON.stringify(request.body)).toContain('Zorro');
    // The file holds the newest summary.
    expect(readFileSync(summaryFile, 'utf8')).toContain('Zorro');

    // A later run: the fact reaches the model through the summary.
    await sendToAgent(t.home, 'helper', { text: 'what is my cat called?', source });
    await runAgent('helper', { home: t.home, env: t.env });
    const last = completions().at(-1)!;
    expect(nonSystem(last).at(-1)).toBe('what is my cat called?');
    expect(systemOf(last)).toContain('Zorro');
    expect(last.bytes / 4).toBeLessThan(WINDOW);
  });

  it('does not compact a thread below the threshold', async () => {
    await sendToAgent(t.home, 'helper', { text: 'hello', source });
    await runAgent('helper', { home: t.home, env: t.env });
    const route = routeMessage(dir, 'per-peer', source);
    expect(existsSync(join(dir.memory, `thread-${route.threadId}.md`))).toBe(false);
    expect(events(route.path, "type = 'record' AND subtype = 'compaction'")).toEqual([]);
    expect(completions().some(isSummariser)).toBe(false);
  });
});

describe('compactIfNeeded', () => {
  it('compacts when more messages wait than a call carries, even far below the size threshold', async () => {
    const thread = initThread(join(t.home, 'count'), { home: t.home });
    try {
      const ids = Array.from({ length: 8 }, (_, i) => thread.push({ source: i % 2 ? source : 'self', type: 'message', content: JSON.stringify({ text: `m${i}` }) }));
      const current = thread.push({ source, type: 'message', content: JSON.stringify({ text: 'now' }) });
      const base = {
        thread: storedThread(thread),
        memoryDir: t.home,
        summaryFile: join(t.home, 'count.md'),
        logger: { warn: () => {} },
        currentId: current,
        system: 'S',
        input: 'now',
        contextWindow: 1_000_000,
        threshold: 0.7,
        keepRecent: 2,
        mixedPeople: false,
        summarise: async () => 'summary',
      };
      expect(await compactIfNeeded({ ...base, recentMessages: 8 })).toEqual({ afterId: 0, compacted: null });
      const result = await compactIfNeeded({ ...base, recentMessages: 5 });
      expect(result.compacted).toMatchObject({ from_id: ids[0], to_id: ids[5] });
      // Recorded once, even when the same range is compacted again after a crash.
      expect(thread.peek({ filter: "type = 'record' AND subtype = 'compaction'" })).toHaveLength(1);
    } finally {
      thread.close();
    }
  });

  it('keeps the newest turns, merges the earlier summary and records the covered range', async () => {
    const thread = initThread(join(t.home, 'thread'), { home: t.home });
    const summaryFile = join(t.home, 'summary.md');
    const push = (i: number) => thread.push({ source: i % 2 ? source : 'self', type: 'message', content: JSON.stringify({ text: `message ${i} ${'x'.repeat(100)}` }) });
    try {
      const ids = [1, 2, 3, 4, 5, 6].map(push);
      thread.push({ source: 'self', type: 'record', subtype: 'usage', content: '{}' });
      const current = thread.push({ source, type: 'message', content: JSON.stringify({ text: 'now' }) });
      const inputs: string[] = [];
      const summarise = async (system: string, input: string) => {
        expect(system).toBe(SUMMARISER_PROMPT);
        inputs.push(input);
        return `  summary ${inputs.length}  `;
      };
      // Six messages of ~140 characters (as session JSON) pass 0.2 × 1000 tokens.
      const base = {
        thread: storedThread(thread),
        memoryDir: t.home,
        summaryFile,
        logger: { warn: () => {} },
        currentId: current,
        system: 'S',
        input: 'now',
        contextWindow: 1000,
        threshold: 0.2,
        recentMessages: 30,
        keepRecent: 2,
        mixedPeople: false,
        summarise,
      };
      const result = await compactIfNeeded(base);
      expect(result).toEqual({ afterId: ids[3], compacted: { from_id: ids[0], to_id: ids[3], summary_file: 'summary.md', summary_chars: 9 } });
      expect(readFileSync(summaryFile, 'utf8')).toBe('summary 1\n');
      expect(inputs[0]).toMatch(/^Conversation to add:\nUser: message 1 x+\nAssistant: message 2 x+\nUser: message 3 x+\nAssistant: message 4 x+$/);

      // Below the threshold now; and past it, nothing beyond keep_recent is left to fold.
      expect(await compactIfNeeded(base)).toEqual({ afterId: ids[3], compacted: null });
      expect(await compactIfNeeded({ ...base, threshold: 0.01 })).toEqual({ afterId: ids[3], compacted: null });
      expect(inputs).toHaveLength(1);

      // More turns: the earlier summary goes into the next summarising call, which covers only new turns.
      const later = [7, 8].map(push);
      const now = thread.push({ source, type: 'message', content: JSON.stringify({ text: 'later' }) });
      const second = await compactIfNeeded({ ...base, currentId: now, threshold: 0.1 });
      // The earlier current message ('now') is history now, and is folded too.
      expect(second).toEqual({ afterId: current, compacted: expect.objectContaining({ from_id: ids[4], to_id: current }) });
      expect(inputs[1]).toMatch(/^Earlier summary:\nsummary 1\n\nConversation to add:\nUser: message 5 x+\nAssistant: message 6 x+\nUser: now$/);
      expect(readFileSync(summaryFile, 'utf8')).toBe('summary 2\n');
      expect(later).toHaveLength(2);
    } finally {
      thread.close();
    }
  });
});

describe('writeSummary', () => {
  it('never writes through a link a sandboxed command left at its temp name', () => {
    const victim = join(t.home, 'outside.txt');
    writeFileSync(victim, 'untouched\n');
    const file = join(dir.memory, 'thread-x.md');
    symlinkSync(victim, `${file}.${process.pid}.tmp`);
    writeSummary(dir.memory, file, 'the summary');
    expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
    expect(readFileSync(file, 'utf8')).toBe('the summary\n');
  });
});

describe('compactIfNeeded with a link in the summary’s place', () => {
  it('reads it as empty (said in the log), never its target, and writes the summary in its place, never through it', async () => {
    const secret = join(t.home, 'service.env');
    writeFileSync(secret, 'OPENAI_API_KEY=sk-planted-secret\n');
    const summaryFile = join(dir.memory, 'thread-linked.md');
    symlinkSync(secret, summaryFile);
    const thread = initThread(join(t.home, 'linked'), { home: t.home });
    try {
      for (let i = 0; i < 4; i++) thread.push({ source: i % 2 ? source : 'self', type: 'message', content: JSON.stringify({ text: `m${i}` }) });
      const current = thread.push({ source, type: 'message', content: JSON.stringify({ text: 'now' }) });
      const inputs: string[] = [];
      const warnings: string[] = [];
      const summarise = async (_system: string, input: string) => {
        inputs.push(input);
        return 'summary';
      };
      const args = {
        thread: storedThread(thread),
        memoryDir: dir.memory,
        summaryFile,
        logger: { warn: (line: string) => warnings.push(line) },
        currentId: current,
        system: 'S',
        input: 'now',
        contextWindow: 1_000_000,
        threshold: 0.7,
        recentMessages: 2,
        keepRecent: 1,
        mixedPeople: false,
        summarise,
      };
      expect((await compactIfNeeded(args)).compacted).not.toBeNull();
      expect(inputs.join('')).not.toContain('sk-planted-secret');
      expect(warnings).toEqual([
        `run: ${summaryFile} is a link — the runtime does not follow links in a sandbox-writable directory, so it is read as empty - remove it (rm ${summaryFile}) and put a plain file there`,
      ]);
      expect(readFileSync(secret, 'utf8')).toBe('OPENAI_API_KEY=sk-planted-secret\n');
      expect(readFileSync(summaryFile, 'utf8')).toBe('summary\n');
    } finally {
      thread.close();
    }
  });
});
