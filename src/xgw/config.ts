import { parseConfigText, readConfigText, textHash } from '../core/config.js';
import { daemonEnvironment } from '../core/daemon.js';
import { ClawError } from '../core/errors.js';
import { secretsEnvPath, xgwConfigPath } from '../core/layout.js';
import { readSecretsFile } from '../core/secrets-file.js';
import { describeIssue, OWN_WORDING } from '../core/validate.js';
import { storeSetting } from '../thread/index.js';
import { agentExists, findRoute } from './route.js';
import { ChannelConfigSchema, isLoopbackHost, RouteSchema, XgwConfigSchema, type ChannelConfig, type Route, type WebchatChannelConfig, type XgwConfig } from './types.js';

/**
 * The gateway config `theclaw up` writes when there is none: the web chat and the terminal, both
 * to admin. An edit by `xgw channel|route add` on a home without a config starts from it too.
 */
export const DEFAULT_XGW_CONFIG = `# Written by theclaw up. Reference: TheClaw's docs/guide/02-channels.md and 07-configuration.md.
channels:
  - { id: webchat:main, type: webchat, host: 127.0.0.1, port: 18790, access: open }   # the token in the URL guards it
  - { id: terminal:local, type: terminal, access: open }
routes:
  - { channel: "*", peer: "*", agent: admin }
`;

/**
 * One thing `inspectXgwConfig` found. `fail`: xgw cannot run the config as it is (it refuses to
 * start with it, and a reload refuses it); `warn`: it runs, but something deserves a look.
 */
export interface ConfigFinding {
  severity: 'fail' | 'warn';
  /** `path: what is wrong`, e.g. `routes.0: ...` or `telegram:main: ...`. */
  message: string;
  /** How to fix it, where there is more to say than "fix the entry". */
  fix?: string;
}

/** What `inspectXgwConfig` found. */
export interface XgwConfigReport {
  file: string;
  /** The fingerprint of the text checked (see loadYamlConfigFile). */
  sha256: string;
  /** The config, when no finding is a `fail`. */
  config?: XgwConfig;
  /** The channels that pass the schema (all of them, when it passes). */
  channels: ChannelConfig[];
  /** False when the schema refused the file: the checks across entries then saw only the entries that passed. */
  schemaValid: boolean;
  findings: ConfigFinding[];
}

/** The environment a check of the bot token variables looks in, and how a finding names it. */
export interface CheckEnvironment {
  env: NodeJS.ProcessEnv;
  /** `this environment`, or `the environment of the running xgw`. */
  name: string;
  /** Whether it is that of the running xgw: a variable missing there needs a restart with it set. */
  daemon: boolean;
}

/**
 * The environment the channels' token variables count in: the running xgw's when there is one
 * (it builds the channels a reload adds), else this shell's (which `theclaw up` passes on).
 */
export function xgwCheckEnvironment(home: string, shellEnv: NodeJS.ProcessEnv): CheckEnvironment {
  const { env, daemon } = daemonEnvironment(home, 'xgw', shellEnv);
  return daemon ? runningXgwEnvironment(env) : { env, daemon, name: 'this environment' };
}

/** The environment of the running xgw, as it checks a config it is asked to reload. */
export function runningXgwEnvironment(env: NodeJS.ProcessEnv): CheckEnvironment {
  return { env, daemon: true, name: 'the environment of the running xgw' };
}

export interface InspectOptions {
  /** Also check the bot token variables, in this environment. */
  environment?: CheckEnvironment;
  /** Check this text instead of the file's (an edit before it is written). */
  text?: string;
}

/**
 * The one verdict on a gateway config, which `xgw config check`, `theclaw doctor`, a start and a
 * reload all take. It checks as far as it can: the schema (field by field), then what a schema
 * cannot say — unique channel ids, an id whose prefix is its type, routes that name existing
 * channels, no two web chats on one port (each a `fail`); with an environment, that each bot
 * token variable is set there (a `fail`: the channel cannot start); and that each route's agent
 * exists (a `warn`: its messages are answered with a notice, and the agent may come later).
 * When the schema fails, the checks across entries still run over the entries that pass it on
 * their own, so one look lists (nearly) everything. A file that is not YAML is an `invalid` error.
 */
