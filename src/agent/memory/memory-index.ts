// Over 400 lines on purpose: the index class and the scope and FTS helpers its SQL shares are one unit; split, they would export their internals to each other.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ClawError, errnoCode } from '../../core/errors.js';
import { ContainedPathError, holdContainedDir, type HeldDir, isContainedPathError, kindContained, listFilesContained, readContained, removeContained, statContained } from '../../core/contained-fs.js';
import type { Logger } from '../../core/logger.js';
import { openSqlite } from '../../core/sqlite.js';
import { isDamagedDatabase } from '../../core/storage-error.js';
import { HEARTBEAT_THREAD_ID, loadAgentConfig, type AgentDir } from '../agent-dir.js';
import { agentMemoryFile, CONVERSATIONS_DIR, memoryFiles, messageText } from '../context.js';
import { archiveFolder, dailyFolder } from './memory-store.js';
import { chunkMarkdown } from './memory-chunks.js';
import { EMBED_BATCH, EMBED_CHARS, type MemoryEmbedder } from './memory-embedder.js';
import { cosine, fromBlob, noteDate, rank, toBlob, type Candidate, type RankSettings } from './memory-ranking.js';
import { threadFiles, type IndexedThreads } from './memory-threads.js';
import { threadById } from '../router.js';
import { DEFAULT_MEMORY_SEARCH } from '../types.js';

/**
 * Memory search: SQLite FTS5 (BM25, Porter stemming) over an agent's memory files, cut into
 * paragraphs (memory-chunks.ts), and the messages of its conversation threads. The index is
 * `index/memory.db` in the agent's directory (a turn's commands have one of their conversation's
 * own, which holds only what their sandbox shows them), brought up to date by each search: a memory file
 * only when its size or time changed, a thread only from its last indexed event on, and only
 * when it changed (its files, or in the home's store its newest event: memory-threads.ts). Where the index cannot be written (a sandbox that keeps it
 * read-only), the search works on a private copy, brought up to date there.
 *
 * With embeddings (memory-embedder.ts) the chunks also get vectors, kept beside them (float32
 * BLOBs, of one model: another model's are dropped), filled in after the words in bounded
 * batches, and a search ranks by both (memory-ranking.ts). Without them, or while the endpoint
 * is down, it ranks by words alone.
 *
 * What a search returns is scoped like a conversation's context (context.ts): the agent's own
 * memory, the person's (or the group's) memory, the conversation's summaries and its own thread —
 * never another person's. The scope comes from THECLAW_CONVERSATION, which the runtime sets for
 * the turn's commands: it keeps another person's memory out of what the model is given, while
 * what a command could read at all is the sandbox's and the policy's business. With each memory
 * file go its daily notes (memory-flush.ts) and its archived versions (memory-condense.ts).
 */

export interface MemoryHit {
  /** `memory` (a paragraph of a memory file) or `message` (of a conversation thread). */
  kind: 'memory' | 'message';
  /** The memory file, relative to the agent's directory, or the thread id. */
  where: string;
  /** The line of the file, or the event id in the thread. */
  at: number;
  /** When the message was written, or the day of a daily note (`YYYY-MM-DD`); null for other memory files. */
  time: string | null;
  /** Who wrote it: `me` (the agent) or the sender's address (messages only). */
  from: string | null;
  text: string;
  /** 0..1, higher is better: the word match and, with embeddings, the meaning (memory-ranking.ts). */
  score: number;
}

export interface SearchOptions extends RankSettings {
  /** The query's vector and the model of it; none: by words only. */
  vector?: { model: string; query: Float32Array } | null;
}

/** What a search may see: memory files (relative paths) and threads (ids); null: everything. */
export interface MemoryScope {
  files: string[];
  threads: string[];
}

const SCHEMA = `
CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(text, kind UNINDEXED, owner UNINDEXED, at UNINDEXED, time UNINDEXED, sender UNINDEXED, tokenize = 'porter unicode61');
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, signature TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, last_id INTEGER NOT NULL, signature TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (chunk INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL);
`;

/** Texts one search embeds at most: a large backlog is filled in over several searches. */
const EMBED_PER_SEARCH = 512;
/** Candidates taken by words and by meaning, per hit asked for, before they are ranked together. */
const CANDIDATES_PER_HIT = 4;

