import { relative } from 'node:path';
import { listAgentIds } from '../agent/agent-dir.js';
import { agentStatus, type AgentStatus } from '../agent/lifecycle.js';
import { browserServiceStatus, type RunningBrowser } from '../browser/index.js';
import { daemonHolder, type DaemonName } from '../core/daemon.js';
import { formatError, isClawError } from '../core/errors.js';
import { daemonPidFile } from '../core/layout.js';
import { lockState } from '../core/lock.js';
import { residentBytes } from '../core/process.js';
import { daemonStatus, subscribedThread } from '../notifier/control.js';
import type { NotifierStatus } from '../notifier/index.js';
import type { ThreadEvent } from '../thread/index.js';
import { gatewayStatus } from '../xgw/control.js';
import type { ChannelStatus, XgwStatus } from '../xgw/index.js';
import { forEachAgentThread, newestFirst, withDamage, type AgentDamage } from './agent-threads.js';
import { changedConfigs, type ChangedConfig } from './config-changes.js';
import { modelWaits, recentErrors, type ModelWait, type RecentError } from './failures.js';
import { UsageByDay, type UsageDay } from './usage-days.js';
import { agentsModel, shellModel, type ModelChoice } from './system.js';

export interface ComponentStatus {
  name: DaemonName;
  running: boolean;
  /** False when it runs but its socket did not answer (hung, or still starting). */
  answering: boolean;
  /** Not running, and it did not stop cleanly: its lock is left behind (killed, or crashed). `theclaw up` starts it again. */
  died: boolean;
  pid: number | null;
  uptime_seconds: number | null;
  /** Resident memory. */
  rss_bytes: number | null;
}

/** An agent whose status could not be read (a broken config.yaml): the others are still shown. */
export interface BrokenAgent {
  id: string;
  error: string;
}

/** A subscription with work waiting or failing: what notifier has still to hand to a handler. */
export interface QueueStatus {
  /** The thread, relative to THECLAW_HOME. */
  thread: string;
  consumer: string;
  pending: number;
  state: 'running' | 'waiting' | 'failing';
  failures: number;
  last_error: string | null;
  retry_at: string | null;
}

export interface SystemStatus {
  home: string;
  checked_at: string;
  components: ComponentStatus[];
  channels: ChannelStatus[];
  agents: (AgentStatus | BrokenAgent)[];
  queues: QueueStatus[];
  /** Pending events over every queue. */
  pending: number;
  /** The model agents get when their config names none (see agentsModel). */
  model: ModelChoice;
  /** The model this shell's keys would give, when it differs (notifier was started with other keys). */
  shell_model?: ModelChoice;
  /** Agents whose messages wait for an unavailable model; `theclaw retry` tries again now. */
  model_waits: ModelWait[];
  /** The newest error records of every agent's conversations, newest first. */
  recent_errors: RecentError[];
  /** Running daemons whose config file changed since they loaded it: `theclaw reload` applies it. */
  config_changed: ChangedConfig[];
  /** The browser service, when it runs (started by an agent's first `browser` command): its open browsers. */
  browser?: BrowserServiceStatus;
}

export interface BrowserServiceStatus {
  pid: number;
  /** False when it runs but its socket did not answer. */
  answering: boolean;
  rss_bytes: number | null;
  browsers: RunningBrowser[];
}

/** One event as the status page lists it. */
export interface EventLine {
  id: number;
  type: string;
  subtype: string | null;
  source: string;
  created_at: string;
  /** The first line of the content (of its `text` when it is a message). */
  summary: string;
  error: boolean;
}

export interface ThreadActivity {
  agent: string;
  /** The thread, relative to the agent's directory (`inbox`, `threads/peers/<slug>`). */
  thread: string;
  /** Newest first. */
  events: EventLine[];
}

export type { UsageDay } from './usage-days.js';

export interface StatusDetails {
  threads: ThreadActivity[];
  /** Days with usage among the last `days`, newest first. */
  usage: UsageDay[];
  days: number;
}

export const USAGE_DAYS = 7;
/** Error records `theclaw status` shows. */
export const RECENT_ERRORS = 5;
const SUMMARY_CHARS = 160;

/** The daemons, each asked over its socket; one that does not answer is reported, not thrown. */
export async function probeDaemons(home: string): Promise<{ notifier: NotifierStatus | null; xgw: XgwStatus | null; components: ComponentStatus[] }> {
  const [notifier, xgw] = await Promise.all([daemonStatus(home).catch(() => null), gatewayStatus(home).catch(() => null)]);
  // A daemon that stops releases its lock; one whose lock outlived it was killed or crashed.
  const died = (name: DaemonName, running: boolean) => !running && lockState(daemonPidFile(home, name)) === 'stale';
  const component = (name: DaemonName, s: { running: boolean; pid: number | null; uptime_seconds: number | null } | null): ComponentStatus => {
    if (s === null) {
      const holder = daemonHolder(home, name); // running (it holds its lock) but not answering
      return {
        name,
        running: holder !== null,
        answering: false,
        died: died(name, holder !== null),
        pid: holder?.pid ?? null,
        uptime_seconds: null,
        rss_bytes: holder ? residentBytes(holder.pid) : null,
      };
    }
    return {
      name,
      running: s.running,
      answering: s.running,
      died: died(name, s.running),
      pid: s.pid,
      uptime_seconds: s.uptime_seconds,
      rss_bytes: s.running && s.pid !== null ? residentBytes(s.pid) : null,
    };
  };
  return { notifier, xgw, components: [component('notifier', notifier), component('xgw', xgw)] };
}

