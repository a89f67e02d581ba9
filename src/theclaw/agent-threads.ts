import { agentDir, listAgentIds, type AgentDir } from '../agent/agent-dir.js';
import { openThread, type Thread } from '../thread/index.js';

export interface AgentThread {
  agent: string;
  dir: AgentDir;
  path: string;
  thread: Thread;
}

/**
 * Calls `fn` with each thread of every agent that `pick` names, open, and closes it after. A
 * thread that cannot be opened is skipped: systemStatus shows it as the agent's error.
 */
export function forEachAgentThread(home: string, pick: (dir: AgentDir) => string[], fn: (at: AgentThread) => void): void {
  for (const agent of listAgentIds(home)) {
    const dir = agentDir(home, agent);
    for (const path of pick(dir)) {
      let thread;
      try {
        thread = openThread(path, { home });
      } catch {
        continue;
      }
      try {
        fn({ agent, dir, path, thread });
      } finally {
        thread.close();
      }
    }
  }
}

/** Orders ISO timestamps (or days) newest first: they sort as text. */
export function newestFirst(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}
