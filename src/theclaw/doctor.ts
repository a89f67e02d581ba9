// Over 400 lines: one function per check, run in a row by doctor(); checks that grew a module of their own are apart (doctor-channels.ts).
import { existsSync, mkdirSync, readFileSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, relative } from 'node:path';
import {
  agentDir,
  agentModel,
  agentStatus,
  describeShortage,
  identityText,
  INBOX_CONSUMER,
  INBOX_FILTER,
  listAgentIds,
  loadAgentConfig,
  windowShortage,
  withAgentThread,
  type AgentConfig,
} from '../agent/index.js';
import type { DaemonName } from '../core/daemon.js';
import { daemonPidFile, xgwConfigPath } from '../core/layout.js';
import { hostName } from '../core/host.js';
import { ClawError, errnoCode, isClawError } from '../core/errors.js';
import { storageError } from '../core/storage-error.js';
import { yaml } from '../core/config.js';
import { lockState } from '../core/lock.js';
import { packageRoot } from '../core/package.js';
import { isAlive } from '../core/process.js';
import { createRedactor } from '../core/secrets.js';
import { subscribedPath, subscribedThread } from '../notifier/control.js';
import { loadConfig as loadNotifierConfig, type SubscriptionStatus } from '../notifier/index.js';
import { BUILTIN_PROVIDERS, chat, chooseModel, findBwrap, keyVariables, loadPaiConfig, MOCK_PROVIDER, providerSecrets, sandboxProblem, type PaiConfig } from '../pai/index.js';
import { checkSearchProvider } from '../web/index.js';
import { CHROMIUM } from '../browser/index.js';
import { DEFAULT_XGW_CONFIG, inspectXgwConfig, XgwConfigSchema, xgwCheckEnvironment, type ChannelConfig } from '../xgw/index.js';
import { withDamage, type AgentDamage } from './agent-threads.js';
import { checkChannels } from './doctor-channels.js';
import { checkStore } from './doctor-store.js';
import type { Check } from './doctor-check.js';
import { modelWaits, recentErrors } from './failures.js';
import { probeDaemons, RECENT_ERRORS } from './status.js';
import { agentsEnvironment, agentsModel } from './system.js';

export type { Check, CheckStatus } from './doctor-check.js';

/** Events waiting longer than this are reported: a healthy system hands them on in seconds. */
export const STALE_PENDING_MS = 60_000;
/** Error records younger than this are reported. */
export const RECENT_ERROR_MS = 24 * 3_600_000;
/** The model check's call: one short question, no retries, a short timeout. */
const MODEL_CHECK = { input: 'Reply with the word OK.', system: 'You are a health check. Reply with one word.', timeoutSeconds: 20 };

export interface DoctorOptions {
  /** Skip the call to the model. */
  offline?: boolean;
  /** Seam for tests: bubblewrap's path, null where it is missing. Default: found on the agents' PATH. */
  bwrap?: string | null;
  /** Seam for tests: chromium's path, null where it is missing. Default: CHROMIUM when it is there. */
  chromium?: string | null;
}

/**
 * `theclaw doctor`: every check runs even when an earlier one fails, since one look should show
 * every problem. Only `fail` findings make the command exit 1; `warn` ones work but deserve a look.
 */
export async function doctor(home: string, env: NodeJS.ProcessEnv = process.env, now = Date.now(), options: DoctorOptions = {}): Promise<Check[]> {
  const checks: Check[] = [checkNode(), checkDataDirectory(home)];
  if (!existsSync(home)) return checks;
  const configs = checkConfigs(home, env);
  checks.push(...configs.checks);
  checks.push(...(await checkStore(home, env)));
  if (configs.pai) {
    const providers = checkProviders(configs.pai, env);
    checks.push(providers);
    // A missing key is reported above; the offline mock needs no check.
    if (!options.offline && providers.status === 'ok') checks.push(await checkModel(home, configs.pai, env));
  }
  checks.push(...(await checkSearch(home, env, options.offline ?? false)));
  checks.push(...(await checkAgentWindows(home, configs.agents, env)));
  checks.push(checkSandbox(home, configs.agents, options.bwrap !== undefined ? options.bwrap : findBwrap(agentsEnvironment(home, env))));
  checks.push(checkBrowser(options.chromium !== undefined ? options.chromium : existsSync(CHROMIUM) ? CHROMIUM : null));
  checks.push(...(await checkRuntime(home, env, configs.channels, now, xgwCheckEnvironment(home, env).env, options.offline === true)));
  return checks;
}

