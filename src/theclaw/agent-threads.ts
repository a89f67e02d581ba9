import { agentDir, listAgentIds, type AgentDir } from '../agent/agent-dir.js';
import { damagedThread, type DamagedThread } from '../agent/damaged-thread.js';
import { storedConversationThreads, type AgentStatus } from '../agent/lifecycle.js';
import { openAgentThread } from '../agent/threads.js';
import type { StoredThread } from '../thread/index.js';

export interface AgentThread {
  agent: string;
  dir: AgentDir;
  path: string;
  thread: StoredThread;
}

/** A damaged conversation thread met while reading, with the agent it belongs to. */
export interface AgentDamage extends DamagedThread {
  agent: string;
}

/** Which of an agent's threads to read: its conversations (and heartbeat), with its inbox or not. */
export interface ThreadPick {
  inbox: boolean;
  /** Leaves out the heartbeat's thread (not a conversation). Default: false. */
  withoutHeartbeat?: boolean;
}

/**
 * Calls `fn` with each thread of every agent that `pick` names, open, in the home's store (the
 * agent's: its SQLite files, or PostgreSQL), and closes it after. A thread that cannot be opened
 * is skipped: systemStatus shows it as the agent's error. A thread found damaged, at opening or by
 * a read of `fn` (SQLite finds a page written over only when it reads it), is skipped too and
 * added to `damaged`, for status and doctor to name.
 */
export async function forEachAgentThread(home: string, pick: ThreadPick, fn: (at: AgentThread) => Promise<void>, damaged: AgentDamage[] = [], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  for (const agent of listAgentIds(home)) {
    const dir = agentDir(home, agent);
    let paths = await storedConversationThreads(home, dir, env);
    if (pick.withoutHeartbeat) paths = paths.filter((path) => path !== dir.heartbeat);
    for (const path of pick.inbox ? [dir.inbox, ...paths] : paths) {
      let thread: StoredThread | undefined;
      try {
        thread = await openAgentThread(home, path, {}, env);
        await fn({ agent, dir, path, thread });
      } catch (error) {
        const damage = damagedThread(dir, path, error);
        if (damage) damaged.push({ ...damage, agent });
        else if (thread) throw error;
      } finally {
        await thread?.close();
      }
    }
  }
}

/** `status` with the damaged threads of its agent in `found` that it did not meet itself. */
export function withDamage(status: AgentStatus, found: readonly AgentDamage[]): AgentStatus {
  const known = new Set(status.damaged.map((d) => d.file));
  const more = found.filter((d) => d.agent === status.id && !known.has(d.file)).map(({ agent: _, ...damage }) => damage);
  return more.length === 0 ? status : { ...status, damaged: [...status.damaged, ...more] };
}

/** Orders ISO timestamps (or days) newest first: they sort as text. */
export function newestFirst(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}
