import { daemonHolder, startDaemonProcess } from '../core/daemon.js';
import { withStoredSecrets } from '../core/secrets-file.js';
import { readWebchatToken, webchatUrl } from './channels/webchat-token.js';
import { askXgw } from './client.js';
import { loadXgwConfig, loadXgwConfigFile, xgwCheckEnvironment } from './config.js';
import type { XgwReloadResult, XgwStatus } from './protocol.js';
import { GatewayState } from './state.js';

/** How long starting waits for the channels' first start attempts (each is capped at 5 s). */
const START_WAIT_MS = 8_000;

/**
 * Starts the gateway daemon and returns its status once every channel has made its first start
 * attempt, so that what is printed (a web chat URL, a channel that failed) is already true.
 */
export async function startGateway(home: string, shellEnv: NodeJS.ProcessEnv = process.env): Promise<XgwStatus> {
  const env = withStoredSecrets(home, shellEnv); // the bot tokens of secrets.env
  loadXgwConfigFile(home, { environment: xgwCheckEnvironment(home, env) }); // precise config errors here (those of xgw config check), not in a log
  await startDaemonProcess(home, 'xgw', env);
  // The socket answers before channels are up: wait for their first start attempts.
  return askXgw<XgwStatus>(home, { op: 'status', wait_ms: START_WAIT_MS }, START_WAIT_MS + 5_000);
}

/** The running gateway's status, or what the config and stored state say when it is not running. */
export async function gatewayStatus(home: string): Promise<XgwStatus> {
  try {
    return await askXgw<XgwStatus>(home, { op: 'status' });
  } catch (error) {
    if (daemonHolder(home, 'xgw')) throw error; // running, but not answering
    return offlineStatus(home);
  }
}

function offlineStatus(home: string): XgwStatus {
  const config = loadXgwConfig(home);
  const state = new GatewayState(home);
  try {
    return {
      running: false,
      pid: null,
      started_at: null,
      uptime_seconds: null,
      channels: config.channels.map((channel) => {
        // A web chat on port 0 gets its port when it starts: there is no URL to show before.
        const token = channel.type === 'webchat' && channel.port !== 0 ? readWebchatToken(home, channel.id) : undefined;
        const url = token && channel.type === 'webchat' ? webchatUrl(channel.host, channel.port, token) : undefined;
        return { id: channel.id, type: channel.type, state: 'stopped' as const, ...(url ? { url } : {}) };
      }),
      routes: config.routes,
      pending_pairings: state.pendingPairings().length,
      config_sha256: null,
    };
  } finally {
    state.close();
  }
}

/** A reload waits for the deliveries under way (5 s at most) and the started channels' first attempts (10 s at most). */
const RELOAD_TIMEOUT_MS = 30_000;

/** Asks the running gateway to apply its config file again (see Gateway.reconfigure). */
export function reloadGateway(home: string): Promise<XgwReloadResult> {
  return askXgw<XgwReloadResult>(home, { op: 'reload' }, RELOAD_TIMEOUT_MS);
}

/** What a reload did, for a person: each kind of change, and the states of the channels it started (its warnings: describeFindings). */
export function describeReload(result: XgwReloadResult): string[] {
  const changes = [
    ...(result.started.length ? [`started ${result.started.join(', ')}`] : []),
    ...(result.restarted.length ? [`restarted ${result.restarted.join(', ')} (settings changed)`] : []),
    ...(result.stopped.length ? [`stopped ${result.stopped.join(', ')}`] : []),
    ...(result.updated.length ? [`applied allow/rate_limit of ${result.updated.join(', ')}`] : []),
    ...(result.routes ? ['applied the routes'] : []),
  ];
  const launched = new Set([...result.started, ...result.restarted]);
  return [
    `xgw reloaded ${result.file}: ${changes.join('; ') || 'nothing changed'}`,
    ...result.channels.filter((c) => launched.has(c.id)).map((c) => `  ${c.id}: ${c.state}${c.detail ? ` (${c.detail})` : ''}${c.url ? `  ${c.url}` : ''}`),
  ];
}