/** Against the package's `engines.node` (`>=major.minor`), so the two never disagree. */
function checkNode(): Check {
  const wanted = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const minimum = wanted
    .replace(/^>=\s*/, '')
    .split('.')
    .map(Number);
  const actual = process.versions.node.split('.').map(Number);
  const differs = minimum.findIndex((part, i) => (actual[i] ?? 0) !== part);
  return differs >= 0 && (actual[differs] ?? 0) < minimum[differs]!
    ? { name: 'node', status: 'fail', detail: `Node ${process.versions.node} is older than ${minimum.join('.')}`, fix: `install Node ${minimum.join('.')} or newer` }
    : { name: 'node', status: 'ok', detail: `Node ${process.versions.node}` };
}

function checkDataDirectory(home: string): Check {
  if (!existsSync(home)) {
    const problem = unmakeable(home);
    if (problem) return { name: 'data directory', status: 'fail', detail: problem.message, fix: problem.suggestion ?? 'point THECLAW_HOME at a directory on a normal disk' };
    return { name: 'data directory', status: 'warn', detail: `${home} does not exist yet`, fix: 'theclaw up creates it' };
  }
  const probe = join(home, `.doctor-${process.pid}`);
  try {
    writeFileSync(probe, '');
    unlinkSync(probe);
  } catch (error) {
    return {
      name: 'data directory',
      status: 'fail',
      detail: `cannot write in ${home} (${errnoCode(error) ?? (error as Error).message})`,
      fix: `make it writable, or point THECLAW_HOME at a writable directory`,
    };
  }
  if (statSync(home).mode & 0o077) {
    return { name: 'data directory', status: 'warn', detail: `${home} is open to other users (it holds tokens and conversations)`, fix: `chmod 700 ${home}` };
  }
  return { name: 'data directory', status: 'ok', detail: `${home} is writable and private` };
}

/**
 * Why a home that does not exist could not be made where it is (under a file, on /proc, in a
 * directory that is not writable), as `theclaw up` would say it; null when it could. Tried with a
 * directory made and removed at once in the nearest part of the path that exists.
 */
