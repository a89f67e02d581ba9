import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
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
  type FakeStep,
  type LooseJson,
  type RecordedRequest,
  type TestHome,
} from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { SUMMARISER_PROMPT } from './compaction.js';
import { CONDENSE_PROMPT } from './memory-condense.js';
import { FLUSH_PROMPT } from './memory-flush.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { defaultSource, sendToAgent } from '../send.js';
import type { ErrorRecord } from '../types.js';

// A provider whose real window (the fake's contextWindow) is smaller than the agent believes (the
// pai config's context_window): the agent's own estimate never triggers compaction, so every
// shortening seen here is the answer to the provider's refusal.

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
/** The terminal as the OS user: what `agent send` uses outside a turn. */
const source = defaultSource({});
/** Tokens the fake provider accepts. */
const PROVIDER_WINDOW = 5_000;
const BELIEVED_WINDOW = 16_000;
const KEEP_RECENT = 2;

const systemOf = systemPromptOf;
const historyOf = conversationOf;
const isSummariser = (request: RecordedRequest) => systemOf(request) === SUMMARISER_PROMPT;
const isCondense = (request: RecordedRequest) => systemOf(request) === CONDENSE_PROMPT;
/** The calls of the turns and the compaction; the memory flush beside it is memory-upkeep.test.ts's. */
const completions = () => completionRequests(server).filter((request) => systemOf(request) !== FLUSH_PROMPT && !isCondense(request));
const refused = (request: RecordedRequest) => request.bytes / 4 > PROVIDER_WINDOW;
const route = () => routeMessage(dir, 'per-peer', source);
const records = (subtype: string) => threadEvents(t.home, route().path, `type = 'record' AND subtype = '${subtype}'`).map((event) => JSON.parse(event.content) as LooseJson);
/** The agent's replies in this run (the earlier turns have no in_reply_to). */
const replies = () =>
  threadEvents(t.home, route().path, "type = 'message' AND source = 'self'")
    .map((event) => parseMessageContent(event.content))
    .filter((content) => content.in_reply_to !== undefined)
    .map((content) => content.text);
const run = () => runAgent('helper', { home: t.home, env: t.env });

/** The summariser's answer, and the condensing call's; every other call is answered `answer`. */
let summaryStep: FakeStep;
let condenseStep: FakeStep;

async function start(): Promise<void> {
  server = await startFakeOpenAI({
    contextWindow: PROVIDER_WINDOW,
    defaultStep: (request) => (isSummariser(request) ? summaryStep : isCondense(request) ? condenseStep : { kind: 'text', text: 'answer' }),
  });
  writeFakePaiConfig(t.home, server, { contextWindow: BELIEVED_WINDOW });
}

/** Earlier turns of the conversation, each `chars` long: together far over the provider's window. */
function earlierTurns(count: number, chars: number): string[] {
  const texts = Array.from({ length: count }, (_, i) => `turn ${i} ${'x'.repeat(chars)}`);
  const thread = openThread(route().path, { home: t.home, create: true });
  try {
    texts.forEach((text, i) => {
      thread.push({ source: i % 2 ? 'self' : source, type: 'message', content: JSON.stringify({ text }) });
    });
  } finally {
    thread.close();
  }
  return texts;
}

function setContext(patch: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, context: { keep_recent: KEEP_RECENT, ...patch } }));
}

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  setContext({});
  summaryStep = { kind: 'text', text: 'SUMMARY: the user counted turns' };
  condenseStep = { kind: 'text', text: 'CONDENSED' };
  await start();
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

/**
 * Earlier turns far over the provider's window, then a message, answered: the first call refused,
 * the summariser called, the call made once more. Returns the turns and the two calls.
 */
async function answerOverTheWindow(): Promise<{ turns: string[]; first: RecordedRequest; retry: RecordedRequest }> {
  const turns = earlierTurns(12, 2_000);
  await sendToAgent(t.home, 'helper', { text: 'and now?', source });
  expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });
  const [first, summariser, retry, ...more] = completions();
  expect(more).toEqual([]);
  expect(refused(first!)).toBe(true);
  expect(isSummariser(summariser!)).toBe(true);
  expect(refused(retry!)).toBe(false);
  return { turns, first: first!, retry: retry! };
}

