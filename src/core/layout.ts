import { existsSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';

/**
 * The layout of `$THECLAW_HOME` in one place: every path of the home a tool keeps there, the parts
 * of an agent's directory that other tools use (its inbox, `files/`, `outbox/`), and the ids they
 * share. Two insides stay with their owners, since nothing else reaches into them: the rest of an
 * agent's directory (src/agent/agent-dir.ts) and a thread's directory (src/thread/).
 */

// --- paths written into the home

/**
 * A path as it is written into the home (the registry, subscriptions, idempotency keys, file
 * references): relative to the home when it is inside it, so that the home can be moved or copied
 * and its files still name their own parts; a path outside the home stays absolute.
 */
export function homeRef(home: string, path: string): string {
  const absolute = resolve(path);
  return isInside(home, absolute) ? relative(home, absolute) || '.' : absolute;
}

/**
 * The path a written one names in this home: a relative one is in the home. An absolute one
 * outside the home may have been written by this home at another place, before it was moved or
 * copied (older versions wrote absolute paths): its part from `agents/` or `feeds/` on names the
 * same thing here when that exists here. Any other absolute path is left as it is.
 */
export function resolveHomeRef(home: string, ref: string): string {
  if (!isAbsolute(ref)) return join(home, ref);
  if (isInside(home, ref)) return resolve(ref);
  const parts = resolve(ref).split(sep);
  for (let at = 1; at < parts.length - 1; at++) {
    if (!MOVABLE_FOLDERS.has(parts[at]!)) continue;
    const here = join(home, ...parts.slice(at));
    if (existsSync(here)) return here;
  }
  return ref;
}

/** The folders whose paths were written into the home by versions that wrote absolute ones: threads and files. */
const MOVABLE_FOLDERS = new Set(['agents', 'feeds']);

function isInside(home: string, path: string): boolean {
  const rel = relative(home, path);
  return !isAbsolute(rel) && rel !== '..' && !rel.startsWith(`..${sep}`);
}

// --- run/ and logs/: the daemons' runtime files

/** `run/`: pid files, sockets and what a daemon printed before its log was open. */
export function runDir(home: string): string {
  return join(home, 'run');
}

/** `logs/`: logs of components that are not an agent or a thread. */
export function logsDir(home: string): string {
  return join(home, 'logs');
}

/** A resident daemon of a home (core/daemon.ts runs them); its files are named after it. */
export type DaemonName = 'notifier' | 'xgw' | 'browser';

/** `run/<name>.pid`: the pid-aware lock that makes a daemon one per home. */
export function daemonPidFile(home: string, name: DaemonName): string {
  return join(runDir(home), `${name}.pid`);
}

/** `logs/<name>.log`. */
export function daemonLogFile(home: string, name: DaemonName): string {
  return join(logsDir(home), `${name}.log`);
}

/** `run/<name>.stderr`: what a daemon printed before its log was open. */
export function daemonStderrFile(home: string, name: DaemonName): string {
  return join(runDir(home), `${name}.stderr`);
}

/** `run/<name>.sock`, where a daemon's control socket lives unless the path is too long (home.ts socketPath). */
export function daemonSocketFile(home: string, name: DaemonName): string {
  return join(runDir(home), `${name}.sock`);
}

/** `run/theclaw.lock`: taken by `theclaw up` and `down`, one at a time. */
export function upLockPath(home: string): string {
  return join(runDir(home), 'theclaw.lock');
}

/** `run/notifier-output/`: output files of handler, timer and runner processes. */
export function notifierOutputDir(home: string): string {
  return join(runDir(home), 'notifier-output');
}

// --- the tools' configs and stores

/** `config.yaml` at the top of the home: the whole system's settings (`store:`, the thread store; `host:`, this host's name). */
export function homeConfigPath(home: string): string {
  return join(home, 'config.yaml');
}

/** `notifier/config.yaml`. */
export function notifierConfigPath(home: string): string {
  return join(home, 'notifier', 'config.yaml');
}

/** `notifier/timers.db`. */
export function timersPath(home: string): string {
  return join(home, 'notifier', 'timers.db');
}

/** `notifier/threads/`: the registry of threads with subscriptions, written by the thread library, read by notifier. */
export function registryDir(home: string): string {
  return join(home, 'notifier', 'threads');
}

/** `xgw/config.yaml`. */
export function xgwConfigPath(home: string): string {
  return join(home, 'xgw', 'config.yaml');
}

/** `xgw/state.db`: pairing, admitted peers, delivery keys, mailboxes. */
export function xgwStatePath(home: string): string {
  return join(home, 'xgw', 'state.db');
}

/** `xgw/webchat-<instance>.token`: a web chat's access token. */
export function webchatTokenFile(home: string, instance: string): string {
  return join(home, 'xgw', `webchat-${instance}.token`);
}

/** `xgw/webchat-<instance>.peer-key`: the key a web chat signs the peer ids it issues with. */
export function webchatPeerKeyFile(home: string, instance: string): string {
  return join(home, 'xgw', `webchat-${instance}.peer-key`);
}

/** `pai/config.yaml`. */
export function paiConfigPath(home: string): string {
  return join(home, 'pai', 'config.yaml');
}

/** Keys pai set aside after a refusal or a rate limit, and until when (src/pai/key-ring.ts). */
export function keyCooldownsPath(home: string): string {
  return join(home, 'pai', 'key-cooldowns.json');
}

/** `cmds/`: cmds' caches, readable in an agent's sandbox. */
export function cmdsDir(home: string): string {
  return join(home, 'cmds');
}

/** `cmds/path-index.json`: the descriptions of the executables on PATH. */
export function pathIndexPath(home: string): string {
  return join(cmdsDir(home), 'path-index.json');
}

/** `web/config.yaml`: the web tool's config (allowed private hosts, the search provider); no secrets, readable in a sandbox. */
export function webConfigPath(home: string): string {
  return join(home, 'web', 'config.yaml');
}

/** `web/cache/`: `web fetch`'s cache outside a turn (a turn's is in its agent's workdir). */
export function webCacheDir(home: string): string {
  return join(home, 'web', 'cache');
}

/** `skills/`: the skills every agent shares (written by the user only). */
export function sharedSkillsDir(home: string): string {
  return join(home, 'skills');
}

/** `<maintainer|warden>/incidents.db`: a system agent's sweep's incidents (theclaw/feed-sweep.ts). */
export function incidentsPath(home: string, sweeper: 'maintainer' | 'warden'): string {
  return join(home, sweeper, 'incidents.db');
}

/** `evolver/state.json`: until when the evolver's daily reflection has read. */
export function evolverStatePath(home: string): string {
  return join(home, 'evolver', 'state.json');
}

/**
 * `deliveries/`: what `agent deliver` keeps on a host that delivers the replies of an agent whose
 * directory is on another host (a shared store): `state.db` (its attempts and given-up replies)
 * and `files/` (its replies' files, read from the store for the gateway here).
 */
export function deliveriesDir(home: string): string {
  return join(home, 'deliveries');
}

/** `logs/deliver.log`: the log of those deliveries. */
export function deliveriesLogFile(home: string): string {
  return join(logsDir(home), 'deliver.log');
}

/** `secrets.env`: provider keys and bot tokens (core/secrets-file.ts), 0600, never in a YAML file. */
export function secretsEnvPath(home: string): string {
  return join(home, 'secrets.env');
}

// --- agents/ and feeds/

/** Where the agents live: `agents/<id>/`. */
export function agentsRoot(home: string): string {
  return join(home, 'agents');
}

/** An agent's directory, `agents/<id>/`. */
export function agentRoot(home: string, agentId: string): string {
  return join(agentsRoot(home), agentId);
}

/** An agent's inbox thread, which xgw and `agent send` push messages into. */
export function agentInboxPath(home: string, agentId: string): string {
  return join(agentRoot(home, agentId), 'inbox');
}

/** The agent a path in the home belongs to (`agents/<id>/…`), or null. */
export function agentOfPath(home: string, path: string): string | null {
  const parts = relative(home, path).split(sep);
  return parts[0] === 'agents' && parts[1] ? parts[1] : null;
}

/** The inbox's consumer that `agent run` reads with; unsubscribed while the agent is stopped. */
export const INBOX_CONSUMER = 'inbox';

/** Where xgw stores the files people send an agent, named by their SHA-256: `agents/<id>/files/`. */
export const AGENT_FILES_DIR = 'files';

/** Where the commands of an agent's turn leave requests for the runtime: `agents/<id>/outbox/<conversation>/` (src/core/turn-outbox.ts). */
export const AGENT_OUTBOX_DIR = 'outbox';

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