function unmakeable(home: string): ClawError | null {
  let existing = dirname(home);
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  const probe = join(existing, `.theclaw-doctor-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return null;
  } catch (error) {
    return storageError(error, home) ?? new ClawError('io', `${home} cannot be made (${errnoCode(error) ?? (error as Error).message})`);
  }
}

/** Every config file, each loaded the way its tool loads it. */
function checkConfigs(home: string, env: NodeJS.ProcessEnv): { checks: Check[]; pai?: PaiConfig; channels: ChannelConfig[]; agents: Map<string, AgentConfig> } {
  const checks: Check[] = [];
  const attempt = <T>(what: string, load: () => T): T | undefined => {
    try {
      return load();
    } catch (error) {
      if (!isClawError(error)) throw error;
      checks.push({ name: 'config', status: 'fail', detail: `${what}: ${error.message}`, fix: error.suggestion ?? 'fix the file' });
      return undefined;
    }
  };
  const pai = attempt('pai', () => loadPaiConfig(home));
  attempt('notifier', () => loadNotifierConfig(home));
  // The verdict of xgw config check, finding by finding.
  const xgw = attempt('xgw', () => inspectXgwConfig(home, { environment: xgwCheckEnvironment(home, env) }));
  for (const finding of xgw?.findings ?? []) {
    checks.push({ name: 'config', status: finding.severity, detail: `xgw: ${finding.message}`, fix: finding.fix ?? 'xgw config check lists every problem' });
  }
  const agents = new Map<string, AgentConfig>();
  for (const id of listAgentIds(home)) {
    const config = attempt(`agent ${id}`, () => loadAgentConfig(agentDir(home, id)));
    if (config) agents.set(id, config);
  }
  // One verdict: the ok line only when nothing above it was said of the configs.
  if (checks.length === 0) checks.push({ name: 'config', status: 'ok', detail: 'pai, notifier, xgw and agent configs are valid' });
  // The channels theclaw up would start: the config's, or the default it writes when there is none.
  const channels = existsSync(xgwConfigPath(home)) ? (xgw?.channels ?? []) : XgwConfigSchema.parse(yaml().parse(DEFAULT_XGW_CONFIG)).channels;
  return { checks, channels, agents, ...(pai ? { pai } : {}) };
}

/** Which providers can answer: those with a key in this environment or the config, and servers with a base_url. */
function checkProviders(config: PaiConfig, env: NodeJS.ProcessEnv): Check {
  const usable = new Set<string>();
  for (const [name, provider] of Object.entries(config.providers)) {
    if (name === MOCK_PROVIDER) continue;
    const keyEnvs = keyVariables(config, name, BUILTIN_PROVIDERS[name]?.keyEnv ?? null);
    if (provider.api_key || keyEnvs.some((keyEnv) => env[keyEnv]) || (provider.api && provider.base_url)) usable.add(name);
  }
  for (const [name, { keyEnv }] of Object.entries(BUILTIN_PROVIDERS)) if (env[keyEnv]) usable.add(name);
  const { provider, model } = chooseModel(config, {}, env);
  const chosen = `${provider}/${model ?? '(default)'}`;
  if (provider !== MOCK_PROVIDER && !usable.has(provider)) {
    const keyEnv = keyVariables(config, provider, BUILTIN_PROVIDERS[provider]?.keyEnv ?? null).join('=... or ');
    return {
      name: 'providers',
      status: 'fail',
      detail: `the default model ${chosen} has no key`,
      fix: keyEnv ? `export ${keyEnv}=...` : `give providers.${provider} an api_key_env or a base_url in pai/config.yaml`,
    };
  }
  if (usable.size === 0) {
    return {
      name: 'providers',
      status: 'warn',
      detail: 'no provider key: agents answer with the offline mock model',
      fix: 'export OPENAI_API_KEY or ANTHROPIC_API_KEY, or add a provider with a base_url (Ollama, vLLM) to pai/config.yaml',
    };
  }
  return { name: 'providers', status: 'ok', detail: `usable: ${[...usable].sort().join(', ')}; agents use ${chosen}` };
}

/** The web search provider, when web/config.yaml names one: its key, and one tiny query unless offline. */
async function checkSearch(home: string, env: NodeJS.ProcessEnv, offline: boolean): Promise<Check[]> {
  const health = await checkSearchProvider({ home, env }, offline);
  return health ? [{ name: 'search', ...health }] : [];
}

/** Every agent's model has room for its identity and memory caps (agent/window-check.ts). */
async function checkAgentWindows(home: string, agents: Map<string, AgentConfig>, env: NodeJS.ProcessEnv): Promise<Check[]> {
  const checks: Check[] = [];
  for (const [id, config] of agents) {
    const dir = agentDir(home, id);
    const model = await agentModel(home, config, env);
    const shortage = model && windowShortage(identityText(dir), config, model);
    if (shortage) {
      checks.push({
        name: 'agents',
        status: 'fail',
        detail: `${id}: ${describeShortage(shortage)}`,
        fix: `choose a model with a larger window (pai: in ${relative(home, dir.config)}), or lower context.memory_caps there`,
      });
    }
  }
  if (checks.length === 0 && agents.size > 0) checks.push({ name: 'agents', status: 'ok', detail: "every agent's model has room for its identity and memory caps" });
  return checks;
}

/** Chromium, which the agents' `browser` runs: optional, so its absence is a warning. */
function checkBrowser(chromium: string | null): Check {
  if (chromium === null) {
    return { name: 'browser', status: 'warn', detail: `chromium is not installed (${CHROMIUM}): an agent's browser commands fail`, fix: 'apt-get install chromium' };
  }
  return { name: 'browser', status: 'ok', detail: `agents' browsers run ${chromium}` };
}

