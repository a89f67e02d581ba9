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

/** The thread every agent's runtime appends its errors to, for the maintainer's sweep: `feeds/errors/`. */
export function errorFeedPath(home: string): string {
  return join(home, 'feeds', 'errors');
}