/**
 * The scope of one conversation (a thread id), or of the heartbeat, as its context has it: with each memory file its
 * daily notes and its archived versions, which hold what the file held or was written from.
 */
export function conversationScope(dir: AgentDir, threadId: string): MemoryScope {
  // A heartbeat acts for the owner in no one's conversation: it sees what each of theirs sees, the
  // agent's memory, and no person's (heartbeat.ts). Its thread holds records, no messages.
  if (threadId === HEARTBEAT_THREAD_ID) return agentScope(dir);
  const route = threadById(dir, threadId, loadAgentConfig(dir).identities);
  if (!route) throw new ClawError('not_found', `${agentLabel(dir)} has no conversation ${JSON.stringify(threadId)}`, { suggestion: `see its conversations with: agent status ${dir.id}` });
  const { agent, user, group, thread } = memoryFiles(dir, route);
  return {
    files: [
      ...withNotes(dir, agent),
      ...(user ? withNotes(dir, user) : []),
      ...(group ? withNotes(dir, group) : []),
      relative(dir.root, thread),
      ...listFiles(dir, join(dir.memory, CONVERSATIONS_DIR, route.threadId)).map((file) => relative(dir.root, file)),
    ],
    threads: [route.threadId],
  };
}

/** Only the agent's own memory: what every conversation sees. */
export function agentScope(dir: AgentDir): MemoryScope {
  return { files: withNotes(dir, agentMemoryFile(dir)), threads: [] };
}

/** A memory file, its daily notes and its archived versions, relative to the agent's directory. */
function withNotes(dir: AgentDir, file: string): string[] {
  return [file, ...listFiles(dir, dailyFolder(dir.memory, file)), ...listFiles(dir, archiveFolder(dir.memory, file))].map((path) => relative(dir.root, path));
}

/** The day a daily note is of (see noteDate), null for other files. */
function dayOf(path: string): string | null {
  return noteDate(path)?.toISOString().slice(0, 10) ?? null;
}

export class MemoryIndex {
  private constructor(
    private readonly db: Database.Database,
    private readonly dir: AgentDir,
    private readonly cleanup: () => void,
    /** False for a private copy, whose vectors would be thrown away with it. */
    readonly lasting: boolean,
  ) {}

  /**
   * Opens (and creates) the agent's index — or the one in `folder`: a conversation's, in its
   * sandbox (agent-dir.ts conversationIndexFolder) — or a private copy where it cannot be written.
   * The index folder is writable in a sandbox: SQLite opens its files in the directory held by
   * descriptor, and a link in the place of one of them is refused, before and after the open.
   * `fresh`: the index there is thrown away first (or not copied), to be built anew.
   */
  static open(dir: AgentDir, folder = join(dir.root, 'index'), fresh = false): MemoryIndex {
    const file = join(folder, 'memory.db');
    let held: HeldDir | undefined;
    try {
      held = holdContainedDir(dir.root, folder);
      if (fresh) for (const suffix of ['', '-wal', '-shm']) removeContained(dir.root, `${file}${suffix}`);
      const db = openIndex(held, folder);
      const release = held.release;
      return new MemoryIndex(db, dir, release, true);
    } catch (error) {
      held?.release();
      if (!['EACCES', 'EROFS', 'EPERM'].includes(errnoCode(error) ?? '') && !isReadOnly(error)) throw error;
    }
    const copy = mkdtempSync(join(tmpdir(), 'theclaw-index-'));
    const bytes = fresh ? null : readContained(dir.root, file);
    if (bytes) writeFileSync(join(copy, 'memory.db'), bytes, { mode: 0o600 });
    const db = openSqlite(join(copy, 'memory.db'));
    db.exec(SCHEMA);
    return new MemoryIndex(db, dir, () => rmSync(copy, { recursive: true, force: true }), false);
  }

