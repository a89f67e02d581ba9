import { existsSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { yaml } from '../core/config.js';
import { join } from 'node:path';
import { joinCommand } from '../core/command.js';
import { ClawError, usageError } from '../core/errors.js';
import { readLockHolder } from '../core/lock.js';
import { validate } from '../core/validate.js';
import { createLogger } from '../core/logger.js';
import { cliPath } from '../core/package.js';
import { openThread } from '../thread/index.js';
import { agentDir, listAgentIds, loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { identityText } from './context.js';
import { defaultIdentity, defaultUsage, isSystemAgentId, SYSTEM_AGENTS } from './identity.js';
import { THREAD_FOLDERS } from './router.js';
import { AgentConfigSchema } from './types.js';
import { damagedThread, describeDamage, type DamagedThread } from './damaged-thread.js';
import { agentModel, describeShortage, windowShortage } from './window-check.js';
import { ensureDir } from '../core/home.js';
import { INBOX_CONSUMER } from '../core/layout.js';
import { PEER_KEYWORDS } from './policy/tool-policy.js';

export { INBOX_CONSUMER };
export const OUTBOUND_CONSUMER = 'outbound';
export const INBOX_FILTER = "type = 'message'";
export const OUTBOUND_FILTER = "type = 'message' AND source = 'self'";

/**
 * Handlers are stored with the absolute paths of this Node and this package, so notifier finds
 * them whatever its PATH; `agent start` stores them again, so a moved install heals itself. They
 * name nothing in the home, which can move too: `agent deliver` takes its thread from
 * THECLAW_THREAD, which notifier sets.
 */
export function runHandler(id: string): string {
  return joinCommand([process.execPath, cliPath('agent'), 'run', id]);
}

export function deliverHandler(): string {
  return joinCommand([process.execPath, cliPath('agent'), 'deliver', '--consumer', OUTBOUND_CONSUMER]);
}

export interface InitOptions {
  kind?: 'system' | 'user';
  provider?: string;
  model?: string;
}

/**
 * `agent init`: the directory tree, IDENTITY.md, USAGE.md, the inbox thread and, last,
 * config.yaml — the mark of a finished agent. A directory without it is what an init that was
 * interrupted left behind, and is completed rather than refused; files already there are kept.
 */
export function initAgent(home: string, id: string, options: InitOptions = {}): AgentDir {
  const dir = newAgentDir(home, id);
  const kind = options.kind ?? (isSystemAgentId(id) ? 'system' : 'user');
  for (const path of [dir.sessions, dir.memory, ...THREAD_FOLDERS.map((folder) => join(dir.threads, folder)), join(dir.threads, 'main'), dir.skills, dir.workdir, dir.logs]) {
    ensureDir(path);
  }
  const texts = agentTexts(id);
  writeIfMissing(dir.identity, texts.identity);
  writeIfMissing(dir.usage, texts.usage);
  openThread(dir.inbox, { home, create: true }).close(); // creating is idempotent; initThread would refuse a finished inbox
  const pai = paiChoice(options);
  const config = yaml().stringify({
    agent_id: id,
    kind,
    pai,
    routing: { default: 'per-peer' },
    outbound: [{ thread_pattern: '**', via: 'xgw' }],
    concurrency: 4,
    retry: { max_attempts: 3 },
    deliver: { max_attempts: 3 },
  });
  // Whole or not at all: a reader never sees half a config.
  writeFileSync(`${dir.config}.tmp`, config);
  renameSync(`${dir.config}.tmp`, dir.config);
  loadAgentConfig(dir); // what was written must read back
  createLogger(dir.log).info(`initialised agent ${id} (${kind})`);
  return dir;
}

/**
 * `agent init` from the command line: initAgent, after making sure the agent's model has room
 * for its identity and memory (window-check.ts) — a model too small is refused, nothing created.
 */
export async function createAgent(home: string, id: string, options: InitOptions = {}, env: NodeJS.ProcessEnv = process.env): Promise<AgentDir> {
  // A policy rule's `peer` names an agent by its id: one named `owner` or `other` would be read as the keyword.
  if ((PEER_KEYWORDS as readonly string[]).includes(id)) {
    throw usageError(`the agent id ${id} is reserved: policy rules use it as a keyword for peers`, 'choose another id');
  }
  const dir = newAgentDir(home, id);
  const config = validate(AgentConfigSchema, { agent_id: id, pai: paiChoice(options) }, { what: 'agent options', kind: 'usage', suggestion: 'give --provider and --model non-empty values' });
  const model = await agentModel(home, config, env);
  // An interrupted init's IDENTITY.md is kept, so it is the one that counts.
  const shortage = model && windowShortage(existsSync(dir.identity) ? identityText(dir) : agentTexts(id).identity, config, model);
  if (shortage) {
    throw new ClawError('invalid', describeShortage(shortage), {
      suggestion: `choose a model with a larger window (--provider, --model), or give ${shortage.model} a smaller max_output_tokens in $THECLAW_HOME/pai/config.yaml`,
    });
  }
  return initAgent(home, id, options);
}

/** The directory of an agent about to be created; refused when a finished agent is there. */
function newAgentDir(home: string, id: string): AgentDir {
  const dir = agentDir(home, id);
  if (existsSync(dir.config)) {
    throw new ClawError('conflict', `agent ${id} exists already (${dir.root})`, { suggestion: `use it, or remove it first with: rm -rf ${dir.root}` });
  }
  return dir;
}

function agentTexts(id: string): { identity: string; usage: string } {
  return isSystemAgentId(id) ? SYSTEM_AGENTS[id] : { identity: defaultIdentity(id), usage: defaultUsage(id) };
}

function paiChoice(options: InitOptions): { provider?: string; model?: string } {
  return Object.fromEntries(Object.entries({ provider: options.provider, model: options.model }).filter(([, value]) => value !== undefined));
}

function writeIfMissing(path: string, text: string): void {
  if (!existsSync(path)) writeFileSync(path, text);
}

/**
 * `agent start`: subscribes the inbox (handler `agent run <id>`), and stores the outbound
 * handler of every conversation thread again. Messages that arrived while stopped are handled
 * from the stored progress.
 */
export function startAgent(home: string, id: string): void {
  const dir = requireAgent(home, id);
  loadAgentConfig(dir);
  const inbox = openThread(dir.inbox, { home });
  try {
    inbox.subscribe({ consumer: INBOX_CONSUMER, handler: runHandler(id), filter: INBOX_FILTER });
  } finally {
    inbox.close();
  }
  const logger = createLogger(dir.log);
  for (const path of conversationThreads(dir)) {
    try {
      const thread = openThread(path, { home });
      try {
        thread.subscribe({ consumer: OUTBOUND_CONSUMER, handler: deliverHandler(), filter: OUTBOUND_FILTER });
      } finally {
        thread.close();
      }
    } catch (error) {
      // One damaged conversation does not keep the agent from starting (status names it).
      const damage = damagedThread(dir, path, error);
      if (!damage) throw error;
      logger.error(`start: ${describeDamage(damage)}`);
    }
  }
  logger.info(`started agent ${id}`);
}

/** `agent stop`: unsubscribes the inbox; progress is kept, messages wait; a running batch finishes. */
export function stopAgent(home: string, id: string): boolean {
  const dir = requireAgent(home, id);
  const inbox = openThread(dir.inbox, { home });
  try {
    const subscribed = inbox.consumer(INBOX_CONSUMER)?.subscribed ?? false;
    if (subscribed) inbox.unsubscribe(INBOX_CONSUMER);
    createLogger(dir.log).info(`stopped agent ${id}`);
    return subscribed;
  } finally {
    inbox.close();
  }
}

export interface AgentStatus {
  id: string;
  kind: string;
  started: boolean;
  /** Inbox messages not handled yet. */
  pending: number;
  /** A run of this agent going on now. */
  running: boolean;
  last_activity: string | null;
  model: string;
  threads: number;
  /** Replies waiting for delivery, over every thread. */
  undelivered: number;
  /** Conversation threads that cannot be read: their conversations stop until they are moved away. */
  damaged: DamagedThread[];
}

export function agentStatus(home: string, id: string): AgentStatus {
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const inbox = openThread(dir.inbox, { home });
  let consumer;
  let lastInbox: string | null = null;
  let never: number;
  try {
    consumer = inbox.consumer(INBOX_CONSUMER);
    lastInbox = inbox.peek({ last: 1 })[0]?.created_at ?? null;
    never = consumer ? 0 : inbox.info().events; // never started: everything waits
  } finally {
    inbox.close();
  }
  let lastActivity = lastInbox;
  let undelivered = 0;
  const threads = conversationThreads(dir);
  const damaged: DamagedThread[] = [];
  for (const path of threads) {
    try {
      const thread = openThread(path, { home });
      try {
        const last = thread.peek({ last: 1 })[0]?.created_at ?? null;
        if (last && (!lastActivity || last > lastActivity)) lastActivity = last;
        undelivered += thread.consumer(OUTBOUND_CONSUMER)?.pending ?? 0;
      } finally {
        thread.close();
      }
    } catch (error) {
      const damage = damagedThread(dir, path, error);
      if (!damage) throw error;
      damaged.push(damage);
    }
  }
  return {
    id,
    kind: config.kind,
    started: consumer?.subscribed ?? false,
    pending: consumer?.pending ?? never,
    // A run notifier started holds the inbox lease; one started by hand holds only run.lock.
    running: Boolean(consumer?.lease) || readLockHolder(dir.runLock) !== null,
    last_activity: lastActivity,
    model: config.pai.provider ? `${config.pai.provider}/${config.pai.model ?? '(default)'}` : '(pai default)',
    threads: threads.length,
    undelivered,
    damaged,
  };
}

export function listAgents(home: string): AgentStatus[] {
  return listAgentIds(home).map((id) => agentStatus(home, id));
}

/** Every conversation thread directory of the agent, and its heartbeat thread. */
export function conversationThreads(dir: AgentDir): string[] {
  const found: string[] = [];
  for (const group of THREAD_FOLDERS) {
    const parent = join(dir.threads, group);
    if (!existsSync(parent)) continue;
    for (const name of readdirSync(parent)) {
      const path = join(parent, name);
      if (statSync(path).isDirectory() && existsSync(join(path, 'events.db'))) found.push(path);
    }
  }
  if (existsSync(join(dir.threads, 'main', 'events.db'))) found.push(join(dir.threads, 'main'));
  // Not a conversation, but its usage and errors count like one's (status, /usage, prune).
  if (existsSync(join(dir.heartbeat, 'events.db'))) found.push(dir.heartbeat);
  return found;
}