/**
 * bubblewrap, which runs the commands of every agent whose sandbox profile is not `none`
 * (agent/sandbox-profile.ts): found on the PATH the agents get, and tried once. New agents get
 * the `sandbox` profile, so with no agent yet it is needed all the same.
 */
function checkSandbox(home: string, agents: Map<string, AgentConfig>, bwrap: string | null): Check {
  const unsandboxed = [...agents].filter(([, config]) => config.sandbox.profile === 'none').map(([id]) => id);
  const problem = bwrap === null ? 'bubblewrap (bwrap) is not installed' : sandboxProblem(bwrap);
  if (problem !== null && (unsandboxed.length < agents.size || agents.size === 0)) {
    return {
      name: 'sandbox',
      status: 'fail',
      detail: `${problem}: agents refuse every command (exit 126) unless their sandbox.profile is none`,
      fix:
        bwrap === null
          ? 'apt-get install bubblewrap (dnf install bubblewrap, pacman -S bubblewrap), or set sandbox.profile: none in agents/<id>/config.yaml'
          : 'allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap), or set sandbox.profile: none in agents/<id>/config.yaml',
    };
  }
  if (unsandboxed.length > 0) {
    return {
      name: 'sandbox',
      status: 'warn',
      detail: `${unsandboxed.join(', ')} run${unsandboxed.length === 1 ? 's' : ''} commands without a sandbox (sandbox.profile: none): with every file and right of the daemons' user`,
      fix: `set sandbox.profile: sandbox in ${unsandboxed.map((id) => relative(home, agentDir(home, id).config)).join(', ')}`,
    };
  }
  return { name: 'sandbox', status: 'ok', detail: `every agent's commands run in bubblewrap (${bwrap})` };
}

/** One tiny real call to `choice`, no retries, a short timeout (doctor's model check, setup's key check). */
export async function callModelOnce(home: string, config: PaiConfig, choice: { provider: string; model?: string }, env: NodeJS.ProcessEnv): Promise<void> {
  await chat({
    input: MODEL_CHECK.input,
    system: MODEL_CHECK.system,
    tools: false,
    ...choice,
    config: { ...config, retry: { ...config.retry, max_attempts: 1 }, timeout_seconds: Math.min(config.timeout_seconds, MODEL_CHECK.timeoutSeconds) },
    env,
    home,
  });
}

/** One tiny real call to the model agents use, with the environment they get. */
async function checkModel(home: string, config: PaiConfig, shellEnv: NodeJS.ProcessEnv): Promise<Check> {
  const env = agentsEnvironment(home, shellEnv);
  const { provider, model } = agentsModel(home, shellEnv);
  const name = `${provider}/${model ?? '(default)'}`;
  if (provider === MOCK_PROVIDER) return { name: 'model', status: 'ok', detail: `${name} is the offline mock: nothing to call` };
  const started = Date.now();
  try {
    await callModelOnce(home, config, { provider, model: model ?? undefined }, env);
    return { name: 'model', status: 'ok', detail: `${name} answered in ${Date.now() - started} ms` };
  } catch (error) {
    const redact = createRedactor(env, providerSecrets(config, env));
    return {
      name: 'model',
      status: 'fail',
      detail: `${name} did not answer: ${redact((error as Error).message)}`,
      fix: isClawError(error) && error.suggestion ? error.suggestion : 'check the provider settings: pai model resolve --json',
    };
  }
}

