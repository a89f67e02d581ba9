import Database from 'better-sqlite3';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { parse, stringify } from 'yaml';
import {
  BWRAP,
  createTestHome,
  embeddingRequests,
  fakeEmbedding,
  NEEDS_BWRAP,
  runTool,
  startFakeOpenAI,
  threadEvents,
  writeFakePaiConfig,
  type FakeLlmServer,
  type LooseJson,
  type TestHome,
} from '../../testing/index.js';
import { evalHistory, FACTS, type EvalFact } from '../../testing/memory-eval.js';
import { createLogger } from '../../core/logger.js';
import { request } from '../../core/ipc.js';
import { EMBEDDINGS_SOCKET_ENV, paiEmbedder, serveEmbeddings } from './memory-embedder.js';
import { loadAgentConfig } from '../agent-dir.js';
import { openThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { chunkMarkdown } from './memory-chunks.js';
import { conversationScope, ftsQuery, MemoryIndex, type MemoryHit } from './memory-index.js';
import { searchMemory } from './memory-search.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';

let t: TestHome;
let dir: AgentDir;
const peer = (id: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: id, peerId: id });
const ANN = peer('5151');
const BOB = peer('6262');

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
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

/** recall@5 of the evaluation set with `search`, said on the console with the questions missed. */
async function evalRecall(name: string, search: (question: string) => MemoryHit[] | Promise<MemoryHit[]>): Promise<number> {
  const found: EvalFact[] = [];
  for (const fact of FACTS) if ((await search(fact.question)).some((hit) => hit.text.includes(fact.said))) found.push(fact);
  const missed = FACTS.filter((fact) => !found.includes(fact)).map((fact) => JSON.stringify(fact.question));
  console.log(`${name}: recall@5 ${(found.length / FACTS.length).toFixed(2)} (${found.length}/${FACTS.length}); missed: ${missed.join(', ') || 'none'}`);
  return found.length / FACTS.length;
}

