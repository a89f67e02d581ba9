import { cpSync, existsSync } from 'node:fs';
import { ClawError, usageError } from '../core/errors.js';
import { checkedHostName, hostName } from '../core/host.js';
import { agentRoot } from '../core/layout.js';
import { createLogger } from '../core/logger.js';
import { agentKey } from '../thread/index.js';
import { setConfigKey } from './agent-settings.js';
import { requireAgent } from './agent-dir.js';
import { stopAgent, subscribeAgent } from './lifecycle.js';
import { agentHost } from './placement.js';
import { threadStore } from './threads.js';

export interface MoveOptions {
  /** The directory is at the target already (copied by hand, with rsync): only switch. Default: false. */
  copied?: boolean;
}

export interface MoveResult {
  id: string;
  from: string;
  to: string;
  /** The agent's directory on the target host, as that host sees it. */
  directory: string;
  /** Whether the agent was started here before the move. */
  wasStarted: boolean;
  /** Whether it is started on the target: it was started here, or was copied by hand (stopped for the copy). */
  started: boolean;
}

/**
 * `agent move <id> --to <host>`, run on the host the agent is on: stops it, copies its directory
 * into the target host's home (the store's `hosts` table says where that is; the path must be
 * reachable from here, on this machine or shared storage, else the rsync command to run is the
 * error), puts its placement (and its config's `placement.host`) on the target, and starts it
 * there if it was started here or copied by hand (which stopped it for the copy). The start is
 * its subscriptions in the shared store, made from here: they run on `agent:<id>`, which now names
 * the target, so the target's notifier runs its turns; this host starts nothing on the target. The
 * directory here stays as it was, for the owner to remove.
 */
export async function moveAgent(home: string, id: string, to: string, options: MoveOptions = {}, env: NodeJS.ProcessEnv = process.env): Promise<MoveResult> {
  checkedHostName(to, 'the target host');
  const dir = requireAgent(home, id);
  const store = await threadStore(home, env);
  if (store.kind === 'sqlite') {
    throw usageError(
      `agent move needs hosts sharing a PostgreSQL store, and the threads of ${home} are its own SQLite files`,
      'set THECLAW_DATABASE_URL (or store: in config.yaml) on every host; see docs/guide/09-several-hosts.md',
    );
  }
  const here = hostName(home, env);
  const hosts = await store.placements.hosts();
  const target = hosts.find((host) => host.name === to);
  if (!target) {
    throw new ClawError('not_found', `host ${to} is not one of the hosts sharing ${store.location} (${hosts.map((host) => host.name).join(', ') || 'none yet'})`, {
      suggestion: `start notifier or xgw on that host with THECLAW_HOST=${to} (or host: ${to} in its config.yaml), then move again`,
    });
  }
  const placed = (await agentHost(store, id)) ?? here;
  if (placed !== here) throw new ClawError('conflict', `agent ${id} is placed on host ${placed}, not on this one (${here})`, { suggestion: `run agent move on ${placed}` });
  if (to === here) throw new ClawError('conflict', `agent ${id} is on host ${to} already`, { suggestion: 'nothing to move' });
  const directory = agentRoot(target.home, id);
  if (!options.copied) {
    if (!existsSync(target.home)) {
      throw new ClawError('io', `the home of host ${to} (${target.home}) cannot be reached from this host, so the directory cannot be copied from here`, {
        suggestion: `stop the agent (agent stop ${id}), copy it with: rsync -a ${dir.root}/ ${to}:${directory}/ then run: agent move ${id} --to ${to} --copied`,
      });
    }
    if (existsSync(directory))
      throw new ClawError('conflict', `${directory} exists already on host ${to}`, { suggestion: `move it aside there, or if it is this agent's copy: agent move ${id} --to ${to} --copied` });
  } else if (!existsSync(directory) && existsSync(target.home)) {
    throw new ClawError('not_found', `${directory} is not there`, { suggestion: `copy it first: rsync -a ${dir.root}/ ${to}:${directory}/` });
  }
  const wasStarted = await stopAgent(home, id, env);
  if (!options.copied) cpSync(dir.root, directory, { recursive: true, preserveTimestamps: true, errorOnExist: true, force: false });
  if (existsSync(directory)) setConfigKey(target.home, id, 'placement.host', to);
  await store.placements.assign(agentKey(id), to);
  const started = wasStarted || Boolean(options.copied);
  if (started) await subscribeAgent(home, dir, id, env);
  createLogger(dir.log).info(`moved agent ${id} to host ${to}${started ? ', started there' : ''}`);
  return { id, from: here, to, directory, wasStarted, started };
}

/** The CLI's `agent move`. */
export async function moveCommand(id: string, options: { to: string; copied?: boolean; json?: boolean }): Promise<void> {
  const { resolveHome } = await import('../core/home.js');
  const { printJson, printLines } = await import('../core/cli.js');
  const result = await moveAgent(resolveHome(), id, options.to, { copied: options.copied });
  if (options.json) return printJson(result);
  printLines([
    `moved ${id} from ${result.from} to ${result.to} (${result.directory})`,
    result.started ? `started on ${result.to}: its notifier runs the turns` : `not started (it was stopped): start it there with agent start ${id} (on ${result.to})`,
    `the directory here stays: remove it once ${id} answers from ${result.to}`,
  ]);
}
