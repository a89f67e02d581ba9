import { existsSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { agentDir, listAgentIds } from '../agent/agent-dir.js';
import { SYSTEM_AGENTS } from '../agent/identity.js';
import { initAgent, startAgent } from '../agent/lifecycle.js';
import { agentPlacement, claimPlacement, resendGivenUp, type ResentReply } from '../agent/index.js';
import { hostName } from '../core/host.js';
import { daemonEnvironment, daemonHolder, stopDaemonProcess, type DaemonName } from '../core/daemon.js';
import { ensureDir } from '../core/home.js';
import { runDir, upLockPath, xgwConfigPath } from '../core/layout.js';
import { repairPermissions } from '../core/private-home.js';
import { withStoredSecrets } from '../core/secrets-file.js';
import { waitForLock, type Lock } from '../core/lock.js';
import { ClawError, isClawError } from '../core/errors.js';
import { wakeNotifier } from '../thread/index.js';
import { loadConfig as loadNotifierConfig } from '../notifier/config.js';
import { daemonStatus, listTimers, reloadNotifier, startDaemon, subscribedThread } from '../notifier/control.js';
import type { NotifierReloadResult } from '../notifier/index.js';
import { registerSystemTimers } from './system-timers.js';
import { chooseModel, loadPaiConfig, MOCK_PROVIDER } from '../pai/models.js';
import { DEFAULT_XGW_CONFIG, loadXgwConfig } from '../xgw/config.js';
import { gatewayStatus, reloadGateway, startGateway } from '../xgw/control.js';
import type { XgwReloadResult, XgwStatus } from '../xgw/index.js';
import { changedConfigs, type ChangedConfig } from './config-changes.js';
import { talkTo, type TalkTo } from './up-summary.js';

/** The model agents get when their config names none, and whether it is the offline mock. */
export interface ModelChoice {
  provider: string;
  model: string | null;
  offline: boolean;
  /** Why pai's config could not say (status shows the rest of the system all the same). */
  problem?: string;
}

/** What pai's default is for processes started with `env`. */
export function defaultModel(home: string, env: NodeJS.ProcessEnv): ModelChoice {
  const { provider, model } = chooseModel(loadPaiConfig(home), {}, env);
  return { provider, model: model ?? null, offline: provider === MOCK_PROVIDER };
}

/**
 * The environment agents' runs get: notifier starts them with its own, so while it runs, the
 * keys it was started with count, not this shell's.
 */
export function agentsEnvironment(home: string, shellEnv: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return daemonEnvironment(home, 'notifier', shellEnv).env;
}

/** The model the agents' runs actually get (see agentsEnvironment). */
export function agentsModel(home: string, shellEnv: NodeJS.ProcessEnv): ModelChoice {
  return defaultModel(home, agentsEnvironment(home, shellEnv));
}

/** The model this shell's keys would give, when it is not `agents` (notifier was started with other keys). */
export function shellModel(home: string, shellEnv: NodeJS.ProcessEnv, agents: ModelChoice): ModelChoice | undefined {
  const shell = defaultModel(home, shellEnv);
  return shell.provider !== agents.provider || shell.model !== agents.model ? shell : undefined;
}

export const OFFLINE_NOTICE =
  'no provider key found: agents answer with the offline mock model (canned replies) - run theclaw setup to choose a provider and store its key (or set OPENAI_API_KEY or ANTHROPIC_API_KEY, or describe a server in $THECLAW_HOME/pai/config.yaml), then theclaw down && theclaw up';

export interface UpResult {
  home: string;
  /** Daemons this call started; the others were running already. */
  started: DaemonName[];
  /** System agents this call created. */
  created: string[];
  /** Paths under the home that others could read or enter, made private by this call. */
  repaired: string[];
  /** Every agent of the home: the system's, then the others. */
  agents: string[];
  /** System agents that run on another host sharing the store (id → host), left alone here. */
  elsewhere: Record<string, string>;
  /** Where to talk to whom (see up-summary.ts). */
  talk: TalkTo[];
  notifier: { pid: number };
  xgw: XgwStatus;
  /** The model the agents get (see agentsModel). */
  model: ModelChoice;
  /** The model this shell's environment would give, when it differs (notifier was started with another). */
  shell_model?: ModelChoice;
  /** Heartbeat timers this call set again from the agents' configs, or removed. */
  heartbeats: { set: string[]; removed: string[]; problems: string[] };
  /** Daemons that were running already with a config file changed since: `theclaw reload` applies it. */
  config_changed: ChangedConfig[];
}

/**
 * Where the system agents run on a store shared by hosts: each where it is placed, the others with
 * admin, which the first `up` places before it makes any directory. So of two hosts' first ups at
 * once, one makes and starts them all, and the other leaves them to it (each claiming its own would
 * split them, or fail the loser's start). On SQLite all are here.
 */
async function placeSystemAgents(home: string, env: NodeJS.ProcessEnv): Promise<{ here: string[]; elsewhere: Record<string, string> }> {
  const thisHost = hostName(home, env);
  const admin = existsSync(agentDir(home, 'admin').config) ? ((await agentPlacement(home, 'admin', env)) ?? thisHost) : await claimPlacement(home, 'admin', env);
  const here: string[] = [];
  const elsewhere: Record<string, string> = {};
  for (const id of Object.keys(SYSTEM_AGENTS)) {
    const host = id === 'admin' ? admin : ((await agentPlacement(home, id, env)) ?? admin);
    if (host === thisHost) here.push(id);
    else elsewhere[id] = host;
  }
  return { here, elsewhere };
}

/**
 * `theclaw up`: every config is checked before anything starts, so a mistake is reported whole
 * rather than as a half-started system. Then the system agents that are missing are created and
 * all of them started (subscribing is idempotent), and the two daemons are started side by side;
 * if one of them fails, the other is stopped again when this call started it. Daemons get `env`
 * and secrets.env, so the provider keys of this shell and of that file reach the agents' runs.
 */
export async function up(home: string, shellEnv: NodeJS.ProcessEnv = process.env): Promise<UpResult> {
  ensureDir(home);
  // The keys of secrets.env count as the shell's: the daemons started get them too.
  const env = withStoredSecrets(home, shellEnv);
  const repaired = repairPermissions(home);
  // Two `up`s at once would each start a daemon, one of them fail on the other's, and stop what
  // it had started while the other says "up": they take turns instead.
  const lock = await takeTurn(home);
  try {
    return { ...(await upLocked(home, env)), repaired };
  } finally {
    lock.release();
  }
}

async function upLocked(home: string, env: NodeJS.ProcessEnv): Promise<Omit<UpResult, 'repaired'>> {
  if (!existsSync(xgwConfigPath(home))) {
    ensureDir(dirname(xgwConfigPath(home)));
    writeFileSync(xgwConfigPath(home), DEFAULT_XGW_CONFIG, { flag: 'wx' });
  }
  const xgwConfig = loadXgwConfig(home);
  loadNotifierConfig(home);
  loadPaiConfig(home);

  const { here: systemAgents, elsewhere } = await placeSystemAgents(home, env);
  const created = systemAgents.filter((id) => !existsSync(agentDir(home, id).config));
  for (const id of created) await initAgent(home, id, {}, env);
  for (const id of systemAgents) await startAgent(home, id, env);

  const started: DaemonName[] = [];
  const [notifier, xgw] = await Promise.allSettled([
    daemonHolder(home, 'notifier') ??
      startDaemon(home, env).then((result) => {
        started.push('notifier');
        return result;
      }),
    daemonHolder(home, 'xgw')
      ? gatewayStatus(home)
      : startGateway(home, env).then((status) => {
          started.push('xgw');
          return status;
        }),
  ]);
  // The web chat is where the owner talks to the system: "up" without it (its port taken) is not up.
  const webchat = xgw.status === 'fulfilled' ? xgw.value.channels.find((channel) => channel.type === 'webchat' && channel.state === 'error') : undefined;
  if (notifier.status === 'rejected' || xgw.status === 'rejected' || webchat) {
    await Promise.all(started.map((name) => stopDaemonProcess(home, name)));
    if (notifier.status === 'rejected') throw notifier.reason;
    if (xgw.status === 'rejected') throw xgw.reason;
    throw new ClawError('conflict', webchat!.problem?.message ?? `${webchat!.id} did not start: ${webchat!.detail}`, {
      suggestion: webchat!.problem?.fix ?? 'see: xgw config check and theclaw doctor',
    });
  }
  await registerSystemTimers(home);
  const heartbeats = await registerHeartbeats(home, env);
  const model = agentsModel(home, env);
  const shell_model = shellModel(home, env, model);
  // A daemon started now has just loaded its file; one running already may run an older one.
  const notifierStatus = started.includes('notifier') ? null : await daemonStatus(home).catch(() => null);
  const config_changed = changedConfigs(home, notifierStatus, xgw.value);
  // A system agent of another host whose directory is still here (`agent move` leaves it) is not this host's.
  const agents = [...systemAgents, ...listAgentIds(home).filter((id) => !systemAgents.includes(id) && !(id in elsewhere))];
  return {
    home,
    started,
    created,
    agents,
    elsewhere,
    talk: talkTo(xgw.value, xgwConfig.channels, agents),
    notifier: { pid: notifier.value.pid! },
    xgw: xgw.value,
    model,
    heartbeats,
    ...(shell_model ? { shell_model } : {}),
    config_changed,
  };
}

/**
 * Every agent's heartbeat timer as its config says (agent/heartbeat-setup.ts): set when missing
 * or different, removed when its heartbeat is gone. What goes wrong does not undo `up`: it is said.
 */
async function registerHeartbeats(home: string, env: NodeJS.ProcessEnv): Promise<UpResult['heartbeats']> {
  const { syncAllHeartbeatTimers } = await import('../agent/index.js');
  try {
    return await syncAllHeartbeatTimers(home, env, listTimers(home));
  } catch (error) {
    return { set: [], removed: [], problems: [(error as Error).message] };
  }
}

/** A subscription `theclaw retry` woke: it was waiting out a backoff after failing. */
export interface WokenSubscription {
  /** The thread, relative to THECLAW_HOME. */
  thread: string;
  consumer: string;
  failures: number;
  last_error: string | null;
}

export interface RetryResult {
  woken: WokenSubscription[];
  /** Replies delivery had given up on (`deliver.max_attempts`), sent again now. */
  resent: ResentReply[];
}

/**
 * `theclaw retry`: every handler waiting out a backoff (messages waiting for the model, replies
 * waiting for a channel) runs now instead of when its backoff ends, which after a long outage is
 * minutes away. Failure counts stay, so a handler that fails again backs off further. Replies
 * delivery gave up on are sent again (the maintainer tells the owner of them, naming this).
 */
export async function retry(home: string): Promise<RetryResult> {
  if (!daemonHolder(home, 'notifier')) throw new ClawError('conflict', 'notifier is not running, so nothing is retried', { suggestion: 'theclaw up starts it, and it runs what waits' });
  const { subscriptions } = await daemonStatus(home);
  await wakeNotifier(home);
  const woken = subscriptions
    .filter((sub) => sub.retry_at !== null)
    .map((sub) => ({ thread: subscribedThread(home, sub), consumer: sub.consumer, failures: sub.failures, last_error: sub.last_error }));
  return { woken, resent: await resendGivenUp(home) };
}

/** What `theclaw reload` did with one daemon. */
export type ReloadOutcome =
  | { daemon: 'notifier'; state: 'reloaded'; result: NotifierReloadResult }
  | { daemon: 'xgw'; state: 'reloaded'; result: XgwReloadResult }
  /** It reads its config when it starts. */
  | { daemon: DaemonName; state: 'not_running' }
  /** Its config has a problem: the daemon runs on with the config it had. */
  | { daemon: DaemonName; state: 'refused'; error: string; suggestion?: string };

/**
 * `theclaw reload`: each running daemon applies its config file again, without a restart and
 * without dropping what it holds (see xgw's and notifier's `reload`). One whose config has a
 * problem refuses it and runs on as it was; the other is reloaded all the same.
 */
export async function reload(home: string): Promise<ReloadOutcome[]> {
  const lock = await takeTurn(home);
  try {
    return await Promise.all([
      reloadOne(home, 'notifier', async () => ({ daemon: 'notifier', state: 'reloaded', result: await reloadNotifier(home) })),
      reloadOne(home, 'xgw', async () => ({ daemon: 'xgw', state: 'reloaded', result: await reloadGateway(home) })),
    ]);
  } finally {
    lock.release();
  }
}

async function reloadOne(home: string, daemon: DaemonName, reload: () => Promise<ReloadOutcome>): Promise<ReloadOutcome> {
  if (!daemonHolder(home, daemon)) return { daemon, state: 'not_running' };
  try {
    return await reload();
  } catch (error) {
    if (!isClawError(error, 'invalid')) throw error;
    return { daemon, state: 'refused', error: error.message, ...(error.suggestion && { suggestion: error.suggestion }) };
  }
}

/**
 * `theclaw down`: stops the daemons, notifier first, so that the deliveries it started finish
 * against a gateway that still answers, then the browser service (its browsers with it), which
 * agents' turns started. Agents stay started: their messages wait for the next `up`.
 */
export async function down(home: string): Promise<DaemonName[]> {
  const lock = await takeTurn(home);
  try {
    const stopped: DaemonName[] = [];
    for (const name of ['notifier', 'xgw', 'browser'] as const) if (await stopDaemonProcess(home, name)) stopped.push(name);
    return stopped;
  } finally {
    lock.release();
  }
}

/** `up` and `down` one at a time per home. */
function takeTurn(home: string): Promise<Lock> {
  ensureDir(runDir(home));
  return waitForLock(upLockPath(home), 'another theclaw up or down', 60_000);
}
