import { join } from 'node:path';

/**
 * The parts of `$THECLAW_HOME` one tool writes and another reads, in one place: an agent's
 * directory and inbox are the agent's (src/agent/agent-dir.ts lays out the rest of it), but the
 * gateway pushes into the inbox and the umbrella tool reads it.
 */

/** Where the agents live: `agents/<id>/`. */
export function agentsRoot(home: string): string {
  return join(home, 'agents');
}

/** An agent's inbox thread, which xgw and `agent send` push messages into. */
export function agentInboxPath(home: string, agentId: string): string {
  return join(agentsRoot(home), agentId, 'inbox');
}

/** The inbox's consumer that `agent run` reads with; unsubscribed while the agent is stopped. */
export const INBOX_CONSUMER = 'inbox';

/** Where xgw stores the files people send an agent, named by their SHA-256: `agents/<id>/files/`. */
export const AGENT_FILES_DIR = 'files';

/**
 * The feeds: threads of the whole home that every agent's runtime appends to, so that a system
 * agent's sweep reads what is new since its last look instead of every agent's every thread:
 * `errors` for the maintainer, `toolcalls` for the warden, `proposals` for the evolver's
 * proposals and what became of them.
 */
export const FEED_NAMES = ['errors', 'toolcalls', 'proposals'] as const;
export type FeedName = (typeof FEED_NAMES)[number];

/** A feed's thread: `feeds/<name>/`. */
export function feedPath(home: string, name: FeedName): string {
  return join(home, 'feeds', name);
}