export function inspectXgwConfig(home: string, options: InspectOptions = {}): XgwConfigReport {
  const file = xgwConfigPath(home);
  const text = options.text ?? readConfigText(file);
  const raw = parseConfigText(file, text); // a file that is not YAML is thrown as it is
  const sha256 = textHash(text);
  const parsed = XgwConfigSchema.safeParse(raw, OWN_WORDING);
  if (parsed.success) {
    const findings = [...checkConfig(parsed.data).map(fail), ...environmentFindings(home, parsed.data.channels, options.environment), ...routeFindings(home, parsed.data.routes)];
    return { file, sha256, channels: parsed.data.channels, schemaValid: true, findings, ...(!findings.some(isFailure) && { config: parsed.data }) };
  }
  const entries = (key: string): unknown[] => {
    const value = (raw as Record<string, unknown> | null)?.[key];
    return Array.isArray(value) ? value : [];
  };
  const channels = entries('channels').map((entry) => ChannelConfigSchema.safeParse(entry).data);
  const routes = entries('routes').map((entry) => RouteSchema.safeParse(entry).data);
  // A channel refused by the schema still counts as configured for the routes that name it.
  const namedIds = entries('channels').flatMap((entry) => {
    const id = (entry as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? [id] : [];
  });
  const findings = [
    ...parsed.error.issues.map(describeIssue).map(fail),
    ...crossChecks(channels, routes, namedIds).map(fail),
    ...environmentFindings(home, defined(channels), options.environment),
    ...routeFindings(home, routes),
  ];
  return { file, sha256, channels: defined(channels), schemaValid: false, findings };
}

/**
 * The owner's own web chats (`webchat:<instance>`): those with `access: open` on loopback, whose
 * token is the owner's alone, so every peer of theirs is the owner (the agent's tool policy reads
 * them). None where the config is missing or does not pass its schema: nobody is taken for the
 * owner by mistake.
 */
export function ownerWebchats(home: string): string[] {
  let channels: ChannelConfig[];
  try {
    const file = xgwConfigPath(home);
    const parsed = XgwConfigSchema.safeParse(parseConfigText(file, readConfigText(file)));
    channels = parsed.success ? parsed.data.channels : [];
  } catch {
    return [];
  }
  return channels.filter((channel) => channel.type === 'webchat' && isOwnerWebchat(channel)).map((channel) => channel.id);
}

/** Whether a web chat is the owner's own (see ownerWebchats): it alone serves the control page. */
export function isOwnerWebchat(channel: Pick<WebchatChannelConfig, 'access' | 'host'>): boolean {
  return channel.access === 'open' && isLoopbackHost(channel.host);
}

/** The agent a channel's messages go to when no route names their peer; none without a route. */
export function channelAgent(routes: readonly Route[], channelId: string): string | undefined {
  return findRoute(routes, channelId, '*')?.agent;
}

/**
 * Whether a web chat serves the status page (others answer 403): under pairing or an allowlist its
 * token is shared with people the owner chats with, and the page shows every conversation, so
 * only the owner's open web chat serves it.
 */
export function servesStatusPage(channel: Pick<WebchatChannelConfig, 'access'>): boolean {
  return channel.access === 'open';
}

/** Loads the gateway config, or throws one `invalid` error that lists every problem found. */
export function loadXgwConfig(home: string): XgwConfig {
  return loadXgwConfigFile(home).config;
}

/** `loadXgwConfig`, with the fingerprint of the text loaded (what a daemon reports). */
export function loadXgwConfigFile(home: string, options: InspectOptions = {}): { config: XgwConfig; sha256: string; warnings: ConfigFinding[] } {
  const report = inspectXgwConfig(home, options);
  if (!report.config) throw configError(report);
  return { config: report.config, sha256: report.sha256, warnings: report.findings };
}

export function isFailure(finding: ConfigFinding): boolean {
  return finding.severity === 'fail';
}

/** A finding as one line: its message, and its fix in brackets. */
export function describeFinding(finding: ConfigFinding): string {
  return finding.fix ? `${finding.message} (${finding.fix})` : finding.message;
}

/** Findings as lines for a person: `warning: ...`, or `problem: ...` for a failure. */
export function describeFindings(findings: readonly ConfigFinding[]): string[] {
  return findings.map((finding) => `${isFailure(finding) ? 'problem' : 'warning'}: ${describeFinding(finding)}`);
}

/** The error for a config with failures: each of them, and whether the schema check failed. */
export function configError(report: XgwConfigReport): ClawError {
  const note = report.schemaValid ? '' : ' (the schema check failed, so the checks across entries covered only the valid entries)';
  const failures = report.findings.filter(isFailure).map(describeFinding);
  return new ClawError('invalid', `invalid ${report.file}: ${failures.join('; ')}${note}`, {
    suggestion: 'fix the listed entries; xgw config check shows them without starting',
  });
}

/** The problems of a config that passed the schema, across its entries. */
export function checkConfig(config: XgwConfig): string[] {
  return crossChecks(
    config.channels,
    config.routes,
    config.channels.map((channel) => channel.id),
  );
}

function fail(message: string): ConfigFinding {
  return { severity: 'fail', message };
}

function defined<T>(entries: (T | undefined)[]): T[] {
  return entries.filter((entry) => entry !== undefined);
}

/**
 * A channel whose secret's variable is not set cannot start: Telegram, Discord and Slack (a token)
 * and e-mail (a password) refuse to be built without it. A running xgw reads secrets.env only when
 * it starts: a secret stored there since (theclaw setup) needs a restart, not an export.
 */
function environmentFindings(home: string, channels: ChannelConfig[], environment: CheckEnvironment | undefined): ConfigFinding[] {
  if (!environment) return [];
  const stored = environment.daemon ? readSecretsFile(home) : {};
  return channels.flatMap((channel) =>
    secretVariables(channel)
      .filter(({ variable }) => !environment.env[variable])
      .map(({ variable, holds }) => ({
        severity: 'fail' as const,
        message: `${channel.id}: ${variable} is not set in ${environment.name}, so xgw cannot start it`,
        fix: !environment.daemon
          ? `export ${variable}=<${holds}> before theclaw up`
          : stored[variable]
            ? `${variable} is in ${secretsEnvPath(home)}, which xgw reads when it starts: theclaw down && theclaw up`
            : `start xgw again with ${variable} set: export ${variable}=<${holds}>, then theclaw down && theclaw up`,
      })),
  );
}

/** The variables a channel's tokens are read from, and what each holds (Slack has two: the bot's and the app's). */
function secretVariables(channel: ChannelConfig): { variable: string; holds: string }[] {
  return [
    ...('token_env' in channel ? [{ variable: channel.token_env, holds: 'the bot token' }] : []),
    ...('app_token_env' in channel ? [{ variable: channel.app_token_env, holds: 'the app-level token' }] : []),
    ...('password_env' in channel ? [{ variable: channel.password_env, holds: 'the password' }] : []),
  ];
}

/**
 * A route to an agent that does not exist (yet): its messages are answered with a notice saying so.
 * On a store shared by hosts the agent may be another host's (its directory is there), which the
 * gateway's routing finds in the store: this file check cannot say, so it says nothing.
 */
function routeFindings(home: string, routes: (Route | undefined)[]): ConfigFinding[] {
  if (sharesStore(home)) return [];
  const missing = new Map<string, number>();
  routes.forEach((route, index) => {
    if (route && !missing.has(route.agent) && !agentExists(home, route.agent)) missing.set(route.agent, index);
  });
  return [...missing].map(([agent, index]) => ({
    severity: 'warn',
    message: `routes.${index}: agent ${agent} does not exist, so the messages routed to it get a notice instead of an answer`,
    fix: `create it with: agent init ${agent} && agent start ${agent}, or route to another agent`,
  }));
}

function sharesStore(home: string): boolean {
  try {
    return storeSetting(home).url !== null;
  } catch {
    return false; // a bad store setting is the store's check's to report
  }
}

/** Checks across entries; `undefined` stands for an entry the schema refused (skipped, keeping indexes). */
function crossChecks(channels: (ChannelConfig | undefined)[], routes: (Route | undefined)[], channelIds: string[]): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const ports = new Map<number, string>();
  channels.forEach((channel, index) => {
    if (!channel) return;
    if (ids.has(channel.id)) problems.push(`channels.${index}.id: ${channel.id} is used twice`);
    ids.add(channel.id);
    if (!channel.id.startsWith(`${channel.type}:`)) problems.push(`channels.${index}.id: ${channel.id} must start with "${channel.type}:"`);
    if (channel.type === 'webchat' && channel.port !== 0) {
      const other = ports.get(channel.port);
      if (other) problems.push(`channels.${index}.port: ${channel.port} is used by ${other} too`);
      ports.set(channel.port, channel.id);
    }
  });
  const known = new Set(channelIds);
  routes.forEach((route, index) => {
    if (route && route.channel !== '*' && !known.has(route.channel)) problems.push(`routes.${index}.channel: no channel ${route.channel} is configured`);
  });
  return problems;
}