/** Messages waiting for an unavailable model, and error records of the last day. */
async function checkFailures(home: string, subscriptions: readonly SubscriptionStatus[], now: number, damaged: AgentDamage[]): Promise<Check[]> {
  const waits = modelWaits(home, subscriptions);
  const errors = (await recentErrors(home, RECENT_ERRORS, damaged)).filter((e) => now - Date.parse(e.created_at) < RECENT_ERROR_MS);
  const newest = errors[0];
  return [
    waits.length === 0
      ? { name: 'model', status: 'ok', detail: 'no message waits for the model' }
      : {
          name: 'model',
          status: 'warn',
          detail: `messages wait for the model: ${waits.map((w) => `${w.pending} of ${w.agent} since ${w.since} (${w.error}; next try ${w.retry_at ?? 'now'})`).join('; ')}`,
          fix: 'they are answered once the model is back; after fixing it, theclaw retry tries at once',
        },
    newest === undefined
      ? { name: 'errors', status: 'ok', detail: 'no error recorded in the last 24 hours' }
      : {
          name: 'errors',
          status: 'warn',
          detail: `${errors.length === RECENT_ERRORS ? `${RECENT_ERRORS} or more` : errors.length} error(s) in the last 24 hours; the newest, ${newest.created_at} in ${newest.agent}/${newest.thread}: ${newest.stage}: ${newest.error}`,
          fix: 'theclaw status lists the recent ones; the agent log (agents/<id>/logs/agent.log) has the details',
        },
  ];
}

async function checkRuntime(home: string, env: NodeJS.ProcessEnv, configured: ChannelConfig[], now: number, xgwEnv: NodeJS.ProcessEnv, offline: boolean): Promise<Check[]> {
  const checks: Check[] = [];
  const { notifier, xgw, components } = await probeDaemons(home);
  const hung = components.filter((c) => c.running && !c.answering);
  const stopped = components.filter((c) => !c.running).map((c) => c.name);
  const died = components.filter((c) => c.died).map((c) => c.name);
  if (hung.length > 0) {
    for (const c of hung)
      checks.push({ name: 'daemons', status: 'fail', detail: `${c.name} (pid ${c.pid}) runs but does not answer on its socket`, fix: `see logs/${c.name}.log, then theclaw down && theclaw up` });
  } else {
    checks.push(
      stopped.length === 0
        ? { name: 'daemons', status: 'ok', detail: components.map((c) => `${c.name} (pid ${c.pid})`).join(' and ') + ' are running' }
        : {
            name: 'daemons',
            status: 'warn',
            detail: `${stopped.join(' and ')} ${stopped.length > 1 ? 'are' : 'is'} not running: messages wait${died.length ? `; ${died.join(' and ')} died (did not stop cleanly: killed, or see its log)` : ''}`,
            fix: 'theclaw up',
          },
    );
  }

  checks.push(...(await checkChannels(configured, xgw?.running ? xgw.channels : null, xgwEnv, offline)));
  for (const channel of configured) {
    if (xgw?.channels.find((c) => c.id === channel.id)?.state === 'running') continue; // ours holds its port
    if (channel.type !== 'webchat' || channel.port === 0) continue;
    const taken = await portTaken(channel.host, channel.port);
    checks.push(
      taken
        ? {
            name: 'ports',
            status: 'fail',
            detail: `${channel.id}: port ${channel.port} on ${channel.host} is taken by another program`,
            fix: `stop that program, or set another port for ${channel.id} in xgw/config.yaml`,
          }
        : { name: 'ports', status: 'ok', detail: `${channel.id}: port ${channel.port} on ${channel.host} is free` },
    );
  }

  const stale: string[] = [];
  for (const name of ['notifier', 'xgw'] as DaemonName[]) if (lockState(daemonPidFile(home, name)) === 'stale') stale.push(relative(home, daemonPidFile(home, name)));
  for (const id of listAgentIds(home)) if (lockState(agentDir(home, id).runLock) === 'stale') stale.push(relative(home, agentDir(home, id).runLock));
  const subscriptions = notifier?.subscriptions ?? [];
  const here = notifier?.host ?? thisHost(home, env);
  for (const sub of subscriptions) {
    // Another host's lease names a process of that machine, which this one's cannot tell dead.
    if (sub.lease && (sub.lease.host === undefined || sub.lease.host === here) && !isAlive(sub.lease)) stale.push(`lease of ${sub.consumer} on ${subscribedThread(home, sub)} (pid ${sub.lease.pid})`);
  }
  checks.push(
    stale.length === 0
      ? { name: 'locks', status: 'ok', detail: 'no lock or lease is held by a dead process' }
      : { name: 'locks', status: 'warn', detail: `held by processes that died: ${stale.join(', ')}`, fix: 'nothing to do: the next run or start reclaims them (theclaw up)' },
  );

  const late: string[] = [];
  const fixes = new Set<string>();
  const isLate = (since: string | null) => since !== null && now - Date.parse(since) > STALE_PENDING_MS;
  for (const sub of subscriptions) {
    if (sub.pending === 0) continue;
    const path = subscribedPath(home, sub);
    const since = await oldestPending(home, path, sub.progress, sub.filter);
    if (!isLate(since)) continue;
    late.push(`${sub.pending} on ${relative(home, path)} (${sub.consumer}, since ${since}${sub.last_error ? `; last error: ${sub.last_error}` : ''})`);
    fixes.add(notifier?.running ? 'see notifier status and the logs under $THECLAW_HOME/logs' : 'theclaw up');
  }
  // A stopped agent's inbox is not subscribed, so notifier does not list it.
  for (const id of listAgentIds(home)) {
    const inbox = agentDir(home, id).inbox;
    const consumer = subscriptions.find((sub) => subscribedPath(home, sub) === inbox && sub.consumer === INBOX_CONSUMER);
    if (consumer?.subscribed) continue;
    const status = await agentStatus(home, id);
    if (status.pending === 0 || !isLate(await oldestPending(home, inbox, consumer?.progress ?? 0, INBOX_FILTER))) continue;
    late.push(`${status.pending} in the inbox of ${id}, which is stopped`);
    fixes.add(`agent start ${id}`);
  }
  checks.push(
    late.length === 0
      ? { name: 'pending', status: 'ok', detail: 'no event has waited more than a minute' }
      : { name: 'pending', status: 'warn', detail: `events waiting more than a minute: ${late.join('; ')}`, fix: [...fixes].join('; ') },
  );
  const damaged: AgentDamage[] = [];
  checks.push(...(await checkFailures(home, subscriptions, now, damaged)), await checkThreads(home, damaged));
  return checks;
}

