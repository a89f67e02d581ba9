import { spawn } from 'node:child_process';
import { join, relative, resolve, sep } from 'node:path';
import { splitCommand } from '../../core/command.js';
import { ContainedPathError, isContainedPathError, kindContained, readContained, writeContained } from '../../core/contained-fs.js';
import { ClawError, usageError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { conversationIndexFolder, loadAgentConfig, requireAgent, type AgentDir } from '../agent-dir.js';
import { threadStore } from '../threads.js';
import { searchEmbedder } from './memory-embedder.js';
import { ARCHIVE_DIR, DAILY_DIR } from './memory-store.js';
import { agentScope, conversationScope, MemoryIndex, type MemoryHit, type MemoryScope } from './memory-index.js';
import { storedThreads, threadFiles, type IndexedThreads } from './memory-threads.js';

/**
 * `agent memory search|show|edit`. In a turn (THECLAW_CONVERSATION set by the runtime) a search
 * sees what the conversation's context sees, and no wider: `--peer` naming another
 * conversation, or `--all`, is refused there. With memory.embeddings in the agent's config the
 * search is hybrid (memory-embedder.ts), within the same scope. The threads are read where the
 * home keeps them (memory-threads.ts); a turn's search on a PostgreSQL store is made by its run
 * (memory-door.ts).
 */
export async function searchMemory(home: string, id: string, query: string, options: MemorySearchOptions, env: NodeJS.ProcessEnv = process.env): Promise<MemoryHit[]> {
  const dir = requireAgent(home, id);
  const inTurn = turnConversation(id, options, env);
  const limit = options.limit ?? 5;
  // In a turn, the conversation's scope in its own index and its sandbox's thread files: it has
  // no others (sandbox-profile.ts). The message it answers is no finding: the model has it already.
  if (inTurn !== undefined) {
    const asking = { where: inTurn, at: Number(env.THECLAW_ASKING_EVENT) };
    return searchIndex(home, dir, query, { scope: conversationScope(dir, inTurn), limit, threads: threadFiles(dir), asking, folder: conversationIndexFolder(dir, inTurn) }, env);
  }
  const scope = options.all ? null : options.peer !== undefined ? conversationScope(dir, options.peer) : agentScope(dir);
  const threads = (await threadStore(home, env)).kind === 'sqlite' ? threadFiles(dir) : storedThreads(home, dir, env);
  return searchIndex(home, dir, query, { scope, limit, threads }, env);
}

export interface MemorySearchOptions {
  /** The conversation (thread id) whose scope to search; none: the agent's own memory. */
  peer?: string;
  /** Every conversation's memory and thread. */
  all?: boolean;
  /** Hits at most. Default: 5. */
  limit?: number;
}

/** The conversation a turn's search is in (none outside a turn), once what a turn may not ask is refused. */
export function turnConversation(id: string, options: MemorySearchOptions, env: NodeJS.ProcessEnv): string | undefined {
  const inTurn = env.THECLAW_AGENT === id ? env.THECLAW_CONVERSATION : undefined;
  if (options.all && options.peer) throw usageError('give --peer or --all, not both', 'leave one out');
  if (inTurn !== undefined && (options.all || (options.peer !== undefined && options.peer !== inTurn))) {
    throw new ClawError('usage', 'a search in a conversation sees only that conversation', { suggestion: 'leave out --peer and --all: this conversation is searched' });
  }
  return inTurn;
}

export interface IndexSearch {
  /** What may be found (memory-index.ts MemoryScope); null: everything. */
  scope: MemoryScope | null;
  limit: number;
  threads: IndexedThreads;
  /** A message left out of the hits. */
  asking?: { where: string; at: number };
  /** The index's folder; default: the agent's. */
  folder?: string;
}

/** A search of the index in `folder`, brought up to date first with the memory files and `threads`. */
export async function searchIndex(home: string, dir: AgentDir, query: string, { scope, limit, threads, asking, folder }: IndexSearch, env: NodeJS.ProcessEnv): Promise<MemoryHit[]> {
  const config = loadAgentConfig(dir);
  const logger = createLogger(dir.log, { env });
  const embedder = searchEmbedder(home, dir, config, env, logger);
  return MemoryIndex.using(
    dir,
    logger,
    async (index) => {
      await index.refresh(threads);
      // The query first: when the endpoint is down, the chunks are not tried too. A private copy
      // of the index (where it cannot be written) uses the vectors it has, and makes none.
      const [vector] = (embedder && (await embedder.embed([query]))) ?? [];
      if (embedder && vector && index.lasting) await index.embedMissing(embedder, scope);
      return index
        .search(query, scope, limit + 1, {
          vector: embedder && vector ? { model: embedder.model, query: vector } : null,
          vectorWeight: config.memory.search.vector_weight,
          halfLifeDays: config.memory.search.half_life_days,
          now: new Date(),
        })
        .filter((hit) => !(hit.kind === 'message' && hit.where === asking?.where && hit.at === asking.at))
        .slice(0, limit);
    },
    folder,
  );
}

/**
 * The memory files a conversation sees (or the agent's own), with their text; missing ones left
 * out, and so are the daily notes and archived versions, which a search finds. A link in a
 * file's place shows as why it is not read, never as its target.
 */
export function memoryFilesOf(home: string, id: string, peer?: string): { path: string; text: string }[] {
  const dir = requireAgent(home, id);
  const scope = peer === undefined ? agentScope(dir) : conversationScope(dir, peer);
  const notes = [DAILY_DIR, ARCHIVE_DIR].map((folder) => `${join('memory', folder)}${sep}`);
  return scope.files.flatMap((path) => {
    if (notes.some((folder) => path.startsWith(folder))) return [];
    try {
      const bytes = readContained(dir.root, join(dir.root, path));
      return bytes ? [{ path, text: bytes.toString('utf8') }] : [];
    } catch (error) {
      if (!isContainedPathError(error)) throw error;
      return [{ path, text: `(not shown: ${error.message} - ${error.suggestion})` }];
    }
  });
}

/** Opens a memory file in $EDITOR (or $VISUAL), creating it empty; only files under memory/. */
export async function editMemory(home: string, id: string, file = 'memory/agent.md', env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const dir = requireAgent(home, id);
  const path = resolve(dir.root, file);
  if (relative(dir.memory, path).startsWith('..') || !path.endsWith('.md')) {
    throw usageError(`${file} is not a memory file of ${id}`, 'give a .md file under its memory/, e.g. memory/agent.md');
  }
  const editor = env.VISUAL || env.EDITOR;
  if (!editor) throw usageError('no editor: neither VISUAL nor EDITOR is set', 'e.g. EDITOR=nano agent memory edit ...');
  // The editor opens it by name: a link a command left there would take it elsewhere.
  const kind = kindContained(dir.root, path);
  if (kind === 'link') throw new ContainedPathError(path, 'link');
  if (kind === null) writeContained(dir.root, path, '');
  const [command, ...args] = splitCommand(editor);
  const code = await new Promise<number | null>((done, fail) => {
    const child = spawn(command, [...args, path], { stdio: 'inherit', env });
    child.on('error', fail);
    child.on('exit', done);
  });
  if (code !== 0) throw new ClawError('io', `${editor} exited with ${code}`, { suggestion: 'the file is as the editor left it' });
}
