import { existsSync } from 'node:fs';
import { ClawError } from '../core/errors.js';
import { hostName } from '../core/host.js';
import { agentKey, type ThreadStore } from '../thread/index.js';
import { threadStore } from './threads.js';
import { agentDir, loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';

/**
 * Where an agent runs when hosts share a PostgreSQL store: on one host, which holds its directory
 * (IDENTITY.md, memory, workdir) and whose notifier runs its turns. `placement: { host }` in its
 * config names that host for its first start, which writes it to the store's placements as
 * `agent:<id>` (no expiry); from then on that row decides (`agent move` changes it), and the agent
 * is not started on any other host. On
 * SQLite there is one host, and nothing to check.
 */
export async function placeAgent(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const store = await threadStore(home, env);
  if (store.kind === 'sqlite') return; // one host: nothing to place, and nothing more to read
  const config = loadAgentConfig(requireAgent(home, id));
  const here = hostName(home, env);
  // The store's placement, once there is one, decides (agent move changes it); the config only the first.
  const placed = await agentHost(store, id);
  if (placed !== null && placed !== here) throw placedElsewhereError(id, placed, here, `the placements in ${store.location}`);
  const wanted = config.placement?.host ?? here;
  if (placed === null && wanted !== here) throw placedElsewhereError(id, wanted, here, 'its config.yaml');
  await store.placements.seen(here, home);
  const { claimed, placement } = await store.placements.claim(agentKey(id), here);
  if (!claimed) throw placedElsewhereError(id, placement.host, here, `the placements in ${store.location}`);
}

/** The other host an agent is placed on, or null when it may run here (placed here, never placed, or SQLite). */
export async function placedElsewhere(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const placed = await agentPlacement(home, id, env);
  return placed !== null && placed !== hostName(home, env) ? placed : null;
}

/**
 * Places an agent that has no directory yet on this host, unless a host has it already: the host
 * it runs on. Of two hosts making it at once, one gets it and the other is told that one's name,
 * before either has made a directory (SQLite: always this host).
 */
export async function claimPlacement(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const store = await threadStore(home, env);
  const here = hostName(home, env);
  if (store.kind === 'postgres') await store.placements.seen(here, home);
  return (await store.placements.claim(agentKey(id), here)).placement.host;
}

/** The host an agent is placed on, or null where it was never started (SQLite: this host). */
export async function agentPlacement(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const store = await threadStore(home, env);
  return store.kind === 'sqlite' ? hostName(home, env) : agentHost(store, id);
}

/**
 * The agent's directory on this host, or an error that says where it is when the agent is
 * another host's (its directory is there): a person talks to it on that host.
 */
export async function requireAgentHere(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<AgentDir> {
  if (!existsSync(agentDir(home, id).config)) {
    const host = await placedElsewhere(home, id, env);
    if (host !== null) {
      throw new ClawError('not_found', `agent ${id} runs on host ${host}, not on this one (${hostName(home, env)})`, {
        suggestion: `talk to it on ${host} (agent chat ${id} there), or through a channel whose route goes to it`,
      });
    }
  }
  return requireAgent(home, id);
}

/** The host an agent is placed on, per the store (this host on SQLite), or null where it was never started. */
export async function agentHost(store: ThreadStore, id: string): Promise<string | null> {
  return (await store.placements.get(agentKey(id)))?.host ?? null;
}

function placedElsewhereError(id: string, host: string, here: string, where: string): ClawError {
  return new ClawError('conflict', `agent ${id} is placed on host ${host} (${where}), not on this one (${here}), so it is not started here`, {
    suggestion: `start it on ${host}, or move it here with: agent move ${id} --to ${here} (run on ${host})`,
  });
}