describe('a context the provider refuses as too long', () => {
  it('is compacted and the call made once more, which answers', async () => {
    const { turns, first, retry } = await answerOverTheWindow();
    expect(historyOf(first)).toEqual([...turns, 'and now?']);
    // The retry: the summary in the system prompt, only the turns a compaction keeps, then the message.
    expect(systemOf(retry)).toContain('## Summary of this conversation so far\nSUMMARY: the user counted turns');
    expect(historyOf(retry)).toEqual([...turns.slice(-KEEP_RECENT), 'and now?']);
    expect(replies()).toEqual(['answer']);
    expect(records('compaction')).toEqual([expect.objectContaining({ summary_chars: 'SUMMARY: the user counted turns'.length })]);
    expect(records('error')).toEqual([]);
  });

  it('still answers when the summary call fails, and records the failed compaction', async () => {
    summaryStep = { kind: 'error', status: 400, message: 'the summariser is broken' };
    const { turns, retry } = await answerOverTheWindow();
    // No summary: the newest turns alone, as many as a compaction would have kept.
    expect(systemOf(retry)).not.toContain('Summary of this conversation');
    expect(historyOf(retry)).toEqual([...turns.slice(-KEEP_RECENT), 'and now?']);
    expect(replies()).toEqual(['answer']);
    expect(records('compaction')).toEqual([]);
    const inbound = threadEvents(t.home, route().path, "type = 'message' AND source != 'self'").at(-1)!;
    expect(records('error')).toEqual([
      {
        in_reply_to: inbound.id,
        stage: 'compaction',
        severity: 'warning',
        kind: 'invalid_request',
        status: 400,
        error: expect.stringMatching(/^the summary of the older messages failed, so the answer sees only the newest ones: .*HTTP 400.*the summariser is broken/),
      } satisfies ErrorRecord,
    ]);
  });

  it('still answers when a compaction the agent began itself fails, with the newest messages that fit', async () => {
    // The agent's own estimate passes the threshold here: it compacts before any refusal.
    summaryStep = { kind: 'error', status: 400 };
    setContext({ compaction_threshold: 0.2 });
    const turns = earlierTurns(12, 2_000);
    await sendToAgent(t.home, 'helper', { text: 'and now?', source });
    expect(await run()).toEqual({ handled: 1, replied: 1, errors: 0 });

    const [summariser, call, ...more] = completions();
    expect(more).toEqual([]);
    expect(isSummariser(summariser!)).toBe(true);
    const history = historyOf(call!).slice(0, -1);
    expect(history.length).toBeGreaterThan(0);
    expect(history.length).toBeLessThan(turns.length);
    expect(history).toEqual(turns.slice(-history.length));
    expect(call!.bytes / 4).toBeLessThan(0.2 * BELIEVED_WINDOW + 1_000); // the tool definition is not counted
    expect(records('error')).toEqual([expect.objectContaining({ stage: 'compaction', kind: 'invalid_request' })]);
  });

  it("ends in the message's error outcome when the retry is refused too", async () => {
    // The message alone is over the window: nothing to compact, and the retry cannot fit.
    await sendToAgent(t.home, 'helper', { text: 'y'.repeat(4 * PROVIDER_WINDOW), source });
    expect(await run()).toEqual({ handled: 1, replied: 0, errors: 1 });
    expect(completions()).toHaveLength(2);
    expect(completions().every(refused)).toBe(true);
    // The message's one outcome, where every unanswerable message ends (and its notice applies).
    const inbound = threadEvents(t.home, route().path, "type = 'message' AND source != 'self'").at(-1)!;
    expect(records('error')).toEqual([expect.objectContaining({ in_reply_to: inbound.id, stage: 'llm', kind: 'context_length', status: 400 })]);
    const notice = threadEvents(t.home, route().path, "type = 'message' AND source = 'self'").map((event) => JSON.parse(event.content) as { notice?: string; text: string; in_reply_to: number });
    expect(notice).toEqual([expect.objectContaining({ notice: 'error', in_reply_to: inbound.id, text: expect.stringContaining('too long for the model') })]);
    const thread = openThread(route().path, { home: t.home });
    try {
      expect(thread.findByKey(`reply:${inbound.id}`)).toBeDefined();
    } finally {
      thread.close();
    }
  });

  it('is not tried again once commands ran for the message, which would run them twice', async () => {
    // The command's output pushes the second call of the turn over the window.
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: `head -c ${4 * PROVIDER_WINDOW} /dev/zero | tr '\\0' z` } });
    await sendToAgent(t.home, 'helper', { text: 'run it', source });
    expect(await run()).toEqual({ handled: 1, replied: 0, errors: 1 });
    expect(completions()).toHaveLength(2);
    expect(refused(completions()[1]!)).toBe(true);
    expect(records('toolcall')).toHaveLength(1);
    expect(records('error')).toEqual([expect.objectContaining({ stage: 'llm', kind: 'context_length' })]);
  });
});

