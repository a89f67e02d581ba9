import type Database from 'better-sqlite3';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { ClawError, errnoCode } from '../core/errors.js';
import { ensureDir } from '../core/home.js';
import { openSqlite } from '../core/sqlite.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { agentMemoryFile, CONVERSATIONS_DIR, memoryFiles, messageText } from './context.js';
import { archiveFolder, DAILY_DIR, dailyFolder } from './memory-store.js';
import { chunkMarkdown } from './memory-chunks.js';
import { conversationThreads } from './lifecycle.js';
import { threadById, threadIdOfPath } from './router.js';

/**
 * Memory search: SQLite FTS5 (BM25, Porter stemming) over an agent's memory files, cut into
 * paragraphs (memory-chunks.ts), and the messages of its conversation threads. The index is
 * `index/memory.db` in the agent's directory, brought up to date by each search: a memory file
 * only when its size or time changed, a thread only from its last indexed event on, and only
 * when its database changed. Where the index cannot be written (a sandbox that keeps it
 * read-only), the search works on a private copy, brought up to date there.
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
  /** BM25 (lower is better; FTS5's sign). */
  score: number;
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
`;

/**
 * The scope of one conversation (a thread id), as its context has it: with each memory file its
 * daily notes and its archived versions, which hold what the file held or was written from.
 */
export function conversationScope(dir: AgentDir, threadId: string): MemoryScope {
  const route = threadById(dir, threadId);
  if (!route) throw new ClawError('not_found', `${agentLabel(dir)} has no conversation ${JSON.stringify(threadId)}`, { suggestion: `see its conversations with: agent status ${dir.id}` });
  const { agent, user, group, thread } = memoryFiles(dir, route);
  return {
    files: [
      ...withNotes(dir, agent),
      ...(user ? withNotes(dir, user) : []),
      ...(group ? withNotes(dir, group) : []),
      relative(dir.root, thread),
      ...listFiles(join(dir.memory, CONVERSATIONS_DIR, route.threadId)).map((file) => relative(dir.root, file)),
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
  return [file, ...listFiles(dailyFolder(dir.memory, file)), ...listFiles(archiveFolder(dir.memory, file))].map((path) => relative(dir.root, path));
}

/** The day a daily note is of (`memory/daily/<file>/<YYYY-MM-DD>.md`), null for other files. */
function dayOf(path: string): string | null {
  const [folder, , name] = relative('memory', path).split(sep);
  return folder === DAILY_DIR ? (/^(\d{4}-\d{2}-\d{2})\.md$/.exec(name ?? '')?.[1] ?? null) : null;
}

export class MemoryIndex {
  private constructor(
    private readonly db: Database.Database,
    private readonly dir: AgentDir,
    private readonly cleanup: () => void,
  ) {}

  /** Opens (and creates) the agent's index, or a private copy of it where it cannot be written. */
  static open(dir: AgentDir): MemoryIndex {
    const folder = join(dir.root, 'index');
    const file = join(folder, 'memory.db');
    try {
      ensureDir(folder);
      const db = openSqlite(file);
      db.exec(SCHEMA);
      return new MemoryIndex(db, dir, () => {});
    } catch (error) {
      if (!['EACCES', 'EROFS', 'EPERM'].includes(errnoCode(error) ?? '') && !isReadOnly(error)) throw error;
    }
    const copy = mkdtempSync(join(tmpdir(), 'theclaw-index-'));
    if (existsSync(file)) copyFileSync(file, join(copy, 'memory.db'));
    const db = openSqlite(join(copy, 'memory.db'));
    db.exec(SCHEMA);
    return new MemoryIndex(db, dir, () => rmSync(copy, { recursive: true, force: true }));
  }

  close(): void {
    this.db.close();
    this.cleanup();
  }

  /** Brings the index up to date with the memory files and the threads. Returns what it (re)indexed. */
  refresh(): { files: number; messages: number } {
    let files = 0;
    let messages = 0;
    const known = new Map((this.db.prepare('SELECT path, signature FROM files').all() as { path: string; signature: string }[]).map((row) => [row.path, row.signature]));
    const present = new Set<string>();
    for (const file of listFiles(this.dir.memory).filter((path) => path.endsWith('.md'))) {
      const path = relative(this.dir.root, file);
      present.add(path);
      const signature = signatureOf([file]);
      if (known.get(path) === signature) continue;
      const chunks = chunkMarkdown(readFileSync(file, 'utf8'));
      this.db.transaction(() => {
        this.db.prepare("DELETE FROM chunks WHERE kind = 'memory' AND owner = ?").run(path);
        // A daily note carries its day, as a message its time, for a ranking by recency.
        const insert = this.db.prepare("INSERT INTO chunks (text, kind, owner, at, time, sender) VALUES (?, 'memory', ?, ?, ?, NULL)");
        for (const chunk of chunks) insert.run(chunk.text, path, chunk.line, dayOf(path));
        this.db.prepare('INSERT OR REPLACE INTO files VALUES (?, ?)').run(path, signature);
      })();
      files++;
    }
    for (const path of known.keys()) {
      if (present.has(path)) continue;
      this.db.prepare("DELETE FROM chunks WHERE kind = 'memory' AND owner = ?").run(path);
      this.db.prepare('DELETE FROM files WHERE path = ?').run(path);
    }
    for (const thread of this.threads()) messages += this.refreshThread(thread.id, thread.path);
    return { files, messages };
  }

  /** The best `limit` hits for the words of `query` within `scope` (null: all). */
  search(query: string, scope: MemoryScope | null, limit = 5): MemoryHit[] {
    const match = ftsQuery(query);
    if (match === null) throw new ClawError('usage', `${JSON.stringify(query)} has no words to search for`, { suggestion: 'search for some words, e.g. agent memory search admin "sister Lisbon"' });
    const where = scope === null ? '' : `AND ((kind = 'memory' AND owner IN (SELECT value FROM json_each(?))) OR (kind = 'message' AND owner IN (SELECT value FROM json_each(?))))`;
    const params: unknown[] = [match, ...(scope === null ? [] : [JSON.stringify(scope.files), JSON.stringify(scope.threads)]), limit];
    const rows = this.db.prepare(`SELECT text, kind, owner, at, time, sender, bm25(chunks) AS score FROM chunks WHERE chunks MATCH ? ${where} ORDER BY score LIMIT ?`).all(...params) as {
      text: string;
      kind: 'memory' | 'message';
      owner: string;
      at: number;
      time: string | null;
      sender: string | null;
      score: number;
    }[];
    return rows.map((row) => ({ kind: row.kind, where: row.owner, at: row.at, time: row.time, from: row.sender, text: row.text, score: row.score }));
  }

  /** Every conversation thread of the agent, by id. */
  private threads(): { id: string; path: string }[] {
    return conversationThreads(this.dir).flatMap((path) => {
      const id = threadIdOfPath(this.dir, path);
      return id ? [{ id, path }] : [];
    });
  }

  private refreshThread(id: string, path: string): number {
    const signature = signatureOf([join(path, 'events.db'), join(path, 'events.db-wal')]);
    const known = this.db.prepare('SELECT last_id, signature FROM threads WHERE id = ?').get(id) as { last_id: number; signature: string } | undefined;
    if (known?.signature === signature) return 0;
    const thread = openThread(path, { readOnly: true });
    try {
      const events = thread.peek({ afterId: known?.last_id ?? 0, limit: 100_000, filter: "type = 'message'" });
      this.db.transaction(() => {
        const insert = this.db.prepare("INSERT INTO chunks (text, kind, owner, at, time, sender) VALUES (?, 'message', ?, ?, ?, ?)");
        for (const event of events) {
          const text = messageText(event.content).trim();
          if (text) insert.run(text, id, event.id, event.created_at, event.source === 'self' ? 'me' : event.source);
        }
        this.db.prepare('INSERT OR REPLACE INTO threads VALUES (?, ?, ?)').run(id, events.at(-1)?.id ?? known?.last_id ?? 0, signature);
      })();
      return events.length;
    } finally {
      thread.close();
    }
  }
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

function signatureOf(files: string[]): string {
  return files
    .map((file) => {
      const stat = statSync(file, { throwIfNoEntry: false });
      return stat ? `${stat.size}:${stat.mtimeMs}` : '-';
    })
    .join(' ');
}

function listFiles(folder: string): string[] {
  return safeList(folder).flatMap((name) => {
    const path = join(folder, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat || name.startsWith('.')) return [];
    return stat.isDirectory() ? listFiles(path) : [path];
  });
}

function safeList(folder: string): string[] {
  try {
    return readdirSync(folder).sort();
  } catch {
    return [];
  }
}

function isReadOnly(error: unknown): boolean {
  return /readonly|read-only/i.test(error instanceof Error ? error.message : String(error));
}

function agentLabel(dir: AgentDir): string {
  return `agent ${dir.id}`;
}
