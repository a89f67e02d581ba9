import { printJson, printLines } from '../core/cli.js';
import { configChangedSince } from '../core/config.js';
import { stopDaemonProcess } from '../core/daemon.js';
import { daemonLogFile, xgwConfigPath } from '../core/layout.js';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { relayInTurn } from '../core/manage-requests.js';
import { runTerminalChat } from './chat-client.js';
import { askXgw } from './client.js';
import { describeReload, gatewayStatus, reloadGateway, startGateway } from './control.js';
import { configError, describeFindings, inspectXgwConfig, isFailure, xgwCheckEnvironment } from './config.js';
import { runXgw } from './daemon.js';
import type { SendRequest } from './delivery.js';
import { addChannel, addRoute, removeChannel, removeRoute, type ChannelSettings, type EditResult } from './config-edit.js';
import { agentExists, requireAgentId } from './route.js';
import type { ChannelConfig, Route, XgwConfig } from './types.js';
import type { SendResult, XgwStatus } from './protocol.js';
import { approvePairing, withState } from './pairing.js';
import { MAX_PENDING_PAIRINGS, PAIRING_TTL_WHEN_FULL_MS, type PairingRequest } from './state.js';

interface Json {
  json?: boolean;
}

/** A delivery may split into several messages, each with its own round trip. */
const SEND_TIMEOUT_MS = 60_000;

export async function start(options: Json & { foreground?: boolean }): Promise<void> {
  const home = resolveHome();
  if (options.foreground) {
    await runXgw(home);
    process.exit(0); // channels' sockets must not keep a stopped daemon alive
  }
  const status = await startGateway(home);
  if (options.json) return printJson(status);
  printLines([`xgw started (pid ${status.pid}); log: ${daemonLogFile(home, 'xgw')}`, ...formatChannels(status)]);
}

export async function stop(options: Json): Promise<void> {
  const wasRunning = await stopDaemonProcess(resolveHome(), 'xgw');
  if (options.json) printJson({ running: false, was_running: wasRunning });
  else printLines([wasRunning ? 'xgw stopped' : 'xgw is not running']);
}

export async function status(options: Json): Promise<void> {
  const home = resolveHome();
  const status = await gatewayStatus(home);
  if (options.json) return printJson(status);
  printLines([
    status.running ? `xgw running (pid ${status.pid}, up ${status.uptime_seconds}s)` : 'xgw is not running',
    ...(configChangedSince(xgwConfigPath(home), status.config_sha256) ? [`${xgwConfigPath(home)} changed since xgw loaded it - apply it with: xgw reload`] : []),
    ...formatChannels(status),
    ...(status.pending_pairings ? [`${status.pending_pairings} pairing request(s) waiting: xgw pair list`] : []),
    ...(status.pending_pairings ? fullPairingWarnings(withState(home, (state) => state.pendingPairings())) : []),
  ]);
}

/** The owner's notice that strangers may be holding every pairing slot of a channel. */
function fullPairingWarnings(pending: PairingRequest[]): string[] {
  const perChannel = new Map<string, number>();
  for (const request of pending) perChannel.set(request.channel_id, (perChannel.get(request.channel_id) ?? 0) + 1);
  return [...perChannel]
    .filter(([, count]) => count >= MAX_PENDING_PAIRINGS)
    .map(
      ([channel]) =>
        `warning: all ${MAX_PENDING_PAIRINGS} pairing slots of ${channel} are taken; new peers get no code until one older than ${PAIRING_TTL_WHEN_FULL_MS / 60_000} min gives way (strangers: xgw peer revoke ${channel} <peer>)`,
    );
}

function formatChannels(status: XgwStatus): string[] {
  return status.channels.map((c) => `  ${c.id}: ${c.state}${c.detail ? ` (${c.detail})` : ''}${c.url ? `  ${c.url}` : ''}`);
}

export async function reload(options: Json): Promise<void> {
  const result = await reloadGateway(resolveHome());
  if (options.json) return printJson(result);
  printLines([...describeReload(result), ...describeFindings(result.warnings)]);
}

/**
 * The verdict `theclaw doctor` gives too (inspectXgwConfig): a failure exits 1 with the error a
 * start or a reload gives; warnings are printed either way. With --json, one document either way.
 */