  /**
   * Runs `use` on the agent's index. The index is derived data: when it turns out damaged (written
   * over, truncated), it is thrown away with a warning in the log, and `use` runs once more on
   * one built afresh from the memory files and threads.
   */
  static async using<T>(dir: AgentDir, logger: Logger, use: (index: MemoryIndex) => Promise<T>, folder = join(dir.root, 'index')): Promise<T> {
    const file = join(folder, 'memory.db');
    const attempt = async (fresh: boolean) => {
      const index = MemoryIndex.open(dir, folder, fresh);
      try {
        return await use(index);
      } finally {
        index.close();
      }
    };
    try {
      return await attempt(false);
    } catch (error) {
      // A damaged conversation thread fails a refresh the same way, and is no reason to rebuild.
      if (!isDamagedDatabase(error) || !isDamagedIndex(dir.root, file)) throw error;
      logger.warn(`memory index ${file} is damaged (${(error as Error).message}): rebuilt from the memory files and threads`);
      return await attempt(true);
    }
  }

  close(): void {
    this.db.close();
    this.cleanup();
  }

  /**
   * Brings the index up to date with the memory files and the conversation threads (`threads`:
   * their files as seen from here, unless given). Returns what it (re)indexed.
   */
  async refresh(threads: IndexedThreads = threadFiles(this.dir)): Promise<{ files: number; messages: number }> {
    let files = 0;
    let messages = 0;
    const known = new Map((this.db.prepare('SELECT path, signature FROM files').all() as { path: string; signature: string }[]).map((row) => [row.path, row.signature]));
    const present = new Set<string>();
    for (const file of listFiles(this.dir, this.dir.memory).filter((path) => path.endsWith('.md'))) {
      const path = relative(this.dir.root, file);
      // A link (or a file swapped for one meanwhile) is not indexed: it stays out, as if absent.
      const found = unlessRefused(() => changedText(this.dir.root, file, known.get(path)));
      if (!found) continue;
      present.add(path);
      if (found.text === null) continue;
      const { signature } = found;
      const chunks = chunkMarkdown(found.text);
      this.db.transaction(() => {
        this.forgetFile(path);
        // A daily note carries its day, as a message its time, for a ranking by recency.
        const insert = this.db.prepare("INSERT INTO chunks (text, kind, owner, at, time, sender) VALUES (?, 'memory', ?, ?, ?, NULL)");
        for (const chunk of chunks) insert.run(chunk.text, path, chunk.line, dayOf(path));
        this.db.prepare('INSERT OR REPLACE INTO files VALUES (?, ?)').run(path, signature);
      })();
      files++;
    }
    for (const path of known.keys()) {
      if (present.has(path)) continue;
      this.db.transaction(() => {
        this.forgetFile(path);
        this.db.prepare('DELETE FROM files WHERE path = ?').run(path);
      })();
    }
    for (const thread of await threads.list()) messages += await this.refreshThread(threads, thread.id, thread.path);
    return { files, messages };
  }

  /**
   * Gives the chunks in `scope` that have no vector of the embedder's model one, oldest first, in
   * batches, at most EMBED_PER_SEARCH; stops at the first batch the embedder cannot do (it said
   * why). Returns how many it embedded.
   */
  async embedMissing(embedder: MemoryEmbedder, scope: MemoryScope | null): Promise<number> {
    // The vectors of another model are of no use with this one's.
    this.db.prepare('DELETE FROM vectors WHERE model != ?').run(embedder.model);
    const { where, params } = scopeFilter(scope);
    const missing = this.db.prepare(`SELECT rowid AS id, text FROM chunks WHERE rowid NOT IN (SELECT chunk FROM vectors) ${where} ORDER BY rowid LIMIT ?`).all(...params, EMBED_PER_SEARCH) as {
      id: number;
      text: string;
    }[];
    let embedded = 0;
    for (let start = 0; start < missing.length; start += EMBED_BATCH) {
      const batch = missing.slice(start, start + EMBED_BATCH);
      const vectors = await embedder.embed(batch.map((chunk) => chunk.text.slice(0, EMBED_CHARS)));
      if (vectors === null) break;
      const insert = this.db.prepare('INSERT OR REPLACE INTO vectors (chunk, model, vector) VALUES (?, ?, ?)');
      this.db.transaction(() => {
        // A chunk another search removed while the batch was out has no vector to keep, and its
        // row may have been given to another chunk.
        const present = this.db.prepare('SELECT 1 FROM chunks WHERE rowid = ? AND text = ?');
        batch.forEach((chunk, index) => {
          if (present.get(chunk.id, chunk.text)) insert.run(chunk.id, embedder.model, toBlob(vectors[index]!));
        });
      })();
      embedded += batch.length;
    }
    return embedded;
  }

