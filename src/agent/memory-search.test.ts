import Database from 'better-sqlite3';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { BWRAP, createTestHome, expectClawError, NEEDS_BWRAP, runTool, startFakeOpenAI, threadEvents, writeFakePaiConfig, type LooseJson, type TestHome } from '../testing/index.js';
import { evalHistory, FACTS } from '../testing/memory-eval.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { chunkMarkdown } from './memory-chunks.js';
import { conversationScope, ftsQuery, MemoryIndex } from './memory-index.js';
import { searchMemory } from './memory-search.js';
import { routeMessage } from './router.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';

let t: TestHome;
let dir: AgentDir;
const peer = (id: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: id, peerId: id });
const ANN = peer('5151');
const BOB = peer('6262');

beforeEach(() => {
  t = createTestHome();
  dir = initAgent(t.home, 'helper');
});
afterEach(() => t.cleanup());

/** Writes a conversation of `turns` into the sender's thread; returns its thread id. */
function converse(source: string, turns: { person: string; agent: string }[]): string {
  const route = routeMessage(dir, 'per-peer', source);
  const thread = openThread(route.path, { home: t.home, create: true });
  try {
    for (const turn of turns) {
      thread.push({ source, type: 'message', content: JSON.stringify({ text: turn.person, attachments: [] }) });
      thread.push({ source: 'self', type: 'message', content: JSON.stringify({ text: turn.agent, attachments: [] }) });
    }
  } finally {
    thread.close();
  }
  return route.threadId;
}

const memoryOf = (source: string) => join(dir.memory, `user-${routeMessage(dir, 'per-peer', source).peerKey}.md`);