export function configCheck(options: Json): void {
  const home = resolveHome();
  const report = inspectXgwConfig(home, { environment: xgwCheckEnvironment(home, process.env) });
  const { config } = report;
  if (options.json) {
    printJson({ ok: config !== undefined, file: report.file, ...(config && { channels: config.channels.length, routes: config.routes.length }), findings: report.findings });
    if (!config) process.exitCode = 1; // the document says why; a second one would break readers
    return;
  }
  const warnings = describeFindings(report.findings.filter((finding) => !isFailure(finding)));
  if (!config) {
    printLines(warnings);
    throw configError(report);
  }
  printLines([`${report.file} is valid: ${config.channels.length} channel(s), ${config.routes.length} route(s)`, ...warnings]);
}

interface EditFlags extends Json {
  /** false with --no-reload. */
  reload?: boolean;
}

export async function channelAdd(id: string, options: EditFlags & ChannelSettings): Promise<void> {
  const result = await addChannel(resolveHome(), id, options, { noReload: options.reload === false });
  printEdit(result, options, `added channel ${id} to ${result.file}`);
}

export async function channelRemove(id: string, options: EditFlags): Promise<void> {
  const result = await removeChannel(resolveHome(), id, { noReload: options.reload === false });
  printEdit(result, options, `removed channel ${id} from ${result.file}`);
}

export async function routeAdd(options: EditFlags & Route): Promise<void> {
  // In a sandboxed turn the runtime does it (core/manage-requests.ts).
  if (await relayInTurn({ action: 'route_add', channel: options.channel, peer: options.peer, agent: options.agent, no_reload: options.reload === false || undefined, json: options.json })) return;
  const result = await addRoute(resolveHome(), { channel: options.channel, peer: options.peer, agent: requireAgentId(options.agent) }, { noReload: options.reload === false });
  printEdit(result, options, `added the route of channel ${options.channel} and peer ${options.peer} to ${options.agent} in ${result.file}`);
}

export async function routeRemove(options: EditFlags & Pick<Route, 'channel' | 'peer'>): Promise<void> {
  if (await relayInTurn({ action: 'route_remove', channel: options.channel, peer: options.peer, no_reload: options.reload === false || undefined, json: options.json })) return;
  const result = await removeRoute(resolveHome(), { channel: options.channel, peer: options.peer }, { noReload: options.reload === false });
  const agents = result.entries.map((entry) => (entry as Route).agent).join(', ');
  printEdit(result, options, `removed the route of channel ${options.channel} and peer ${options.peer} (to ${agents}) from ${result.file}`);
}

function printEdit(result: EditResult, options: Json, done: string): void {
  if (options.json) {
    printJson(result);
    return;
  }
  const { applied } = result;
  printLines([
    done,
    ...('reloaded' in applied
      ? describeReload(applied.reloaded)
      : [applied.not_applied === 'not_running' ? 'xgw is not running: it reads the file when it starts' : 'not applied yet (--no-reload): apply it with xgw reload']),
    ...describeFindings(result.findings),
  ]);
}

/** The configured channels as the file has them (the schema's defaults filled in). */
function configuredXgw(home: string): XgwConfig {
  const report = inspectXgwConfig(home);
  if (!report.config) throw configError(report);
  return report.config;
}

export function channelList(options: Json): void {
  const home = resolveHome();
  const { channels } = configuredXgw(home);
  if (options.json) printJson(channels);
  else if (channels.length === 0) printLines([`no channel is configured in ${xgwConfigPath(home)}: add one with xgw channel add`]);
  else printLines(formatChannelList(channels));
}

function formatChannelList(channels: ChannelConfig[]): string[] {
  const width = Math.max(...channels.map((channel) => channel.id.length));
  return channels.map((channel) => {
    const where =
      channel.type === 'webchat'
        ? `${channel.host}:${channel.port === 0 ? 'any free port' : channel.port}`
        : channel.type === 'email'
          ? `${channel.address} via ${channel.imap.host}, password in ${channel.password_env}`
          : 'token_env' in channel
            ? `token in ${channel.token_env}`
            : 'this machine';
    return `${channel.id.padEnd(width)}  access ${channel.access.padEnd(9)} ${where}${channel.allow.length ? `  allow ${channel.allow.join(', ')}` : ''}`;
  });
}