describe('memory over its cap', () => {
  it('is cut in the middle with a marker while it cannot be condensed, and warned about once per version of the file', async () => {
    // Condensing fails (memory-upkeep.test.ts shows it succeed): the cut is the fallback.
    condenseStep = { kind: 'error', status: 400, message: 'the condenser is broken' };
    const agentMemory = join(dir.memory, 'agent.md');
    const lines = Array.from({ length: 200 }, (_, i) => `- note ${String(i).padStart(3, '0')}: the user likes short answers.`);
    writeFileSync(agentMemory, lines.join('\n'));
    setContext({ memory_caps: { agent: 500 } });
    const tokens = Math.ceil(lines.join('\n').length / 4);

    await sendToAgent(t.home, 'helper', { text: 'one', source });
    await sendToAgent(t.home, 'helper', { text: 'two', source });
    expect(await run()).toEqual({ handled: 2, replied: 2, errors: 0 });

    for (const request of completions()) {
      const memory = systemOf(request).split('## What I have learned (my agent memory)\n')[1]!.split('\n\n## ')[0]!;
      expect(memory).toContain(`[... memory truncated: ${tokens - 500} tokens over the cap of 500; see ${agentMemory}]`);
      expect(memory.startsWith(`${lines[0]}\n${lines[1]}\n`)).toBe(true);
      expect(memory.endsWith(`${lines.at(-2)}\n${lines.at(-1)}`)).toBe(true);
      expect(Math.ceil(memory.length / 4)).toBeLessThanOrEqual(500);
    }
    const warning = {
      stage: 'memory',
      severity: 'warning',
      error: expect.stringContaining(`${agentMemory} is about ${tokens} tokens, over its cap of 500 (context.memory_caps.agent)`),
    };
    const failed = {
      stage: 'memory',
      severity: 'warning',
      kind: 'invalid_request',
      status: 400,
      error: expect.stringContaining('memory/agent.md is over its cap of 500 (context.memory_caps.agent) and could not be condensed'),
    };
    expect(records('error')).toEqual([expect.objectContaining(warning), expect.objectContaining(failed)]);
    // Condensing was tried once for this version of the file, not once per turn.
    expect(completionRequests(server).filter(isCondense)).toHaveLength(1);

    // A new version of the file is warned about again, once, and tried again, once.
    appendFileSync(agentMemory, '\n- note 200: and likes cats.');
    await sendToAgent(t.home, 'helper', { text: 'three', source });
    await sendToAgent(t.home, 'helper', { text: 'four', source });
    await run();
    expect(records('error')).toHaveLength(4);
    expect(completionRequests(server).filter(isCondense)).toHaveLength(2);
    expect(systemOf(completions().at(-1)!)).toContain('- note 200: and likes cats.');
    expect(replies()).toEqual(['answer', 'answer', 'answer', 'answer']);
  });

  it('is put in whole when it fits', async () => {
    writeFileSync(join(dir.memory, 'agent.md'), 'the user is called Ada');
    await sendToAgent(t.home, 'helper', { text: 'hi', source });
    await run();
    expect(systemOf(completions()[0]!)).toContain('## What I have learned (my agent memory)\nthe user is called Ada\n\n## ');
    expect(records('error')).toEqual([]);
  });
});
