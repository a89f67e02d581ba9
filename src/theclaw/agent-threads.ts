import { agentDir, listAgentIds, type AgentDir } from '../agent/agent-dir.js';
import { damagedThread, type DamagedThread } from '../agent/damaged-thread.js';
import type { AgentStatus } from '../agent/lifecycle.js';
import { openThread, type Thread } from '../thread/index.js';

export interface AgentThread {
  agent: string;
  dir: AgentDir;
  path: string;
  thread: Thread;
}

/** A damaged conversation thread met while reading, with the agent it belongs to. */
export interface AgentDamage extends DamagedThread {
  agent: string;
}

/**
 * Calls `fn` with each thread of every agent that `pick` names, open, and closes it after. A
 * thread that cannot be opened is skipped: systemStatus shows it as the agent's error. A thread
 * found damaged, at opening or by a read of `fn` (SQLite finds a page written over only when it
 * reads it), is skipped too and added to `damaged`, for status and doctor to name.
 */
export function forEachAgentThread(home: string, pick: (dir: AgentDir) => string[], fn: (at: AgentThread) => void, damaged: AgentDamage[] = []): void {
  for (const agent of listAgentIds(home)) {
    const dir = agentDir(home, agent);
    for (const path of pick(dir)) {
      let thread;
      try {
        thread = openThread(path, { home });
        fn({ agent, dir, path, thread });
      } catch (error) {
        const damage = damagedThread(dir, path, error);
        if (damage) damaged.push({ ...damage, agent });
        else if (thread) throw error;
      } finally {
        thread?.close();
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
