import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Document, YAMLSeq } from 'yaml';
import { configDocumentText, parseConfigDocument, readConfigText, writeFileAtomically, yaml } from '../core/config.js';
import { daemonHolder } from '../core/daemon.js';
import { ClawError, isClawError, usageError } from '../core/errors.js';
import { joinCommand } from '../core/command.js';
import { ensureDir } from '../core/home.js';
import { runDir, xgwConfigPath } from '../core/layout.js';
import { waitForLock } from '../core/lock.js';
import { configError, DEFAULT_XGW_CONFIG, inspectXgwConfig, xgwCheckEnvironment, type ConfigFinding } from './config.js';
import { reloadGateway } from './control.js';
import type { XgwReloadResult } from './protocol.js';
import { splitChannelId, type ChannelConfig, type Route } from './types.js';

/**
 * `xgw channel add|remove` and `xgw route add|remove`: edits of `xgw/config.yaml` that keep the
 * owner's comments and order (yaml's Document API), checked whole before they are written
 * (atomically, 0600) and applied by a reload of the running gateway. A change the gateway refuses
 * (a bot token variable its environment lacks) is taken back, so the file never holds a change
 * that is neither applied nor asked for; `noReload` writes without applying.
 */

/** The settings of a new channel that flags give; the rest take the schema's defaults. */
export interface ChannelSettings {
  access?: string;
  allow?: string[];
  port?: number;
  host?: string;
  tokenEnv?: string;
  appTokenEnv?: string;
  apiRoot?: string;
}

export interface EditOptions {
  /** Write the file, but leave the running gateway as it is (`xgw reload` applies it later). */
  noReload?: boolean;
  /** The environment the new config's token variables are checked in (for its findings). */
  env?: NodeJS.ProcessEnv;
}

/** What an edit did. */
export interface EditResult {
  file: string;
  /** What was added or removed, as it stands in the file. */
  entries: unknown[];
  /** The running gateway's reload, or why there was none. */
  applied: { reloaded: XgwReloadResult } | { not_applied: 'not_running' | 'no_reload' };
  /** What the new config's check finds (the warnings of xgw config check; a token variable not set). */
  findings: ConfigFinding[];
}

/** The entry `xgw channel add` writes: the id, its type (the id's prefix), then the settings given. */
export function channelEntry(id: string, settings: ChannelSettings): Record<string, unknown> {
  const flags: [string, unknown][] = [
    ['access', settings.access],
    ['allow', settings.allow],
    ['port', settings.port],
    ['host', settings.host],
    ['token_env', settings.tokenEnv],
    ['app_token_env', settings.appTokenEnv],
    ['api_root', settings.apiRoot],
  ];
  return { id, type: splitChannelId(id).type, ...Object.fromEntries(flags.filter(([, value]) => value !== undefined)) };
}

export function addChannel(home: string, id: string, settings: ChannelSettings, options: EditOptions = {}): Promise<EditResult> {
  return editXgwConfig(home, options, (document, config) => {
    if (config.channels.some((channel) => channel.id === id)) {
      throw usageError(`channel ${id} is configured already`, `see it with: xgw channel list; to change it, remove it first (xgw channel remove ${id}) or edit ${xgwConfigPath(home)}`);
    }
    const entry = channelEntry(id, settings);
    appendTo(document, xgwConfigPath(home), 'channels', entry);
    return [entry];
  });
}

export function removeChannel(home: string, id: string, options: EditOptions = {}): Promise<EditResult> {
  return editXgwConfig(home, options, (document, config) => {
    const index = config.channels.findIndex((channel) => channel.id === id);
    if (index < 0) throw usageError(`no channel ${id} is configured`, `see the channels with: xgw channel list (configured: ${config.channels.map((c) => c.id).join(', ') || 'none'})`);
    const routes = config.routes.filter((route) => route.channel === id);
    if (routes.length > 0) {
      throw usageError(
        `${routes.length} route(s) send the messages of ${id} to an agent`,
        `remove them first: ${routes.map((route) => joinCommand(['xgw', 'route', 'remove', '--channel', id, '--peer', route.peer])).join('; ')}`,
      );
    }
    return [removeFrom(document, 'channels', index)];
  });
}

export function addRoute(home: string, route: Route, options: EditOptions = {}): Promise<EditResult> {
  return editXgwConfig(home, options, (document, config) => {
    const same = config.routes.find((r) => r.channel === route.channel && r.peer === route.peer);
    if (same) {
      throw usageError(
        `a route for channel ${route.channel} and peer ${route.peer} exists already (to ${same.agent})`,
        `remove it first: ${joinCommand(['xgw', 'route', 'remove', '--channel', route.channel, '--peer', route.peer])}`,
      );
    }
    if (route.channel !== '*' && !config.channels.some((channel) => channel.id === route.channel)) {
      throw usageError(`no channel ${route.channel} is configured`, `add it first (xgw channel add ${route.channel}), or pick one of: ${config.channels.map((c) => c.id).join(', ') || 'none'} (or *)`);
    }
    appendTo(document, xgwConfigPath(home), 'routes', route);
    return [route];
  });
}

