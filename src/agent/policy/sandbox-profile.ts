import { realpathSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, relative, sep } from 'node:path';
import { ClawError, errnoCode } from '../../core/errors.js';
import { packageRoot } from '../../core/package.js';
import { withStoragePath } from '../../core/storage-error.js';
import { BASE_SANDBOX_ENV, findBwrap, type Sandbox, type SandboxBind, type SandboxLimits } from '../../pai/index.js';
import { agentDir, conversationIndexFolder, conversationWorkdir, listAgentIds, type AgentDir } from '../agent-dir.js';
import { CONVERSATIONS_DIR, memoryFiles, ownMemoryFile, type MemoryFiles } from '../context.js';
import { archiveFolder, dailyFolder, EMBEDDINGS_SOCKET_ENV, MEMORY_SOCKET_ENV } from '../memory/index.js';
import { forwardSends, OUTBOX_ENV, outboxDir } from './sandbox-sends.js';
import { manageDoor } from './manage-door.js';
import { startRequestedTasks } from '../tasks.js';
import { BROWSER_SOCKET_ENV } from '../../browser/index.js';
import { WEB_SEARCH_SOCKET_ENV } from '../../web/search-door.js';
import type { AgentConfig, ThreadRoute } from '../types.js';
import { ensureDir } from '../../core/home.js';
import { cmdsDir, sharedSkillsDir, webConfigPath } from '../../core/layout.js';

/**
 * The variables of agent run a sandboxed command gets besides the base ones: what `agent send`
 * and `cmds` need to know about the asking agent (run.ts sets them). Never the daemons' own
 * (THECLAW_THREAD, THECLAW_CONSUMER) nor anything else of their environment.
 */
const AGENT_ENV = [
  'THECLAW_HOME',
  'THECLAW_AGENT',
  'THECLAW_AGENT_DIR',
  'THECLAW_CONVERSATION',
  'THECLAW_ASKING_EVENT',
  'THECLAW_LOG_LEVEL',
  EMBEDDINGS_SOCKET_ENV,
  MEMORY_SOCKET_ENV,
  BROWSER_SOCKET_ENV,
  WEB_SEARCH_SOCKET_ENV,
] as const;

/** The agent's `sandbox:` settings; without `limits`, its calls have none. */
type SandboxSettings = Omit<AgentConfig['sandbox'], 'limits'> & Partial<Pick<AgentConfig['sandbox'], 'limits'>>;

/**
 * What one turn's sandbox is made for: a conversation (or a heartbeat), and whether it is the
 * owner's. The runtime knows it (the message's route and sender); the commands never choose it.
 */
export interface TurnScope {
  /** The conversation's thread id (THECLAW_CONVERSATION). */
  threadId: string;
  /**
   * Its thread's directory; null for a thread several people's direct chats share (per-channel,
   * per-agent): it holds the records of each one's commands, which are no one else's.
   */
  thread: string | null;
  /** The memory files its prompt reads (context.ts memoryFiles): the agent's, and the person's or group's. */
  memory: Pick<MemoryFiles, 'agent'> & Partial<MemoryFiles>;
  /** The one of them it keeps (context.ts ownMemoryFile), or null. */
  ownMemory: string | null;
  /** The owner's direct chat (tool-policy.ts isOwnerDirectChat of its sender), or a heartbeat: not a group, which reads the answer. */
  owner: boolean;
  /** The files the message carries (attachments.ts ownFile). */
  files: readonly string[];
}

/** The scope of a message's turn in the conversation `route`; `owner`: it is the owner's direct chat. */
export function messageScope(dir: AgentDir, route: ThreadRoute, owner: boolean, files: readonly string[] = []): TurnScope {
  const memory = memoryFiles(dir, route);
  const shared = route.kind === 'channel' || route.kind === 'main';
  return { threadId: route.threadId, thread: shared ? null : route.path, memory, ownMemory: ownMemoryFile(route, memory), owner, files };
}

/**
 * Where a turn's commands run and keep files: the agent's workdir in the owner's conversations,
 * a workdir of its own in anyone else's (agent-dir.ts conversationWorkdir).
 */
export function turnWorkdir(dir: AgentDir, scope: Pick<TurnScope, 'threadId' | 'owner'>): string {
  return scope.owner ? dir.workdir : conversationWorkdir(dir, scope.threadId);
}

