import { existsSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { yaml } from '../core/config.js';
import { join } from 'node:path';
import { joinCommand } from '../core/command.js';
import { isHostsOwnChannel, parseAddress } from '../core/address.js';
import { ClawError, isClawError, usageError } from '../core/errors.js';
import { readLockHolder } from '../core/lock.js';
import { validate } from '../core/validate.js';
import { createLogger } from '../core/logger.js';
import { cliPath } from '../core/package.js';
import { threadName, type StoredThread } from '../thread/index.js';
import { openAgentThread, threadStore, withAgentThread } from './threads.js';
import { agentDir, listAgentIds, loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { placeAgent } from './placement.js';
import { identityText } from './context.js';
import { defaultIdentity, defaultUsage, isSystemAgentId, SYSTEM_AGENTS } from './identity.js';
import { THREAD_FOLDERS } from './router.js';
import { TASK_CONVERSATION } from './tasks.js';
import { AgentConfigSchema, DEFAULT_DELIVER_ATTEMPTS } from './types.js';
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

/**
 * `maxAttempts`: the agent's `deliver.max_attempts`, carried in the handler (and so in the store)
 * when it is not the default, for a host that delivers the agent's replies without its directory.
 */
export function deliverHandler(maxAttempts = DEFAULT_DELIVER_ATTEMPTS): string {
  const carried = maxAttempts === DEFAULT_DELIVER_ATTEMPTS ? [] : ['--max-attempts', String(maxAttempts)];
  return joinCommand([process.execPath, cliPath('agent'), 'deliver', '--consumer', OUTBOUND_CONSUMER, ...carried]);
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
export async function initAgent(home: string, id: string, options: InitOptions = {}, env: NodeJS.ProcessEnv = process.env): Promise<AgentDir> {
  const dir = newAgentDir(home, id);
  const kind = options.kind ?? (isSystemAgentId(id) ? 'system' : 'user');
  for (const path of [dir.sessions, dir.memory, ...THREAD_FOLDERS.map((folder) => join(dir.threads, folder)), join(dir.threads, 'main'), dir.skills, dir.workdir, dir.logs]) {
    ensureDir(path);
  }
  const texts = agentTexts(id);
  writeIfMissing(dir.identity, texts.identity);
  writeIfMissing(dir.usage, texts.usage);
  await (await openAgentThread(home, dir.inbox, { create: true }, env)).close(); // creating is idempotent; init would refuse a finished inbox
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
  return initAgent(home, id, options, env);
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
 * from the stored progress. The inbox's runs belong to the agent's host (`agent:<id>`), each
 * conversation's deliveries to its channel's gateway (`outboundRunOn`); SQLite has one host.
 */
export async function startAgent(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const dir = requireAgent(home, id);
  // Every start places the agent (system agents and `theclaw up`'s too): on a store shared by
  // hosts an inbox subscribed to run on `agent:<id>` runs nowhere until that key is placed.
  await placeAgent(home, id, env);
  await subscribeAgent(home, dir, id, env);
  createLogger(dir.log).info(`started agent ${id}`);
}

/**
 * The start's subscriptions, in the store: whichever host's notifier the placements name runs
 * them, so `agent move` starts an agent on its target host this way, from the host it leaves.
 */
export async function subscribeAgent(home: string, dir: AgentDir, id: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { max_attempts } = loadAgentConfig(dir).deliver;
  await withAgentThread(home, dir.inbox, (inbox) => inbox.subscribe({ consumer: INBOX_CONSUMER, handler: runHandler(id), filter: INBOX_FILTER, runOn: inboxRunOn(id) }), env);
  const logger = createLogger(dir.log);
  for (const path of await storedConversationThreads(home, dir, env)) {
    try {
      await withAgentThread(home, path, async (thread) => subscribeOutbound(thread, (await thread.peek({ filter: FROM_OUTSIDE, last: 1 }))[0]?.source, id, max_attempts), env);
    } catch (error) {
      // One damaged conversation does not keep the agent from starting (status names it).
      const damage = damagedThread(dir, path, error);
      if (!damage) throw error;
      logger.error(`start: ${describeDamage(damage)}`);
    }
  }
}

/** `agent stop`: unsubscribes the inbox; progress is kept, messages wait; a running batch finishes. */
export async function stopAgent(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const dir = requireAgent(home, id);
  return withAgentThread(
    home,
    dir.inbox,
    async (inbox) => {
      const subscribed = (await inbox.consumer(INBOX_CONSUMER))?.subscribed ?? false;
      if (subscribed) await inbox.unsubscribe(INBOX_CONSUMER);
      createLogger(dir.log).info(`stopped agent ${id}`);
      return subscribed;
    },
    env,
  );
}

/** Where an agent's runs go: the host it is placed on (PostgreSQL; SQLite has one host and ignores it). */
export function inboxRunOn(id: string): string {
  return `agent:${id}`;
}

const FROM_OUTSIDE = "type = 'message' AND source != 'self'";

/**
 * Subscribes a conversation's deliveries (again: the handler is stored anew). Replies to people go
 * out through the gateway that owns their channel (`channel:<type>:<instance>`, xgw's channel id,
 * from `source`: the address of a message in the thread); a terminal chat's on the agent's own host
 * (a terminal channel is each host's, never claimed, and its owner chats where the agent is);
 * a task's result on the asker's host, which keeps the task's row (tasks.ts); replies to an agent
 * from any host. A thread several channels share (per-agent
 * routing, a linked person) goes with the last. The handler carries `deliver.max_attempts`
 * (`deliverHandler`): that host may not hold the agent's config.
 */
export async function subscribeOutbound(thread: StoredThread, source: string | undefined, agentId: string, maxAttempts: number): Promise<void> {
  const runOn = outboundRunOn(source, agentId);
  await thread.subscribe({ consumer: OUTBOUND_CONSUMER, handler: deliverHandler(maxAttempts), filter: OUTBOUND_FILTER, ...(runOn ? { runOn } : {}) });
}

function outboundRunOn(source: string | undefined, agentId: string): string | undefined {
  try {
    const address = source === undefined ? null : parseAddress(source);
    if (address?.kind === 'internal') return address.conversationType === TASK_CONVERSATION ? inboxRunOn(address.agentId) : undefined;
    if (address?.kind !== 'external') return undefined;
    return isHostsOwnChannel(address.channelType) ? inboxRunOn(agentId) : `channel:${address.channelType}:${address.instance}`;
  } catch {
    return undefined; // a message pushed by hand with a source that is no address
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

export async function agentStatus(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<AgentStatus> {
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const { consumer, lastInbox, never } = await withAgentThread(
    home,
    dir.inbox,
    async (inbox) => {
      const consumer = await inbox.consumer(INBOX_CONSUMER);
      return {
        consumer,
        lastInbox: (await inbox.peek({ last: 1 }))[0]?.created_at ?? null,
        never: consumer ? 0 : (await inbox.info()).events, // never started: everything waits
      };
    },
    env,
  );
  let lastActivity = lastInbox;
  let undelivered = 0;
  let threads = 0;
  const damaged: DamagedThread[] = [];
  for (const path of await storedConversationThreads(home, dir, env)) {
    try {
      await withAgentThread(
        home,
        path,
        async (thread) => {
          const last = (await thread.peek({ last: 1 }))[0]?.created_at ?? null;
          if (last && (!lastActivity || last > lastActivity)) lastActivity = last;
          undelivered += (await thread.consumer(OUTBOUND_CONSUMER))?.pending ?? 0;
        },
        env,
      );
      threads++;
    } catch (error) {
      // An events.db without a schema, which a creator killed in the midst left: nothing in it.
      if (isClawError(error, 'not_found')) continue;
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
    threads,
    undelivered,
    damaged,
  };
}

export async function listAgents(home: string, env: NodeJS.ProcessEnv = process.env): Promise<AgentStatus[]> {
  const all: AgentStatus[] = [];
  for (const id of listAgentIds(home)) all.push(await agentStatus(home, id, env));
  return all;
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

/**
 * conversationThreads in the home's store: in SQLite, the directories as above; in PostgreSQL,
 * the threads named under the agent's `threads/` (a thread there has no directory).
 */
export async function storedConversationThreads(home: string, dir: AgentDir, env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const store = await threadStore(home, env);
  if (store.kind === 'sqlite') return conversationThreads(dir);
  const under = `${threadName(home, dir.threads)}/`;
  const conversation = new RegExp(`^(?:(?:${THREAD_FOLDERS.join('|')})/[^/]+|main)$`);
  const names = (await store.list()).filter((name) => name.startsWith(under));
  const paths = names.filter((name) => conversation.test(name.slice(under.length))).map((name) => join(home, name));
  const heartbeat = threadName(home, dir.heartbeat);
  return names.includes(heartbeat) ? [...paths, join(home, heartbeat)] : paths;
}
