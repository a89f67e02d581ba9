import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { usageError } from '../core/errors.js';
import { agentInboxPath } from '../core/layout.js';
import { isValidId } from '../core/slug.js';
import type { Route } from './types.js';

/** Throws a usage error unless `agent` is an agent id: it becomes a directory name. */
export function requireAgentId(agent: string): string {
  if (!isValidId(agent)) {
    throw usageError(`${JSON.stringify(agent)} is not an agent id`, 'agent ids are lower-case letters, digits, _ and - (e.g. admin); see them with: agent list');
  }
  return agent;
}

/**
 * The route for a message: among the routes whose channel and peer match (exactly or by `*`),
 * an exact peer wins over `*`, then an exact channel over `*`, then the earlier route.
 */
export function findRoute(routes: readonly Route[], channelId: string, peerId: string): Route | undefined {
  let best: { route: Route; score: number } | undefined;
  for (const route of routes) {
    const channelExact = route.channel === channelId;
    const peerExact = route.peer === peerId;
    if (!(channelExact || route.channel === '*') || !(peerExact || route.peer === '*')) continue;
    const score = (peerExact ? 2 : 0) + (channelExact ? 1 : 0);
    if (!best || score > best.score) best = { route, score };
  }
  return best?.route;
}

/** Whether messages routed to `agent` have an inbox to go to (`agent init` made one). */
export function agentExists(home: string, agent: string): boolean {
  return existsSync(join(agentInboxPath(home, agent), 'events.db'));
}