export function removeRoute(home: string, key: Pick<Route, 'channel' | 'peer'>, options: EditOptions = {}): Promise<EditResult> {
  return editXgwConfig(home, options, (document, config) => {
    // Newest first, so that each index still points at its route while the earlier ones are removed.
    const indexes = config.routes.flatMap((route, index) => (route.channel === key.channel && route.peer === key.peer ? [index] : [])).reverse();
    if (indexes.length === 0) throw usageError(`no route for channel ${key.channel} and peer ${key.peer}`, 'see the routes with: xgw route list');
    return indexes.map((index) => removeFrom(document, 'routes', index)).reverse();
  });
}

/**
 * One edit: under a lock (edits and their reloads one at a time), the file's document (or the
 * default config where there is none) changed by `edit`, which refuses what it must; the result
 * checked whole — a problem it has is the edit's fault, since the file had none — then written
 * and applied by a reload, which when refused puts the file back as it was.
 */
async function editXgwConfig(home: string, options: EditOptions, edit: (document: Document.Parsed, config: { channels: ChannelConfig[]; routes: Route[] }) => unknown[]): Promise<EditResult> {
  const file = xgwConfigPath(home);
  ensureDir(runDir(home));
  const lock = await waitForLock(join(runDir(home), 'xgw-config.lock'), 'another change of the xgw config', 30_000);
  try {
    const before = readConfigText(file);
    const text = before ?? DEFAULT_XGW_CONFIG;
    const current = inspectXgwConfig(home, { text });
    if (!current.config) {
      const error = configError(current);
      throw new ClawError('invalid', error.message, { suggestion: 'fix these first (xgw config check lists them), then try again' });
    }
    const document = parseConfigDocument(file, text);
    const entries = edit(document, current.config);
    const after = configDocumentText(document);
    const next = inspectXgwConfig(home, { text: after });
    if (!next.config) throw usageError(configError(next).message.replace(/^invalid /, 'the change would make an invalid '), 'see the settings each channel type takes: xgw channel add --help');
    writeFileAtomically(file, after);
    const findings = inspectXgwConfig(home, { text: after, environment: xgwCheckEnvironment(home, options.env ?? process.env) }).findings;
    if (options.noReload) return { file, entries, applied: { not_applied: 'no_reload' }, findings };
    if (!daemonHolder(home, 'xgw')) return { file, entries, applied: { not_applied: 'not_running' }, findings };
    let reloaded: XgwReloadResult;
    try {
      reloaded = await reloadGateway(home);
    } catch (error) {
      if (!isClawError(error, 'invalid')) {
        throw new ClawError('io', `the change is written to ${file}, but xgw did not apply it: ${(error as Error).message}`, { suggestion: 'apply it with: xgw reload', cause: error });
      }
      if (before === undefined) rmSync(file, { force: true });
      else writeFileAtomically(file, before);
      throw new ClawError('invalid', `xgw refused the change, so it was not written: ${error.message}`, {
        suggestion: 'fix what it names; or write it with --no-reload and restart xgw to apply it (theclaw down && theclaw up)',
      });
    }
    return { file, entries, applied: { reloaded }, findings: reloaded.warnings };
  } finally {
    lock.release();
  }
}

/**
 * Appends an entry to a list of the document, in the style of its entries: a flow map (`{ id: ... }`,
 * as theclaw up writes them) unless they are block maps; an empty or missing list becomes a block list.
 */
function appendTo(document: Document.Parsed, file: string, key: 'channels' | 'routes', entry: object): void {
  const Yaml = yaml();
  let list = document.get(key, true);
  if (list === undefined || list === null || (Yaml.isScalar(list) && list.value === null)) {
    list = document.createNode([]);
    document.set(key, list);
  }
  if (!Yaml.isSeq(list)) throw new ClawError('invalid', `${key} in ${file} is not a list`, { suggestion: `make it a list: ${key}: []` });
  const seq = list as YAMLSeq;
  const node = document.createNode(entry);
  const first = seq.items[0];
  node.flow = first === undefined || (Yaml.isMap(first) && first.flow === true);
  if (seq.items.length === 0) seq.flow = false;
  seq.items.push(node);
}

/** Removes an entry of a list of the document, and returns it as it was. */
function removeFrom(document: Document.Parsed, key: 'channels' | 'routes', index: number): unknown {
  const seq = document.get(key, true) as YAMLSeq;
  const [removed] = seq.items.splice(index, 1);
  return yaml().isNode(removed) ? removed.toJSON() : removed;
}