  /**
   * The best `limit` hits for `query` within `scope` (null: all): by its words (FTS5), and with a
   * vector by meaning too, ranked together (memory-ranking.ts).
   */
  search(query: string, scope: MemoryScope | null, limit = 5, settings: Partial<SearchOptions> = {}): MemoryHit[] {
    const options: SearchOptions = { vectorWeight: DEFAULT_MEMORY_SEARCH.vector_weight, halfLifeDays: DEFAULT_MEMORY_SEARCH.half_life_days, now: new Date(), ...settings };
    const match = ftsQuery(query);
    const vector = options.vector ?? null;
    if (match === null && vector === null) {
      throw new ClawError('usage', `${JSON.stringify(query)} has no words to search for`, { suggestion: 'search for some words, e.g. agent memory search admin "sister Lisbon"' });
    }
    const { where, params } = scopeFilter(scope);
    const candidates = limit * CANDIDATES_PER_HIT;
    const found = new Map<number, Candidate>();
    if (match !== null) {
      const rows = this.db.prepare(`SELECT rowid AS id, kind, owner, bm25(chunks) AS bm25 FROM chunks WHERE chunks MATCH ? ${where} ORDER BY bm25 LIMIT ?`).all(match, ...params, candidates) as {
        id: number;
        kind: MemoryHit['kind'];
        owner: string;
        bm25: number;
      }[];
      for (const row of rows) found.set(row.id, { id: row.id, file: row.kind === 'memory' ? row.owner : null, bm25: row.bm25, cosine: null });
    }
    if (vector !== null) {
      // Every vector in scope is compared (an agent's memory is thousands of chunks, not millions).
      const rows = this.db
        .prepare(`SELECT v.chunk AS id, c.kind AS kind, c.owner AS owner, v.vector AS vector FROM vectors v JOIN chunks c ON c.rowid = v.chunk WHERE v.model = ? ${scopeFilter(scope, 'c.').where}`)
        .all(vector.model, ...params) as { id: number; kind: MemoryHit['kind']; owner: string; vector: Buffer }[];
      const similar = rows.map((row) => ({ ...row, cosine: cosine(vector.query, fromBlob(row.vector)) }));
      for (const row of similar) {
        const known = found.get(row.id);
        if (known) known.cosine = row.cosine;
      }
      for (const row of similar.sort((a, b) => b.cosine - a.cosine).slice(0, candidates)) {
        if (!found.has(row.id)) found.set(row.id, { id: row.id, file: row.kind === 'memory' ? row.owner : null, bm25: null, cosine: row.cosine });
      }
    }
    const ranked = rank([...found.values()], options).slice(0, limit);
    const row = this.db.prepare('SELECT text, kind, owner, at, time, sender FROM chunks WHERE rowid = ?');
    return ranked.map((hit) => {
      const chunk = row.get(hit.id) as { text: string; kind: MemoryHit['kind']; owner: string; at: number; time: string | null; sender: string | null };
      return { kind: chunk.kind, where: chunk.owner, at: chunk.at, time: chunk.time, from: chunk.sender, text: chunk.text, score: Math.round(hit.score * 1e4) / 1e4 };
    });
  }

  /** Removes a memory file's chunks and their vectors (before the rowids can be given again). */
  private forgetFile(path: string): void {
    this.db.prepare("DELETE FROM vectors WHERE chunk IN (SELECT rowid FROM chunks WHERE kind = 'memory' AND owner = ?)").run(path);
    this.db.prepare("DELETE FROM chunks WHERE kind = 'memory' AND owner = ?").run(path);
  }

