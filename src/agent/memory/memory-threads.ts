import { statSync } from 'node:fs';
import { join } from 'node:path';
import { openThread, type ThreadEvent } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { conversationThreads, storedConversationThreads } from '../lifecycle.js';
import { threadIdOfPath } from '../router.js';
import { withAgentThread } from '../threads.js';

/**
 * Where the memory index (memory-index.ts) reads an agent's conversation threads: their SQLite
 * files as this process sees them (`threadFiles`: the agent's, or in a sandbox only the
 * conversation's own), or the home's store (`storedThreads`: PostgreSQL, where a thread has no
 * file). A thread is read again only when its signature changed, and then from its last indexed
 * event on.
 */
export interface IndexedThreads {
  /** The threads to index, by id and path. */
  list(): Promise<{ id: string; path: string }[]>;
  /** The thread's messages after `known.lastId`, with its signature now; null while its signature is `known`'s. */
  read(path: string, known: { lastId: number; signature: string } | undefined): Promise<{ signature: string; messages: ThreadEvent[] } | null>;
}

/** Messages one refresh reads of a thread at most. */
const READ_LIMIT = 100_000;
const MESSAGES = "type = 'message'";

/** The thread files in the agent's directory; a thread's signature is its database files' sizes and times. */
export function threadFiles(dir: AgentDir): IndexedThreads {
  return {
    list: async () => withIds(dir, conversationThreads(dir)),
    read: async (path, known) => {
      const signature = signatureOf([join(path, 'events.db'), join(path, 'events.db-wal')]);
      if (known?.signature === signature) return null;
      const thread = openThread(path, { readOnly: true });
      try {
        return { signature, messages: thread.peek({ afterId: known?.lastId ?? 0, limit: READ_LIMIT, filter: MESSAGES }) };
      } finally {
        thread.close();
      }
    },
  };
}

/**
 * The agent's threads in the home's store; `only`: just these (a conversation's search in its
 * run, memory-door.ts, which must index no more than its sandbox would see). A thread's signature
 * is its newest event's id: ids are never given again.
 */
export function storedThreads(home: string, dir: AgentDir, env: NodeJS.ProcessEnv, only?: readonly string[]): IndexedThreads {
  return {
    list: async () => withIds(dir, only ?? (await storedConversationThreads(home, dir, env))),
    read: (path, known) =>
      withAgentThread(
        home,
        path,
        async (thread) => {
          const signature = `#${(await thread.peek({ last: 1 }))[0]?.id ?? 0}`;
          if (known?.signature === signature) return null;
          return { signature, messages: await thread.peek({ afterId: known?.lastId ?? 0, limit: READ_LIMIT, filter: MESSAGES }) };
        },
        env,
      ),
  };
}

function withIds(dir: AgentDir, paths: readonly string[]): { id: string; path: string }[] {
  return paths.flatMap((path) => {
    const id = threadIdOfPath(dir, path);
    return id ? [{ id, path }] : [];
  });
}

function signatureOf(files: string[]): string {
  return files
    .map((file) => {
      const stat = statSync(file, { throwIfNoEntry: false });
      return stat ? `${stat.size}:${stat.mtimeMs}` : '-';
    })
    .join(' ');
}