/**
 * The sandbox of a turn's commands, or undefined for the profile `none`. THECLAW_HOME is hidden;
 * of the agent's directory only what the conversation may see comes back (issue 20 §2):
 *
 * - read-only: config.yaml, IDENTITY.md, USAGE.md, skills/, the agent's memory (agent.md with its
 *   daily notes and archived versions), the conversation's own memory file (its person's or
 *   group's, with theirs), its summaries, its thread (where it is its alone), and the files the
 *   message carries;
 * - writable under `sandbox`: the conversation's own memory file, and in the owner's
 *   conversations agent.md and skills/ too; its memory search index (agent-dir.ts
 *   conversationIndexFolder), which holds nothing but what the turn can read anyway;
 * - writable under both profiles: the turn's workdir (turnWorkdir) and the conversation's outbox.
 *
 * Never: other conversations' threads, sessions and summaries, another person's or group's
 * memory, the agent-wide search index (it holds everything), logs, state, and — in anyone but the
 * owner's conversations — the owner's workdir. Nothing the runtime writes or appends to is
 * writable (threads, sessions, logs, the inbox, the memory folders, where a command could plant a
 * link for the runtime to follow out of the sandbox); a memory file is bound by itself, and a
 * rename or unlink over a mount point fails (EBUSY), so it cannot be swapped for a link either.
 *
 * The narrow path the project's CLIs need: `cmds` reads `skills/` and its PATH index (`cmds/`)
 * of the home; `web` its config (`web/config.yaml`, read-only); `thread peek` reads the
 * conversation's thread (through a private copy); `agent memory search` gets embeddings from the
 * run's socket (memory-embedder.ts), and on a PostgreSQL store searches through another
 * (memory-door.ts); `agent send`,
 * `agent attach` and `notifier timer add --message` leave their requests in the conversation's
 * outbox (core/turn-outbox.ts), which the runtime carries out after the call or the turn, in
 * the name of the conversation (sandbox-sends.ts, reply-files.ts, reminders.ts). Not reachable:
 * the other agents' directories but their configs (for `agent send`) and, where the turn may
 * manage agents, their IDENTITY.md and USAGE.md (manage-door.ts, which also carries out the
 * management commands' requests while each call runs), and notifier's socket (it
 * also answers `stop`) and timers, so no timer command the model wrote ever runs outside the
 * sandbox.
 *
 * Creates the turn's workdir (under every profile), the conversation's outbox, and under
 * `sandbox` the memory files it may write (empty) and its index folder. Made for each turn: an agent created meanwhile can be sent
 * to from the next one.
 */
export function agentSandbox(home: string, dir: AgentDir, settings: SandboxSettings, env: NodeJS.ProcessEnv, scope: TurnScope): Sandbox | undefined {
  const workdir = ownFolder(dir, turnWorkdir(dir, scope)); // the commands' cwd, under none too
  if (settings.profile === 'none') return undefined;
  const writes = settings.profile === 'sandbox';
  const outbox = ownFolder(dir, outboxDir(dir, scope.threadId));
  const index = conversationIndexFolder(dir, scope.threadId);
  if (writes) ownFolder(dir, index);
  // Others' configs optional: an agent removed meanwhile must not fail the call.
  const others = listAgentIds(home)
    .filter((id) => id !== dir.id)
    .map((id): SandboxBind => ({ path: agentDir(home, id).config, writable: false, optional: true }));
  // A PATH directory in the home (the tests' .bin of CLI links) is what the commands are given to run.
  const path = (env.PATH ?? '').split(delimiter).filter((entry) => isInside(home, entry));
  // The run's embeddings socket for memory search, in a directory of its own (connecting needs no write).
  const embeddings = env[EMBEDDINGS_SOCKET_ENV] ? [{ path: dirname(env[EMBEDDINGS_SOCKET_ENV]), writable: false, optional: true }] : [];
  // The run's memory search of this conversation in a PostgreSQL store (memory-door.ts), likewise.
  const memory = env[MEMORY_SOCKET_ENV] ? [{ path: dirname(env[MEMORY_SOCKET_ENV]), writable: false, optional: true }] : [];
  // The run's door to this agent's browser (browser/proxy.ts), likewise.
  const browser = env[BROWSER_SOCKET_ENV] ? [{ path: dirname(env[BROWSER_SOCKET_ENV]), writable: false, optional: true }] : [];
  // The run's search with the owner's key (web/search-door.ts), likewise.
  const search = env[WEB_SEARCH_SOCKET_ENV] ? [{ path: dirname(env[WEB_SEARCH_SOCKET_ENV]), writable: false, optional: true }] : [];
  // Management requests (agent init, xgw route add…): the owner's direct chat, not a heartbeat.
  const manage = manageDoor({ home, dir, outbox, ownerChat: scope.owner && scope.thread !== dir.heartbeat, env });
  return {
    bwrap: findBwrap(env),
    network: settings.network,
    limits: settings.limits && sandboxLimits(settings.limits),
    hidden: [home],
    binds: [
      ...ownBinds(dir, scope, writes),
      { path: workdir, writable: true },
      ...(writes ? [{ path: index, writable: true }] : []),
      { path: outbox, writable: true },
      ...others,
      ...manage.binds,
      { path: sharedSkillsDir(home), writable: false, optional: true },
      { path: cmdsDir(home), writable: false, optional: true },
      // web fetch's allow_private and the search provider (no secrets: a key stays in its variable).
      { path: webConfigPath(home), writable: false, optional: true },
      ...path.map((entry) => ({ path: entry, writable: false, optional: true })),
      ...embeddings,
      ...memory,
      ...browser,
      ...search,
      // TheClaw itself, read-only, wherever it is installed: under /tmp (a clone there) it would
      // be behind the sandbox's own /tmp, and the commands could not run `agent send` or `cmds`.
      { path: packageRoot(), writable: false },
    ],
    env: [...BASE_SANDBOX_ENV, ...AGENT_ENV],
    setEnv: { [OUTBOX_ENV]: outbox },
    afterCall: async () => [...(await forwardSends(home, outbox, env)), ...(await startRequestedTasks(home, outbox, env))],
    serveCall: manage.serveCall,
  };
}