/** Memory search with embeddings from `server` as `model` (a model of the provider `fake`), with these search settings. */
function useEmbeddings(server: FakeLlmServer, search: Record<string, number> = {}, model = 'fake/e1', providerFields = ''): void {
  writeFakePaiConfig(t.home, server, { providerFields });
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, memory: { embeddings: { model }, search } }));
}

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

  it('finds the facts of a 240-turn conversation and its memory file asked in other words: recall@5 of the evaluation set ≥ 0.8', async () => {
    const history = evalHistory();
    const conversation = converse(ANN, history.turns);
    writeFileSync(memoryOf(ANN), history.memoryFile);
    const index = MemoryIndex.open(dir);
    try {
      expect(await index.refresh()).toEqual({ files: 1, messages: 480 });
      const scope = conversationScope(dir, conversation);
      expect(FACTS.length).toBeGreaterThanOrEqual(30);
      expect(await evalRecall(`memory search (FTS5, BM25) over ${history.turns.length} turns`, (question) => index.search(question, scope, 5))).toBeGreaterThanOrEqual(0.8);
    } finally {
      index.close();
    }
  });

  it("ranks the evaluation set by meaning and words with embeddings: recall@5 of the hybrid search (with the test server's hashed embedding, not a real model's)", async () => {
    const server = await startFakeOpenAI();
    try {
      useEmbeddings(server);
      const history = evalHistory();
      const conversation = converse(ANN, history.turns);
      writeFileSync(memoryOf(ANN), history.memoryFile);
      const recall = await evalRecall(`memory search (hybrid, 0.7 vector / 0.3 words, the fake server's embedding) over ${history.turns.length} turns`, (question) =>
        searchMemory(t.home, 'helper', question, { peer: conversation }, {}),
      );
      // Every chunk embedded once, in batches, then only the queries.
      const batches = embeddingRequests(server).map((request) => request.body.input.length);
      expect(batches.reduce((sum: number, size: number) => sum + size, 0)).toBe(485 + FACTS.length);
      expect(Math.max(...batches)).toBeLessThanOrEqual(64);
      // A lexical embedding knows no more than the words do; mixing it in must not cost recall.
      expect(recall).toBeGreaterThanOrEqual(0.8);
    } finally {
      await server.close();
    }
  });

  it("never shows a conversation another person's memory or messages, whatever is searched, by words or by meaning (property)", async () => {
    const server = await startFakeOpenAI();
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
    const words = ['sister', 'Clara', 'Lisbon', 'Paris', 'cello', 'violin', 'Noted', 'cities', 'Ann', 'Bob', 'diary', 'archived', 'played', 'Lisboa', 'Pariss'];
    const index = MemoryIndex.open(dir);
    try {
      useEmbeddings(server);
      await index.refresh();
      // Every chunk of every conversation has a vector (7, and each person's daily note and archived version): a scope that leaked would show.
      expect(await index.embedMissing(paiEmbedder(t.home, dir, 'fake/e1', t.env, createLogger(dir.log)), null)).toBe(11);
      fc.assert(
        fc.property(fc.subarray(words, { minLength: 1 }), fc.boolean(), fc.boolean(), (query, asAnn, byMeaning) => {
          const [mine, theirs] = asAnn ? [ann, bob] : [bob, ann];
          const vector = byMeaning ? { model: 'fake/e1', query: Float32Array.from(fakeEmbedding(query.join(' '))) } : null;
          const hits = index.search(query.join(' '), conversationScope(dir, mine), 20, { vector });
          if (byMeaning) expect(hits.length).toBeGreaterThan(0); // by meaning, everything in scope is near enough to show
          for (const hit of hits) {
            expect(hit.where).not.toBe(theirs);
            expect(hit.where).not.toContain(`user-${theirs.replace(/^peer-/, '')}`);
            expect(hit.text).not.toMatch(asAnn ? /Paris|Bob|violin/ : /Lisbon|Ann:|cello/);
          }
        }),
        { numRuns: 200 },
      );
      // Their own daily notes and archived versions are found, a note with its day (searched on
      // that day, so that its age does not rank it down).
      expect(index.search('diary cello', conversationScope(dir, ann), 1, { now: new Date('2025-03-01T12:00:00Z') })).toEqual([
        expect.objectContaining({ kind: 'memory', where: `memory/daily/user-telegram.main.5151/2025-03-01.md`, time: '2025-03-01' }),
      ]);
      expect(index.search('archived', conversationScope(dir, bob), 5).map((hit) => [hit.where, hit.time])).toEqual([['memory/archive/user-telegram.main.6262/2025-03-02T00-00-00.000Z.md', null]]);
    } finally {
      index.close();
      await server.close();
    }
  });

  it('indexes only what changed: a new message, an edited file; a removed file leaves the index', async () => {
    const conversation = converse(ANN, [{ person: 'The boiler is old.', agent: 'Noted.' }]);
    writeFileSync(memoryOf(ANN), 'Likes tea.\n');
    const index = MemoryIndex.open(dir);
    try {
      expect(await index.refresh()).toEqual({ files: 1, messages: 2 });
      expect(await index.refresh()).toEqual({ files: 0, messages: 0 });
      converse(ANN, [{ person: 'The boiler was replaced.', agent: 'Good.' }]);
      writeFileSync(memoryOf(ANN), 'Likes coffee now.\n');
      expect(await index.refresh()).toEqual({ files: 1, messages: 2 });
      const scope = conversationScope(dir, conversation);
      expect(index.search('tea', scope).map((hit) => hit.text)).toEqual([]);
      expect(index.search('coffee', scope).map((hit) => hit.text)).toEqual(['Likes coffee now.']);
      expect(index.search('boiler', scope)).toHaveLength(2);
    } finally {
      index.close();
    }
  });

  it('rebuilds a damaged index (written over with garbage) from the memory files and threads, and says so in the log', async () => {
    const ann = converse(ANN, [{ person: 'My first car was a red Fiat.', agent: 'Noted.' }]);
    writeFileSync(join(dir.memory, 'agent.md'), 'The owner keeps bees.\n');
    const search = async (query: string, args: string[] = []) => {
      const result = await runTool('agent', ['memory', 'search', 'helper', query, ...args, '--json'], t.env);
      expect(result.code, result.stderr).toBe(0);
      return (JSON.parse(result.stdout) as MemoryHit[]).map((hit) => hit.text);
    };
    expect(await search('bees')).toEqual(['The owner keeps bees.']);
    const file = join(dir.root, 'index', 'memory.db');
    for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    writeFileSync(file, 'a disk wrote garbage over the index. '.repeat(300));

    expect(await search('bees')).toEqual(['The owner keeps bees.']);
    expect(await search('first car', ['--peer', ann])).toEqual(['My first car was a red Fiat.']);
    const log = readFileSync(dir.log, 'utf8');
    expect(log).toContain(`[WARN] memory index $THECLAW_HOME/agents/helper/index/memory.db is damaged (file is not a database): rebuilt from the memory files and threads`);
    expect(log.match(/rebuilt from the memory files/g)).toHaveLength(1); // once: the second search found it whole
  });

  it('in a turn searches that conversation only: --peer naming another and --all are refused there', async () => {
    const ann = converse(ANN, [{ person: 'Ann likes sailing.', agent: 'Noted.' }]);
    converse(BOB, [{ person: 'Bob likes sailing.', agent: 'Noted.' }]);
    const turn = { THECLAW_AGENT: 'helper', THECLAW_CONVERSATION: ann };
    expect((await searchMemory(t.home, 'helper', 'sailing', {}, turn)).map((hit) => hit.text)).toEqual(['Ann likes sailing.']);
    await expect(searchMemory(t.home, 'helper', 'sailing', { all: true }, turn)).rejects.toMatchObject({ kind: 'usage' });
    await expect(searchMemory(t.home, 'helper', 'sailing', { peer: 'peer-telegram.main.6262' }, turn)).rejects.toMatchObject({ kind: 'usage' });
    // The owner, at the terminal: the agent's memory, a conversation, or everything.
    expect(await searchMemory(t.home, 'helper', 'sailing', {}, {})).toEqual([]);
    expect(await searchMemory(t.home, 'helper', 'sailing', { all: true }, {})).toHaveLength(2);
  });

  it('agent memory search, show and edit from the command line', async () => {
    const empty = await runTool('agent', ['memory', 'show', 'helper'], t.env);
    expect(empty).toMatchObject({ code: 0, stdout: "helper's memory is empty: the agent writes what it learns there as it talks; agent memory edit helper writes it yourself\n" });
    const ann = converse(ANN, [{ person: 'My first car was a red Fiat.', agent: 'Noted.' }]);
    // Only in a conversation: the agent's memory has nothing, and says that --all would find it.
    expect((await runTool('agent', ['memory', 'search', 'helper', 'first car'], t.env)).stdout).toBe("nothing in the agent's memory; --all searches every conversation, and finds something there\n");
    expect((await runTool('agent', ['memory', 'search', 'helper', 'sailing boat'], t.env)).stdout).toBe('nothing found\n');
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

  it('finds by meaning what no word of the query matches, with embeddings on; by words alone it finds nothing', async () => {
    const server = await startFakeOpenAI();
    try {
      writeFileSync(join(dir.memory, 'agent.md'), "## Family\nClara's flat is in Lisboa, near the river.\n\n## Work\nThe owner builds bridges.\n");
      expect(await searchMemory(t.home, 'helper', 'Lisbon', {}, {})).toEqual([]);
      useEmbeddings(server);
      const hits = await searchMemory(t.home, 'helper', 'Lisbon', {}, {});
      expect(hits[0]).toMatchObject({ kind: 'memory', where: 'memory/agent.md', at: 2, text: "Family\nClara's flat is in Lisboa, near the river." });
      expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    } finally {
      await server.close();
    }
  });

  it('ranks a newer daily note above an older one that says the same, by the half-life in the config (0: no decay)', async () => {
    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    mkdirSync(join(dir.memory, 'daily'));
    writeFileSync(join(dir.memory, 'daily', `${day(60)}.md`), 'Called the plumber about the leak.\n');
    writeFileSync(join(dir.memory, 'daily', `${day(1)}.md`), 'Called the plumber about the leak.\n');
    const search = async () => (await searchMemory(t.home, 'helper', 'plumber', { all: true }, {})).map((hit) => [hit.where, hit.score]);
    const [recent, old] = await search();
    expect(recent).toEqual([`memory/daily/${day(1)}.md`, expect.closeTo(0.5 ** (1 / 30), 1)]);
    expect(old).toEqual([`memory/daily/${day(60)}.md`, expect.closeTo(0.25, 1)]);
    const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
    writeFileSync(dir.config, stringify({ ...config, memory: { search: { half_life_days: 0 } } }));
    expect(await search()).toEqual([
      [`memory/daily/${day(60)}.md`, 1],
      [`memory/daily/${day(1)}.md`, 1],
    ]);
  });

  it('embeds each chunk once: later searches send only the query, new messages theirs, an edited file its chunks again, another model all again', async () => {
    const server = await startFakeOpenAI();
    try {
      useEmbeddings(server);
      const conversation = converse(ANN, [{ person: 'The boiler is old.', agent: 'Noted.' }]);
      writeFileSync(memoryOf(ANN), 'Likes tea.\n\nHas a cat.\n');
      const sent = () => embeddingRequests(server).flatMap((request) => request.body.input as string[]);
      await searchMemory(t.home, 'helper', 'boiler', { peer: conversation }, {});
      expect(sent()).toEqual(['boiler', 'Likes tea.', 'Has a cat.', 'The boiler is old.', 'Noted.']);
      server.requests.length = 0;
      await searchMemory(t.home, 'helper', 'tea', { peer: conversation }, {});
      expect(sent()).toEqual(['tea']);
      server.requests.length = 0;
      writeFileSync(memoryOf(ANN), 'Likes coffee now.\n\nHas a cat.\n');
      converse(ANN, [{ person: 'The boiler was replaced.', agent: 'Good.' }]);
      expect((await searchMemory(t.home, 'helper', 'coffee', { peer: conversation }, {}))[0]!.text).toBe('Likes coffee now.');
      expect(sent()).toEqual(['coffee', 'Likes coffee now.', 'Has a cat.', 'The boiler was replaced.', 'Good.']);
      server.requests.length = 0;
      useEmbeddings(server, {}, 'fake/e2');
      await searchMemory(t.home, 'helper', 'cat', { peer: conversation }, {});
      expect(sent()).toHaveLength(1 + 6);
      expect(embeddingRequests(server).map((request) => request.body.model)).toEqual(['e2', 'e2']);
    } finally {
      await server.close();
    }
  });

  it('searches by words while the embeddings are down, says so once in the log, asks again after a while, and says when they are back', async () => {
    let down = true;
    const server = await startFakeOpenAI({ embeddings: () => (down ? { kind: 'error', status: 503 } : { kind: 'vectors' }) });
    try {
      useEmbeddings(server);
      writeFileSync(join(dir.memory, 'agent.md'), "Clara's flat is in Lisboa.\n\nThe boiler is old.\n");
      expect((await searchMemory(t.home, 'helper', 'boiler', {}, {})).map((hit) => hit.text)).toEqual(['The boiler is old.']);
      expect(embeddingRequests(server)).toHaveLength(2); // the query, retried once; the chunks are not tried
      expect((await searchMemory(t.home, 'helper', 'Lisbon', {}, {})).map((hit) => hit.text)).toEqual([]);
      expect(embeddingRequests(server)).toHaveLength(2); // not asked again before its time
      const log = () =>
        readFileSync(dir.log, 'utf8')
          .split('\n')
          .filter((line) => line.includes('memory search:'));
      expect(log()).toEqual([expect.stringMatching(/WARN.*memory search: no embeddings from fake\/e1 \(.*HTTP 503.*\); searching by words only, and asking again from /)]);
      const outage = JSON.parse(readFileSync(dir.embeddingsOutage, 'utf8'));
      expect(outage).toMatchObject({ failures: 1 });
      expect(outage.retry_at - Date.now()).toBeGreaterThan(50_000);

      // Its time has come (as if a minute had passed), and the endpoint is back.
      writeFileSync(dir.embeddingsOutage, JSON.stringify({ ...outage, retry_at: Date.now() - 1 }));
      down = false;
      expect((await searchMemory(t.home, 'helper', 'Lisbon', {}, {}))[0]!.text).toBe("Clara's flat is in Lisboa.");
      expect(existsSync(dir.embeddingsOutage)).toBe(false);
      expect(log()).toHaveLength(2);
      expect(log()[1]).toMatch(/INFO.*memory search: the embeddings of fake\/e1 answer again/);
    } finally {
      await server.close();
    }
  });

  it("in a turn embeds through the run's socket only, within the conversation's scope; without the socket it searches by words", async () => {
    const server = await startFakeOpenAI({ apiKey: 'sk-runtime-only-0001' });
    const ann = converse(ANN, [{ person: 'We sail on Lake Constance.', agent: 'Noted.' }]);
    converse(BOB, [{ person: 'We sail on Lake Geneva.', agent: 'Noted.' }]);
    useEmbeddings(server, {}, 'fake/e1', ', api_key_env: FAKE_EMBED_KEY');
    const turn = { THECLAW_HOME: t.home, THECLAW_AGENT: 'helper', THECLAW_CONVERSATION: ann };
    // The turn's commands have no key: by words.
    expect((await searchMemory(t.home, 'helper', 'Konstanz', {}, turn)).map((hit) => hit.text)).toEqual([]);
    expect(embeddingRequests(server)).toHaveLength(0);
    const served = await serveEmbeddings(t.home, dir, loadAgentConfig(dir), { ...t.env, FAKE_EMBED_KEY: 'sk-runtime-only-0001' }, createLogger(dir.log));
    try {
      const hits = await searchMemory(t.home, 'helper', 'Konstanz', {}, { ...turn, [EMBEDDINGS_SOCKET_ENV]: served!.socket });
      expect(hits.map((hit) => hit.text)).toContain('We sail on Lake Constance.');
      expect(JSON.stringify(hits)).not.toContain('Geneva');
      expect(embeddingRequests(server).length).toBeGreaterThan(0);
      expect(embeddingRequests(server).every((request) => request.headers.authorization === 'Bearer sk-runtime-only-0001')).toBe(true);
      // The socket embeds a batch of texts and nothing else.
      await expect(request(served!.socket, { texts: Array.from({ length: 65 }, () => 'x') })).rejects.toMatchObject({ kind: 'usage' });
      await expect(request(served!.socket, { texts: ['x'], read: '/etc/passwd' })).rejects.toMatchObject({ kind: 'usage' });
    } finally {
      await served!.close();
      await server.close();
    }
    expect(existsSync(served!.socket)).toBe(false);
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
      await sendToAgent(t.home, 'helper', { text: 'What was the name of our first dog?', source: owner });
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

  it.skipIf(!BWRAP)(`searches by meaning from its sandboxed shell with no network and no key: the run embeds for it over its socket (${NEEDS_BWRAP})`, async () => {
    const key = 'sk-fake-key-for-the-run-0001';
    const server = await startFakeOpenAI({
      apiKey: key,
      defaultStep: (request) => {
        const last: LooseJson = request.body?.messages?.at(-1);
        if (last?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'agent memory search helper "Konstanz" --limit 1; echo "key: [$FAKE_KEY]"' } };
        const { stdout } = JSON.parse(String(last?.content)) as { stdout: string };
        return { kind: 'text', text: `Found: ${stdout.split('\n')[1]?.trim()} / ${stdout.split('\n').at(-2)}` };
      },
    });
    try {
      useEmbeddings(server, {}, 'fake/e1', ', api_key_env: FAKE_KEY');
      const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
      writeFileSync(dir.config, stringify({ ...config, sandbox: { profile: 'sandbox', network: false } }));
      const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
      converse(owner, [
        { person: 'We keep the boat on Lake Constance.', agent: 'Noted.' },
        { person: 'The car needs new tyres.', agent: 'Noted.' },
      ]);
      await sendToAgent(t.home, 'helper', { text: 'Where is the boat?', source: owner });
      expect(await runAgent('helper', { home: t.home, env: { ...t.env, FAKE_KEY: key } })).toMatchObject({ handled: 1, replied: 1 });
      const reply = threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path, "type = 'message' AND source = 'self'").at(-1)!;
      expect(JSON.parse(reply.content).text).toBe('Found: We keep the boat on Lake Constance. / key: []');
      // The query and the conversation's chunks, embedded by the run with its key.
      expect(embeddingRequests(server).flatMap((request) => request.body.input)).toEqual(expect.arrayContaining(['Konstanz', 'We keep the boat on Lake Constance.']));
    } finally {
      await server.close();
    }
  });
});
