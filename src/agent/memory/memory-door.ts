import * as z from 'zod/mini';
import { ClawError, isClawError } from '../../core/errors.js';
import { listenPrivateSocket, request } from '../../core/ipc.js';
import type { Logger } from '../../core/logger.js';
import { redactedError } from '../../core/secrets.js';
import { validate } from '../../core/validate.js';
import { requireAgent, type AgentDir } from '../agent-dir.js';
import { conversationScope, type MemoryHit } from './memory-index.js';
import { searchIndex, searchMemory, turnConversation, type MemorySearchOptions } from './memory-search.js';
import { storedThreads } from './memory-threads.js';

/**
 * `agent memory search` from a turn on a PostgreSQL store. The threads are in the database, whose
 * URL (a secret) never enters the sandbox, and there are no thread files to read there: so the run,
 * which holds the store, serves each conversation it runs turns in a socket of its own (bound into
 * that turn's sandbox, as web search's and the browser's are). The socket searches that
 * conversation and nothing else — what the sandbox's own search sees on SQLite: the memory files
 * of its scope and its own thread, where the thread is its alone (sandbox-profile.ts). It searches
 * the agent's index, which no sandbox sees, and never the conversation's, which its sandbox writes
 * (the run opens no database a command could have made). A request carries words and a limit (a
 * strict schema): never an agent, a conversation or a path. On SQLite the run serves none and the
 * sandbox searches its files.
 */
export const MEMORY_SOCKET_ENV = 'THECLAW_MEMORY_SOCKET';

/** Hits one request asks for at most; longer queries are cut (their words past this add little). */
const MAX_HITS = 100;
const MAX_QUERY_CHARS = 4_000;
/** A search reads the threads and may wait for embeddings (15 s at most, memory-embedder.ts). */
const SEARCH_TIMEOUT_MS = 60_000;

const MemorySearchRequestSchema = z.strictObject({
  op: z.literal('search'),
  query: z.string().check(z.minLength(1), z.maxLength(MAX_QUERY_CHARS)),
  limit: z.number().check(z.int(), z.positive(), z.maximum(MAX_HITS)),
  /** The event the turn answers, left out of the hits (THECLAW_ASKING_EVENT). */
  asking: z.optional(z.number().check(z.int(), z.nonnegative())),
});

/** The run's doors, one per conversation its turns search from. */
export interface MemoryDoors {
  /**
   * The socket of conversation `threadId`, opened at its first turn; `thread`: its thread's path,
   * which the search reads, or null where the thread is shared (its sandbox does not see it).
   * Null when it cannot be opened (said in the log): the turn goes on, its search finds no messages.
   */
  socketFor(threadId: string, thread: string | null): Promise<string | null>;
  close(): Promise<void>;
}

/** The run's side: searches for its turns in the home's store, with the run's environment (`env`). */
export function openMemoryDoors(home: string, dir: AgentDir, env: NodeJS.ProcessEnv, logger: Logger): MemoryDoors {
  const doors = new Map<string, ReturnType<typeof listenPrivateSocket>>();
  const serve = (threadId: string, thread: string | null) => async (raw: unknown) => {
    const { query, limit, asking } = validate(MemorySearchRequestSchema, raw, { what: 'memory search request', kind: 'usage', suggestion: 'send {"op":"search","query":"...","limit":5}' });
    try {
      const scope = conversationScope(dir, threadId);
      const own = thread === null ? [] : [thread];
      return await searchIndex(
        home,
        dir,
        query,
        // A shared thread stays out of the scope too: the agent's index may hold it from another search.
        { scope: { ...scope, threads: thread === null ? [] : scope.threads }, limit, threads: storedThreads(home, dir, env, own), asking: { where: threadId, at: asking ?? Number.NaN } },
        env,
      );
    } catch (error) {
      if (isClawError(error)) throw redactedError(error, env);
      // The sandbox is told no more than that: a store's error may name what it holds.
      logger.error(`memory search for thread ${threadId}: ${(error as Error).message}`);
      throw new ClawError('io', 'the memory search failed in the agent run', { suggestion: "try again; the agent's log says why" });
    }
  };
  return {
    async socketFor(threadId, thread) {
      let door = doors.get(threadId);
      if (!door) {
        door = listenPrivateSocket('memory', serve(threadId, thread));
        doors.set(threadId, door);
      }
      try {
        return (await door).socket;
      } catch (error) {
        doors.delete(threadId); // the next turn tries again
        logger.warn(`run: memory search in thread ${threadId} finds no messages: no memory socket (${(error as Error).message})`);
        return null;
      }
    },
    async close() {
      const open = [...doors.values()];
      doors.clear();
      await Promise.all(open.map(async (door) => (await door.catch(() => null))?.close()));
    },
  };
}

/** A search from wherever `agent memory search` runs: in a turn through its run's socket when it has one, else here. */
export async function searchMemoryFromHere(home: string, id: string, query: string, options: MemorySearchOptions, env: NodeJS.ProcessEnv = process.env): Promise<MemoryHit[]> {
  const socket = env[MEMORY_SOCKET_ENV];
  if (!socket || turnConversation(id, options, env) === undefined) return searchMemory(home, id, query, options, env);
  requireAgent(home, id);
  const asking = Number(env.THECLAW_ASKING_EVENT);
  const ask = {
    op: 'search',
    query: query.slice(0, MAX_QUERY_CHARS),
    limit: Math.min(options.limit ?? 5, MAX_HITS),
    ...(Number.isInteger(asking) && asking >= 0 ? { asking } : {}),
  } satisfies z.input<typeof MemorySearchRequestSchema>;
  return request<MemoryHit[]>(socket, ask, { timeoutMs: SEARCH_TIMEOUT_MS });
}