describe('memory search', () => {
  it('cuts a memory file into paragraphs under their headings, with their lines', () => {
    expect(chunkMarkdown('# Me\n\n## Family\nSister Clara\nlives in Lisbon\n\n- likes tea\n- hates coffee\n\n## Work\nengineer\n')).toEqual([
      { text: 'Family\nSister Clara\nlives in Lisbon', line: 4 },
      { text: 'Family\n- likes tea\n- hates coffee', line: 7 },
      { text: 'Work\nengineer', line: 11 },
    ]);
  });

  it('turns any text into a query FTS5 accepts, or none when it has no words (property)', () => {
    const db = new Database(':memory:');
    db.exec("CREATE VIRTUAL TABLE c USING fts5(text, tokenize = 'porter unicode61'); INSERT INTO c VALUES ('the sister lives in Lisbon');");
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), (text) => {
        const query = ftsQuery(text);
        if (query === null) return;
        db.prepare('SELECT * FROM c WHERE c MATCH ?').all(query); // throws on a syntax error
      }),
      { numRuns: 400 },
    );
    expect(ftsQuery('"Lisbon" OR NOT (sister*)')).toBe('"Lisbon" OR "NOT" OR "sister"'); // an operator is a word like any other
    expect(ftsQuery('what is the')).toBeNull();
  });

  it('finds the facts of a 240-turn conversation and its memory file asked in other words: recall@5 of the evaluation set ≥ 0.8', () => {
    const history = evalHistory();
    const conversation = converse(ANN, history.turns);
    writeFileSync(memoryOf(ANN), history.memoryFile);
    const index = MemoryIndex.open(dir);
    try {
      expect(index.refresh()).toEqual({ files: 1, messages: 480 });
      const scope = conversationScope(dir, conversation);
      const found = FACTS.filter((fact) => index.search(fact.question, scope, 5).some((hit) => hit.text.includes(fact.said)));
      const recall = found.length / FACTS.length;
      console.log(
        `memory search (FTS5, BM25): recall@5 ${recall.toFixed(2)} (${found.length}/${FACTS.length} questions over ${history.turns.length} turns); missed: ${
          FACTS.filter((f) => !found.includes(f))
            .map((f) => JSON.stringify(f.question))
            .join(', ') || 'none'
        }`,
      );
      expect(FACTS.length).toBeGreaterThanOrEqual(30);
      expect(recall).toBeGreaterThanOrEqual(0.8);
    } finally {
      index.close();
    }
  });

  it("never shows a conversation another person's memory or messages, whatever is searched (property)", () => {
    const ann = converse(ANN, [{ person: 'My sister Clara lives in Lisbon.', agent: 'Noted.' }]);
    const bob = converse(BOB, [{ person: 'My sister Clara lives in Paris.', agent: 'Noted.' }]);
    writeFileSync(memoryOf(ANN), 'Ann: sister Clara, Lisbon, cello\n');
    writeFileSync(memoryOf(BOB), 'Bob: sister Clara, Paris, violin\n');
    writeFileSync(join(dir.memory, 'agent.md'), 'I help with sisters and cities.\n');
    // Each person's daily notes and archived versions too (memory-flush.ts, memory-condense.ts).
    for (const [source, text] of [
      [ANN, 'Ann: played the cello for Clara in Lisbon, diary'],
      [BOB, 'Bob: played the violin for Clara in Paris, diary'],
    ] as const) {
      const name = basename(memoryOf(source), '.md');
      mkdirSync(join(dir.memory, 'daily', name), { recursive: true });
      writeFileSync(join(dir.memory, 'daily', name, '2025-03-01.md'), `# 2025-03-01\n\n## 10:00 UTC\n- ${text}\n`);
      mkdirSync(join(dir.memory, 'archive', name), { recursive: true });
      writeFileSync(join(dir.memory, 'archive', name, '2025-03-02T00-00-00.000Z.md'), `${text.split(':')[0]}: archived, sister Clara\n`);
    }
    const words = ['sister', 'Clara', 'Lisbon', 'Paris', 'cello', 'violin', 'Noted', 'cities', 'Ann', 'Bob', 'diary', 'archived', 'played'];
    const index = MemoryIndex.open(dir);
    try {
      index.refresh();
      fc.assert(
        fc.property(fc.subarray(words, { minLength: 1 }), fc.boolean(), (query, asAnn) => {
          const [mine, theirs] = asAnn ? [ann, bob] : [bob, ann];
          const hits = index.search(query.join(' '), conversationScope(dir, mine), 20);
          for (const hit of hits) {
            expect(hit.where).not.toBe(theirs);
            expect(hit.where).not.toContain(`user-${theirs.replace(/^peer-/, '')}`);
            expect(hit.text).not.toMatch(asAnn ? /Paris|Bob|violin/ : /Lisbon|Ann:|cello/);
          }
        }),
        { numRuns: 200 },
      );
      // Their own daily notes and archived versions are found, a note with its day.
      expect(index.search('diary cello', conversationScope(dir, ann), 1)).toEqual([
        expect.objectContaining({ kind: 'memory', where: `memory/daily/user-telegram.main.5151/2025-03-01.md`, time: '2025-03-01' }),
      ]);
      expect(index.search('archived', conversationScope(dir, bob), 5).map((hit) => [hit.where, hit.time])).toEqual([['memory/archive/user-telegram.main.6262/2025-03-02T00-00-00.000Z.md', null]]);
    } finally {
      index.close();
    }
  });

  it('indexes only what changed: a new message, an edited file; a removed file leaves the index', () => {
    const conversation = converse(ANN, [{ person: 'The boiler is old.', agent: 'Noted.' }]);
    writeFileSync(memoryOf(ANN), 'Likes tea.\n');
    const index = MemoryIndex.open(dir);
    try {
      expect(index.refresh()).toEqual({ files: 1, messages: 2 });
      expect(index.refresh()).toEqual({ files: 0, messages: 0 });
      converse(ANN, [{ person: 'The boiler was replaced.', agent: 'Good.' }]);
      writeFileSync(memoryOf(ANN), 'Likes coffee now.\n');
      expect(index.refresh()).toEqual({ files: 1, messages: 2 });
      const scope = conversationScope(dir, conversation);
      expect(index.search('tea', scope).map((hit) => hit.text)).toEqual([]);
      expect(index.search('coffee', scope).map((hit) => hit.text)).toEqual(['Likes coffee now.']);
      expect(index.search('boiler', scope)).toHaveLength(2);
    } finally {
      index.close();
    }
  });

  it('in a turn searches that conversation only: --peer naming another and --all are refused there', () => {
    const ann = converse(ANN, [{ person: 'Ann likes sailing.', agent: 'Noted.' }]);
    converse(BOB, [{ person: 'Bob likes sailing.', agent: 'Noted.' }]);
    const turn = { THECLAW_AGENT: 'helper', THECLAW_CONVERSATION: ann };
    expect(searchMemory(t.home, 'helper', 'sailing', {}, turn).map((hit) => hit.text)).toEqual(['Ann likes sailing.']);
    expectClawError(() => searchMemory(t.home, 'helper', 'sailing', { all: true }, turn), 'usage');
    expectClawError(() => searchMemory(t.home, 'helper', 'sailing', { peer: 'peer-telegram.main.6262' }, turn), 'usage');
    // The owner, at the terminal: the agent's memory, a conversation, or everything.
    expect(searchMemory(t.home, 'helper', 'sailing', {}, {})).toEqual([]);
    expect(searchMemory(t.home, 'helper', 'sailing', { all: true }, {})).toHaveLength(2);
  });

  it('agent memory search, show and edit from the command line', async () => {
    const ann = converse(ANN, [{ person: 'My first car was a red Fiat.', agent: 'Noted.' }]);
    const search = await runTool('agent', ['memory', 'search', 'helper', 'first car', '--peer', ann, '--json'], t.env);
    expect(search.code, search.stderr).toBe(0);
    expect(JSON.parse(search.stdout)).toEqual([expect.objectContaining({ kind: 'message', where: ann, from: ANN, text: 'My first car was a red Fiat.' })]);
    const editor = join(t.home, 'editor.sh');
    writeFileSync(editor, '#!/bin/sh\nprintf "Knows the owner since 2020.\\n" >> "$1"\n');
    chmodSync(editor, 0o755);
    expect((await runTool('agent', ['memory', 'edit', 'helper'], { ...t.env, EDITOR: editor, VISUAL: '' })).code).toBe(0);
    expect(readFileSync(join(dir.memory, 'agent.md'), 'utf8')).toContain('Knows the owner since 2020.');
    expect((await runTool('agent', ['memory', 'show', 'helper'], t.env)).stdout).toContain('== memory/agent.md\n');
    const outside = await runTool('agent', ['memory', 'edit', 'helper', '--file', '../config.yaml'], { ...t.env, EDITOR: editor });
    expect(outside.code).toBe(2);
  });

  it.skipIf(!BWRAP)(`finds a fact said 200 turns ago, out of the context, and answers with it, from its sandboxed shell (${NEEDS_BWRAP})`, async () => {
    // The model searches on the question, and answers with what the search printed (a compaction call gets a summary).
    const server = await startFakeOpenAI({
      defaultStep: (request) => {
        const messages: LooseJson[] = request.body?.messages ?? [];
        const last = messages.at(-1);
        if (!Array.isArray(request.body?.tools) || request.body.tools.length === 0) return { kind: 'text', text: 'Earlier: everyday chatter.' };
        if (last?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'agent memory search helper "first dog name" --limit 1' } };
        const { stdout } = JSON.parse(String(last?.content)) as { stdout: string };
        return { kind: 'text', text: `From our conversation long ago: ${stdout.split('\n')[1]?.trim()}` };
      },
    });
    try {
      writeFakePaiConfig(t.home, server, { contextWindow: 100_000 });
      const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
      const history = evalHistory(240);
      const dog = FACTS.find((fact) => fact.said.includes('Pepper'))!;
      expect(history.turns.length - history.factTurn.get(dog)!).toBeGreaterThanOrEqual(30); // out of the 30 recent messages the context holds
      converse(owner, [
        ...history.turns.filter((turn) => turn.person !== dog.said),
        { person: dog.said, agent: 'Noted.' },
        ...Array.from({ length: 200 }, () => ({ person: 'What is on today?', agent: 'Nothing much.' })),
      ]);
      sendToAgent(t.home, 'helper', { text: 'What was the name of our first dog?', source: owner });
      expect(await runAgent('helper', { home: t.home, env: t.env })).toMatchObject({ handled: 1, replied: 1 });
      // The turn's first call (a compaction may summarise older messages before it): the fact is not in its context.
      const first = server.requests.find((request) => request.path === '/v1/chat/completions' && Array.isArray(request.body.tools) && request.body.tools.length > 0)!;
      expect(JSON.stringify(first.body.messages)).toContain('What was the name of our first dog?');
      expect(JSON.stringify(first.body.messages)).not.toContain('Pepper');
      const reply = threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path, "type = 'message' AND source = 'self'").at(-1)!;
      expect(JSON.parse(reply.content).text).toBe(`From our conversation long ago: ${dog.said}`);
    } finally {
      await server.close();
    }
  });
});