/**
 * What the runtime facts say of where the commands run and what they may change there
 * (tool-policy.ts commandsFact).
 */
export function sandboxFact(settings: SandboxSettings, scope: Pick<TurnScope, 'owner' | 'ownMemory' | 'memory'>): string {
  if (settings.profile === 'none') return 'as my owner';
  const own = scope.ownMemory === null ? [] : [`this ${scope.ownMemory === scope.memory.group ? 'group' : 'person'}'s memory`];
  const workdir = scope.owner ? 'my workdir' : "this conversation's own workdir";
  const writable = settings.profile === 'workspace-only' ? [workdir] : scope.owner ? [workdir, 'my agent memory', ...own, 'my skills'] : [workdir, ...own];
  return `in a sandbox (writable: ${listed(writable)}; ${settings.network ? 'network on' : 'no network'})`;
}

/** The parts of the agent's directory a turn gets: each only where it is what it seems (a plain file or directory). */
function ownBinds(dir: AgentDir, scope: TurnScope, writes: boolean): SandboxBind[] {
  const read = (path: string): SandboxBind => ({ path, writable: false, optional: true });
  const write = (path: string): SandboxBind => ({ path, writable: true });
  const notes = (file: string) => [dailyFolder(dir.memory, file), archiveFolder(dir.memory, file)].map(read);
  const agentMemory = scope.memory.agent;
  const person = scope.memory.group ?? scope.memory.user ?? null;
  // In a thread several people's direct chats share, the sender's memory is not the thread's own: not bound.
  const own = person !== null && person === scope.ownMemory ? person : null;
  const writable = [...(writes && scope.owner ? [agentMemory] : []), ...(writes && own ? [own] : [])];
  for (const file of writable) withStoragePath(file, () => createPlainFile(file));
  const binds = [
    read(dir.config),
    read(dir.identity),
    read(dir.usage),
    writes && scope.owner ? { path: dir.skills, writable: true, optional: true } : read(dir.skills),
    writable.includes(agentMemory) ? write(agentMemory) : read(agentMemory),
    ...notes(agentMemory),
    ...(own ? [writable.includes(own) ? write(own) : read(own), ...notes(own)] : []),
    ...(scope.memory.thread ? [read(scope.memory.thread)] : []),
    read(join(dir.memory, CONVERSATIONS_DIR, scope.threadId)),
    ...(scope.thread ? [read(scope.thread)] : []),
    ...scope.files.map(read),
  ];
  // A link planted in the agent's directory (by an older version's sandbox, or a command under
  // the profile none) would bind what it points to: such a path is left out.
  return binds.filter((bind) => isPlainInside(dir.root, bind.path));
}

/**
 * Whether a file (an existing one) is one the turn's commands were shown, and so may send with
 * its answer (reply-files.ts): in its workdir or the agent's skills, its memory files, the files
 * of its message — never another conversation's thread or another person's memory.
 */
export function turnShows(dir: AgentDir, scope: TurnScope, path: string): boolean {
  const root = realpathSync(dir.root);
  const real = relative(root, realpathSync(path));
  const files = [...scope.files, scope.memory.agent, ...(scope.ownMemory ? [scope.ownMemory] : [])].map((file) => relative(dir.root, file));
  const folders = [turnWorkdir(dir, scope), dir.skills].map((folder) => relative(dir.root, folder));
  return files.includes(real) || folders.some((folder) => real.startsWith(`${folder}${sep}`));
}

/** Makes a writable folder of the turn's; one a link stands in for would bind what it points to, and is refused. */
function ownFolder(dir: AgentDir, folder: string): string {
  withStoragePath(folder, () => ensureDir(folder));
  if (!isPlainInside(dir.root, folder)) {
    throw new ClawError('invalid', `${folder} is a link, not a folder of ${dir.id}'s`, { suggestion: 'remove the link; the next turn makes the folder' });
  }
  return folder;
}

/** Creates an empty file where none is (never through a link: `wx` fails on anything there). */
function createPlainFile(file: string): void {
  ensureDir(dirname(file));
  try {
    writeFileSync(file, '', { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
  }
}

/** Whether `path` is missing or reached from `root` without a link on the way, itself included. */
function isPlainInside(root: string, path: string): boolean {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (error) {
    return errnoCode(error) === 'ENOENT' && isPlainInside(root, dirname(path));
  }
  return real === join(realpathSync(root), relative(root, path));
}

function listed(parts: string[]): string {
  return parts.length <= 1 ? parts.join('') : `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}`;
}

function isInside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return isAbsolute(path) && rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

function sandboxLimits(limits: AgentConfig['sandbox']['limits']): SandboxLimits {
  return { processes: limits.processes, memoryMb: limits.memory_mb, fileSizeMb: limits.file_size_mb, tmpMb: limits.tmp_mb, diskMb: limits.disk_mb };
}