  private async refreshThread(threads: IndexedThreads, id: string, path: string): Promise<number> {
    const known = this.db.prepare('SELECT last_id, signature FROM threads WHERE id = ?').get(id) as { last_id: number; signature: string } | undefined;
    const read = await threads.read(path, known && { lastId: known.last_id, signature: known.signature });
    if (read === null) return 0;
    const { signature, messages } = read;
    this.db.transaction(() => {
      const insert = this.db.prepare("INSERT INTO chunks (text, kind, owner, at, time, sender) VALUES (?, 'message', ?, ?, ?, ?)");
      for (const event of messages) {
        const text = messageText(event.content).trim();
        if (text) insert.run(text, id, event.id, event.created_at, event.source === 'self' ? 'me' : event.source);
      }
      this.db.prepare('INSERT OR REPLACE INTO threads VALUES (?, ?, ?)').run(id, messages.at(-1)?.id ?? known?.last_id ?? 0, signature);
    })();
    return messages.length;
  }
}

/** The SQL condition (on `kind` and `owner`) and its parameters that keep a query within `scope`. */
function scopeFilter(scope: MemoryScope | null, table = ''): { where: string; params: string[] } {
  if (scope === null) return { where: '', params: [] };
  const [kind, owner] = [`${table}kind`, `${table}owner`];
  return {
    where: `AND ((${kind} = 'memory' AND ${owner} IN (SELECT value FROM json_each(?))) OR (${kind} = 'message' AND ${owner} IN (SELECT value FROM json_each(?))))`,
    params: [JSON.stringify(scope.files), JSON.stringify(scope.threads)],
  };
}

/**
 * The words of a query as an FTS5 query: each a quoted term (so no word is taken as an operator),
 * any of them matching, BM25 ranking those with more and rarer ones first.
 */
export function ftsQuery(query: string): string | null {
  const words = query.match(/[\p{L}\p{N}]+/gu)?.filter((word) => !STOP_WORDS.has(word.toLowerCase())) ?? [];
  return words.length ? words.map((word) => `"${word}"`).join(' OR ') : null;
}

const STOP_WORDS = new Set(
  'a an and are as at be by did do does for from had has have he her his how i in is it its me my of on or our she so that the their them they this to was we were what when where which who why will with you your'.split(
    ' ',
  ),
);

/** The plain files under a folder of the agent's directory; links are left out (memory/ is writable in its sandbox). */
function listFiles(dir: AgentDir, folder: string): string[] {
  return listFilesContained(dir.root, folder).map((name) => join(folder, name));
}

/** A memory file's signature (size and time), and its text unless the signature is `known`. */
function changedText(root: string, file: string, known: string | undefined): { signature: string; text: string | null } {
  const stat = statContained(root, file);
  const signature = stat ? `${stat.size}:${stat.mtimeMs}` : '-';
  return { signature, text: signature === known ? null : (readContained(root, file)?.toString('utf8') ?? '') };
}

function unlessRefused<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (isContainedPathError(error)) return undefined;
    throw error;
  }
}

/** SQLite's files of the index, none of which may be a link: SQLite would follow it. */
const INDEX_FILES = ['memory.db', 'memory.db-wal', 'memory.db-shm', 'memory.db-journal'];

function openIndex(held: HeldDir, folder: string): Database.Database {
  const refuseLinks = () => {
    for (const name of INDEX_FILES) if (kindContained(held.path, name) === 'link') throw new ContainedPathError(join(folder, name), 'link');
  };
  refuseLinks();
  const db = openSqlite(join(held.path, 'memory.db'));
  try {
    db.exec(SCHEMA);
    refuseLinks();
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * Whether SQLite finds the index file itself damaged, asked apart from what failed. Only a plain
 * file: the index folder is sandbox-writable, and a link there is not opened (contained-fs.ts).
 */
function isDamagedIndex(root: string, file: string): boolean {
  let db: Database.Database | undefined;
  try {
    if (kindContained(root, file) !== 'file') return false;
    db = new Database(file, { readonly: true, fileMustExist: true });
    return db.pragma('quick_check', { simple: true }) !== 'ok';
  } catch (error) {
    return isDamagedDatabase(error);
  } finally {
    db?.close();
  }
}

function isReadOnly(error: unknown): boolean {
  return /readonly|read-only/i.test(error instanceof Error ? error.message : String(error));
}

function agentLabel(dir: AgentDir): string {
  return `agent ${dir.id}`;
}