/** Damaged conversation threads (with those the checks before met): each stops its own conversation until it is moved away. */
async function checkThreads(home: string, found: readonly AgentDamage[]): Promise<Check> {
  const damaged = [];
  for (const id of listAgentIds(home)) {
    try {
      damaged.push(...withDamage(await agentStatus(home, id), found).damaged.map((d) => ({ ...d, agent: id })));
    } catch {
      // a broken agent is the config check's finding
    }
  }
  if (damaged.length === 0) return { name: 'threads', status: 'ok', detail: 'every conversation thread can be read' };
  return {
    name: 'threads',
    status: 'fail',
    detail: `damaged, their conversations get no answer: ${damaged.map((d) => `${d.agent}/${d.thread} (${d.file}: ${d.error})`).join('; ')}`,
    fix: damaged.map((d) => d.fix).join('; '),
  };
}

/** This host's name, or null when its setting is wrong (notifier does not start with it either): then no host's lease is judged here. */
function thisHost(home: string, env: NodeJS.ProcessEnv): string | null {
  try {
    return hostName(home, env);
  } catch (error) {
    if (!isClawError(error)) throw error;
    return null;
  }
}

/** When the oldest event the consumer has yet to handle was written, read in the home's store. */
async function oldestPending(home: string, path: string, progress: number, filter: string | null): Promise<string | null> {
  try {
    return await withAgentThread(home, path, async (thread) => (await thread.peek({ afterId: progress, limit: 1, ...(filter ? { filter } : {}) }))[0]?.created_at ?? null);
  } catch {
    return null; // removed since it subscribed: nothing waits there
  }
}

function portTaken(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (error) => resolve(errnoCode(error) === 'EADDRINUSE'));
    server.listen(port, host, () => server.close(() => resolve(false)));
  });
}