/** The agents' model, or (a broken pai config) why it cannot be known: status goes on without it. */
function modelOrProblem(choose: () => ModelChoice): ModelChoice {
  try {
    return choose();
  } catch (error) {
    if (!isClawError(error)) throw error;
    return { provider: 'unknown', model: null, offline: false, problem: `${error.message}${error.suggestion ? ` - ${error.suggestion}` : ''}` };
  }
}

/** `theclaw status`: the daemons, every agent, and what waits for delivery. One part failing never hides the others. */
export async function systemStatus(home: string, env: NodeJS.ProcessEnv = process.env): Promise<SystemStatus> {
  const model = modelOrProblem(() => agentsModel(home, env));
  const shell_model = model.problem === undefined ? shellModel(home, env, model) : undefined;
  const { notifier, xgw, components } = await probeDaemons(home);
  const queues = (notifier?.subscriptions ?? []).flatMap((sub): QueueStatus[] => {
    if (sub.pending === 0 && sub.failures === 0) return [];
    return [
      {
        thread: subscribedThread(home, sub),
        consumer: sub.consumer,
        pending: sub.pending,
        state: sub.lease ? 'running' : sub.failures > 0 ? 'failing' : 'waiting',
        failures: sub.failures,
        last_error: sub.last_error,
        retry_at: sub.retry_at,
      },
    ];
  });
  // Read first: a conversation found damaged here is named under its agent below.
  const damaged: AgentDamage[] = [];
  const recent = await recentErrors(home, RECENT_ERRORS, damaged, env);
  const browser = await browserService(home);
  return {
    home,
    checked_at: new Date().toISOString(),
    components,
    channels: xgw?.channels ?? [],
    agents: await Promise.all(
      listAgentIds(home).map(async (id) => {
        try {
          return withDamage(await agentStatus(home, id), damaged);
        } catch (error) {
          return { id, error: formatError(error).replace(/^Error: /, '') };
        }
      }),
    ),
    queues,
    pending: queues.reduce((sum, queue) => sum + queue.pending, 0),
    model,
    ...(shell_model ? { shell_model } : {}),
    model_waits: modelWaits(home, notifier?.subscriptions ?? []),
    recent_errors: recent,
    config_changed: changedConfigs(home, notifier, xgw),
    ...(browser ? { browser } : {}),
  };
}

async function browserService(home: string): Promise<BrowserServiceStatus | undefined> {
  try {
    const service = await browserServiceStatus(home);
    return service ? { pid: service.pid, answering: true, rss_bytes: residentBytes(service.pid), browsers: service.browsers } : undefined;
  } catch {
    const holder = daemonHolder(home, 'browser');
    return holder ? { pid: holder.pid, answering: false, rss_bytes: residentBytes(holder.pid), browsers: [] } : undefined;
  }
}

/**
 * What the status page shows beyond `systemStatus`: the newest `recent` events of every thread of
 * every agent, and model usage per agent per day.
 */
export async function statusDetails(home: string, recent: number, now = new Date(), env: NodeJS.ProcessEnv = process.env): Promise<StatusDetails> {
  const threads: ThreadActivity[] = [];
  const usage = new UsageByDay(USAGE_DAYS, now);
  await forEachAgentThread(
    home,
    { inbox: true },
    async ({ agent: id, dir, path, thread }) => {
      const events = (await thread.peek({ last: recent })).reverse();
      if (events.length > 0) threads.push({ agent: id, thread: relative(dir.root, path), events: events.map(eventLine) });
      await usage.add(id, thread);
    },
    [],
    env,
  );
  threads.sort((a, b) => newestFirst(a.events[0]!.created_at, b.events[0]!.created_at));
  return { threads, days: USAGE_DAYS, usage: usage.days() };
}

export function eventLine(event: ThreadEvent): EventLine {
  return {
    id: event.id,
    type: event.type,
    subtype: event.subtype,
    source: event.source,
    created_at: event.created_at,
    summary: summarise(event),
    error: event.subtype === 'error',
  };
}

/** One line saying what the event is: a message's text, a record's gist. */
function summarise(event: ThreadEvent): string {
  let parsed: Record<string, unknown> | null = null;
  try {
    const value = JSON.parse(event.content) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value)) parsed = value as Record<string, unknown>;
  } catch {
    // plain text content
  }
  const field = (name: string) => (parsed && parsed[name] !== undefined ? String(parsed[name]) : '');
  let text = event.content;
  if (parsed && event.type === 'record') {
    if (event.subtype === 'usage') {
      const cost = Number(parsed.cost);
      text = `${field('provider')}/${field('model')}: ${field('input_tokens')} in + ${field('output_tokens')} out tokens${cost > 0 ? `, $${cost.toFixed(4)}` : ''}`;
    } else if (event.subtype === 'toolcall') {
      const output = field('output').trim().split('\n', 1)[0];
      text = `${field('command')} → exit ${field('exit_code')}${output ? `: ${output}` : ''}`;
    } else if (event.subtype === 'error') text = `${field('stage')}: ${field('error')}`;
    else if (event.subtype === 'decision') text = field('decision');
  } else if (parsed && typeof parsed.text === 'string') text = parsed.text;
  const line = text.split('\n', 1)[0] ?? '';
  return line.length > SUMMARY_CHARS ? `${line.slice(0, SUMMARY_CHARS - 1)}…` : line;
}