export function routeList(options: Json): void {
  const home = resolveHome();
  const routes = configuredXgw(home).routes.map((route) => ({ ...route, agent_exists: agentExists(home, route.agent) }));
  if (options.json) printJson(routes);
  else if (routes.length === 0) printLines([`no route is configured in ${xgwConfigPath(home)}: messages get no agent (add one with xgw route add)`]);
  else printLines(routes.map((route) => `channel ${route.channel}  peer ${route.peer}  -> ${route.agent}${route.agent_exists ? '' : ' (no such agent: agent init creates it)'}`));
}

/** `xgw send`'s flags: the gateway's request, with the text optional (stdin otherwise). */
export interface SendFlags extends Json, Omit<SendRequest, 'text'> {
  text?: string;
}

export async function send(options: SendFlags): Promise<void> {
  const text = options.text ?? (await readStdin());
  if (text.trim() === '') throw usageError('the text is empty', 'pass --text TEXT or the text on stdin');
  const home = resolveHome();
  const result = await askXgw<SendResult>(
    home,
    {
      op: 'send',
      channel: options.channel,
      peer: options.peer,
      conversation_type: options.conversationType,
      conversation: options.conversation,
      reply_to: options.replyTo,
      idempotency_key: options.idempotencyKey,
      text,
    },
    SEND_TIMEOUT_MS,
  );
  if (options.json) printJson(result);
  else printLines([`${result.status} (${result.message_ids.join(', ')})`]);
}

export function pairList(options: Json): void {
  const pending = withState(resolveHome(), (state) => state.pendingPairings());
  if (options.json) printJson(pending);
  else
    printLines(
      pending.length === 0
        ? ['no pairing requests are waiting']
        : [...pending.map((p) => `${p.code}  ${p.channel_id}  peer ${p.peer_id}${p.peer_name ? ` (${p.peer_name})` : ''}  expires ${p.expires_at}`), ...fullPairingWarnings(pending)],
    );
}

export async function pairApprove(code: string, options: Json): Promise<void> {
  if (await relayInTurn({ action: 'pair_approve', code, json: options.json })) return;
  const { request: approved, welcomed } = await approvePairing(resolveHome(), code);
  if (options.json) return printJson({ approved: true, channel_id: approved.channel_id, peer_id: approved.peer_id, welcomed });
  printLines([
    `approved ${approved.peer_id} on ${approved.channel_id}; ${welcomed ? 'they were told, and their first message passed on' : 'they will be told, and their first message passed on, when xgw starts'}`,
  ]);
}

export function peerList(options: Json): void {
  const peers = withState(resolveHome(), (state) => state.admittedPeers());
  if (options.json) printJson(peers);
  else
    printLines(
      peers.length === 0 ? ['no peers were admitted by pairing (allowlisted ones are in the config)'] : peers.map((p) => `${p.channel_id}  peer ${p.peer_id}  admitted ${p.admitted_at} via ${p.via}`),
    );
}

export function peerRevoke(channel: string, peer: string, options: Json): void {
  const home = resolveHome();
  if (!withState(home, (state) => state.revoke(channel, peer))) {
    throw new ClawError('not_found', `${peer} is neither admitted nor waiting on ${channel}`, { suggestion: 'see the admitted peers with: xgw peer list' });
  }
  const listed =
    inspectXgwConfig(home)
      .config?.channels.find((c) => c.id === channel)
      ?.allow.includes(peer) ?? false;
  if (options.json) printJson({ revoked: true, channel_id: channel, peer_id: peer, still_allowed_by_config: listed });
  else printLines([`revoked ${peer} on ${channel}`, ...(listed ? [`warning: ${peer} is still in the allow list of ${channel} in ${xgwConfigPath(home)}: remove it there too`] : [])]);
}

export async function chat(options: { agent?: string; channel?: string }): Promise<void> {
  await runTerminalChat({ home: resolveHome(), agent: options.agent, channel: options.channel });
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw usageError('no text', 'pass --text TEXT or the text on stdin');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
