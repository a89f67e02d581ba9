import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { closest, distance } from 'fastest-levenshtein';
import { loadYamlConfig } from '../core/config.js';
import { ClawError, usageError } from '../core/errors.js';
import { agentInboxPath, agentRoot, agentsRoot } from '../core/layout.js';
import { isValidId } from '../core/slug.js';
import { ownerWebchats } from '../xgw/config.js';

export { agentsRoot };
import { AgentConfigSchema, type AgentConfig } from './types.js';
import { linkedOwners } from './identities.js';

/** The thread id of the heartbeats' thread (THECLAW_CONVERSATION in a beat): no conversation's id has this form (router.ts). */
export const HEARTBEAT_THREAD_ID = 'heartbeat';

/**
 * The layout of an agent directory, in one place. The parts other tools use (its inbox, `files/`,
 * `outbox/`) are named in core/layout.ts; the rest is the agent runtime's own.
 */
export interface AgentDir {
  id: string;
  /** The THECLAW_HOME it is in. */
  home: string;
  root: string;
  identity: string;
  usage: string;
  config: string;
  inbox: string;
  sessions: string;
  memory: string;
  threads: string;
  skills: string;
  workdir: string;
  logs: string;
  log: string;
  runLock: string;
  /** The runtime's own small database (delivery attempts). */
  state: string;
  /** The turns under way and their process marks (core/turn-processes.ts). */
  turnProcesses: string;
  /** Present while messages wait for an unreachable model (see outage.ts). */
  outage: string;
  /** Present while memory search's embeddings cannot be had, and until when they are not asked for (memory-embedder.ts). */
  embeddingsOutage: string;
  /** The heartbeats' own thread (heartbeat.ts): no person's conversation. */
  heartbeat: string;
  /** Held while a heartbeat runs: one at a time. */
  heartbeatLock: string;
}

export function agentDir(home: string, id: string): AgentDir {
  if (!isValidId(id)) {
    throw usageError(`invalid agent id ${JSON.stringify(id)}`, 'use lower-case letters, digits, _ and - (at most 63), starting with a letter or digit');
  }
  const root = agentRoot(home, id);
  return {
    id,
    home,
    root,
    identity: join(root, 'IDENTITY.md'),
    usage: join(root, 'USAGE.md'),
    config: join(root, 'config.yaml'),
    inbox: agentInboxPath(home, id),
    sessions: join(root, 'sessions'),
    memory: join(root, 'memory'),
    threads: join(root, 'threads'),
    skills: join(root, 'skills'),
    workdir: join(root, 'workdir'),
    logs: join(root, 'logs'),
    log: join(root, 'logs', 'agent.log'),
    runLock: join(root, 'run.lock'),
    state: join(root, 'state.db'),
    turnProcesses: join(root, 'turn-processes'),
    outage: join(root, 'model-outage.json'),
    embeddingsOutage: join(root, 'embeddings-outage.json'),
    heartbeat: join(root, 'threads', HEARTBEAT_THREAD_ID),
    heartbeatLock: join(root, 'heartbeat.lock'),
  };
}

/**
 * `workdirs/<thread id>/`: the workdir of one conversation that is not the owner's
 * (sandbox-profile.ts turnWorkdir), outside `workdir/`, so that neither sees the other's files.
 */
export function conversationWorkdir(dir: AgentDir, threadId: string): string {
  return join(dir.root, 'workdirs', threadId);
}

/**
 * `index/conversations/<thread id>/`: the memory search index of one conversation's commands
 * (memory-index.ts), in their sandbox; `index/memory.db`, which holds every conversation, is not.
 */
export function conversationIndexFolder(dir: AgentDir, threadId: string): string {
  return join(dir.root, 'index', 'conversations', threadId);
}

/**
 * An existing agent's directory. A missing one is `not_found`, suggesting the agent whose id is a
 * likely typo of it, else how to create it, and naming the data directory looked in: a shell
 * without THECLAW_HOME silently looks in ~/.theclaw.
 */
export function requireAgent(home: string, id: string): AgentDir {
  const dir = agentDir(home, id);
  if (!existsSync(dir.config)) {
    const near = nearestAgent(home, id);
    const listed = `agent list shows the agents in ${home}`;
    throw new ClawError('not_found', `there is no agent ${id}`, { suggestion: near ? `did you mean ${near}? (${listed})` : `create it with: agent init ${id} (${listed})` });
  }
  return dir;
}

/** The existing agent an id is most likely a typo of: at most 2 edits away, and fewer than half its letters. */
function nearestAgent(home: string, id: string): string | undefined {
  const ids = listAgentIds(home);
  if (ids.length === 0) return undefined;
  const near = closest(id, ids);
  const edits = distance(id, near);
  return edits <= 2 && edits * 2 < Math.max(id.length, near.length) ? near : undefined;
}

/** The agent's config; its policy with the owner's own web chats, as xgw's config has them. */
export function loadAgentConfig(dir: AgentDir): AgentConfig {
  const config = loadYamlConfig(dir.config, AgentConfigSchema);
  if (config.agent_id !== dir.id) {
    throw new ClawError('invalid', `${dir.config} says agent_id ${config.agent_id}, but the directory is ${dir.id}`, { suggestion: `set agent_id: ${dir.id}` });
  }
  return { ...config, policy: { ...config.policy, ownerWebchats: ownerWebchats(dir.home), linkedOwners: linkedOwners(config.identities, config.policy.owners) } };
}

/** Ids of every agent directory that has a config. */
export function listAgentIds(home: string): string[] {
  try {
    return readdirSync(agentsRoot(home))
      .filter((name) => isValidId(name) && existsSync(join(agentRoot(home, name), 'config.yaml')))
      .sort();
  } catch {
    return [];
  }
}
