import { setYamlConfigKey } from '../../core/config.js';
import { parseDuration } from '../../core/duration.js';
import { ClawError, isClawError, usageError } from '../../core/errors.js';
import { validate } from '../../core/validate.js';
import { loadPaiConfig, resolveModel } from '../../pai/index.js';
import { listAgentIds, loadAgentConfig, requireAgent } from '../agent-dir.js';
import { heartbeatCommand, heartbeatTimerId, inboxState, refuseInTurn } from './heartbeat.js';
import { notifierTimer } from '../notifier-timers.js';
import { HeartbeatConfigSchema, type DecisionRecord, type HeartbeatConfig } from '../types.js';
import { usageOfRecord } from '../accounting/index.js';
import { openAgentThread } from '../threads.js';

export { DEFAULT_HEARTBEAT_PROMPT } from '../types.js';

/**
 * `agent heartbeat <id>`: the heartbeat is stored in the agent's config.yaml (`heartbeat:`) and
 * realised as the notifier timer `hb-<id>` (heartbeat.ts). The config is what counts: `agent
 * start` and `theclaw up` set the timer again from it when it is missing or differs, and remove
 * one whose heartbeat is gone; timers are kept in notifier's timers.db, so they outlive its
 * restarts.
 */
export interface HeartbeatChange {
  every?: string;
  prompt?: string;
  model?: string;
  activeHours?: string;
}

/** What `agent heartbeat <id>` shows. */
export interface HeartbeatView {
  agent: string;
  heartbeat: HeartbeatConfig | null;
  /** Its notifier timer as `notifier timer list` has it; null when there is none. */
  timer: { id: string; schedule: string; next_run_at: string | null; runs: number; last_exit: string | null } | null;
  /** Beats are skipped while the agent is stopped. */
  started: boolean;
  /** Beats are skipped until the owner has a direct chat with the agent. */
  owner_chat: boolean;
  /** The last beat that ran. */
  last: { at: string; outcome: 'ok' | 'told_owner' | 'error' | 'unfinished'; tokens: number } | null;
}

/** Sets the heartbeat (what `change` gives, over what is set), then its timer. */
export async function setHeartbeat(home: string, id: string, change: HeartbeatChange, env: NodeJS.ProcessEnv = process.env): Promise<HeartbeatView> {
  refuseInTurn(env);
  const dir = requireAgent(home, id);
  const current = loadAgentConfig(dir).heartbeat;
  if (!current && change.every === undefined) throw usageError(`agent ${id} has no heartbeat yet, so --every is needed`, `e.g. agent heartbeat ${id} --every 30m`);
  const given = { every: change.every, prompt: change.prompt, model: change.model, active_hours: change.activeHours };
  const merged = { ...current, ...Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) };
  const heartbeat = validate(HeartbeatConfigSchema, merged, {
    what: 'heartbeat',
    kind: 'usage',
    suggestion: 'give --every like 30m or 1h (at least 1m), --active-hours like 08:00-22:00, --model as provider/model',
  });
  // A model named here must exist now, not fail at every beat.
  if (heartbeat.model) {
    await resolveModel(loadPaiConfig(home), { model: heartbeat.model }, env).catch((error: unknown) => {
      throw new ClawError('usage', `--model ${heartbeat.model}: ${(error as Error).message}`, { suggestion: isClawError(error) ? error.suggestion : 'see: pai model list' });
    });
  }
  setYamlConfigKey(dir.config, 'heartbeat', heartbeat);
  loadAgentConfig(dir); // what was written must read back
  await syncHeartbeatTimer(home, id, env);
  return showHeartbeat(home, id, env);
}

/** Removes the heartbeat and its timer; false when there was none. */
export async function removeHeartbeat(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  refuseInTurn(env);
  const dir = requireAgent(home, id);
  const had = loadAgentConfig(dir).heartbeat !== undefined;
  if (had) setYamlConfigKey(dir.config, 'heartbeat', undefined);
  const { removed } = await syncHeartbeatTimer(home, id, env);
  return had || removed.length > 0;
}

export async function showHeartbeat(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<HeartbeatView> {
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const timers = await listTimers(home, env);
  const timer = timers.find((t) => t.id === heartbeatTimerId(id));
  const { started, owner } = await inboxState(home, dir, config, env);
  return {
    agent: id,
    heartbeat: config.heartbeat ?? null,
    timer: timer ? { id: timer.id, schedule: timer.schedule, next_run_at: timer.next_run_at, runs: timer.runs, last_exit: timer.last_exit } : null,
    started,
    owner_chat: owner !== null,
    last: await lastBeat(home, dir.heartbeat, env),
  };
}

/** What setting the timers again did: ids of the timers set and removed, and what went wrong, by agent. */
export interface TimerSync {
  set: string[];
  removed: string[];
  problems: string[];
}

/**
 * Makes an agent's heartbeat timer what its config says: set when missing or different (the
 * schedule, or the command: a moved install), removed when its heartbeat is gone; nothing when
 * it matches. Throws what went wrong.
 */
export async function syncHeartbeatTimer(home: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<Omit<TimerSync, 'problems'>> {
  return syncOne(home, id, await listTimers(home, env), env);
}

/**
 * The same for every agent (`theclaw up`), with one `notifier timer list` (none when the caller
 * has the timers as notifier lists them, as `theclaw up` does: a process start less); one agent's
 * problem does not stop the others.
 */
export async function syncAllHeartbeatTimers(home: string, env: NodeJS.ProcessEnv = process.env, listed?: readonly SyncedTimer[]): Promise<TimerSync> {
  const timers = listed ?? (await listTimers(home, env));
  const sync: TimerSync = { set: [], removed: [], problems: [] };
  for (const id of listAgentIds(home)) {
    try {
      const done = await syncOne(home, id, timers, env);
      sync.set.push(...done.set);
      sync.removed.push(...done.removed);
    } catch (error) {
      sync.problems.push(`${id}: ${(error as Error).message}`);
    }
  }
  return sync;
}

async function syncOne(home: string, id: string, timers: readonly SyncedTimer[], env: NodeJS.ProcessEnv): Promise<Omit<TimerSync, 'problems'>> {
  const heartbeat = loadAgentConfig(requireAgent(home, id)).heartbeat;
  const timerId = heartbeatTimerId(id);
  const existing = timers.find((timer) => timer.id === timerId);
  const command = heartbeatCommand(id);
  // As notifier lists an `every` schedule (notifier/timers.ts formatSchedule).
  if (heartbeat && existing && existing.command === command && existing.schedule === `every ${parseDuration(heartbeat.every) / 1000}s`) return { set: [], removed: [] };
  if (existing) await notifierTimer(home, ['remove', '--id', timerId], env);
  if (!heartbeat) return { set: [], removed: existing ? [timerId] : [] };
  await notifierTimer(home, ['add', '--id', timerId, '--every', heartbeat.every, '--command', command], env);
  return { set: [timerId], removed: [] };
}

/** A timer as `notifier timer list --json` prints it. */
interface ListedTimer {
  id: string;
  /** As notifier formats it: `every 1800s`. */
  schedule: string;
  command: string;
  next_run_at: string | null;
  runs: number;
  last_exit: string | null;
}

/** What a heartbeat's sync reads of a listed timer. */
export type SyncedTimer = Pick<ListedTimer, 'id' | 'schedule' | 'command'>;

async function listTimers(home: string, env: NodeJS.ProcessEnv): Promise<ListedTimer[]> {
  return JSON.parse(await notifierTimer(home, ['list', '--json'], env)) as ListedTimer[];
}

/** The newest beat in the heartbeat thread: when, how it ended, and its tokens. */
async function lastBeat(home: string, path: string, env: NodeJS.ProcessEnv): Promise<HeartbeatView['last']> {
  let thread;
  try {
    thread = await openAgentThread(home, path, {}, env);
  } catch {
    return null; // no beat has run yet
  }
  try {
    const begun = (await thread.peek({ filter: "type = 'record' AND subtype = 'heartbeat'", last: 1 }))[0];
    if (!begun) return null;
    let outcome: NonNullable<HeartbeatView['last']>['outcome'] = 'unfinished';
    let tokens = 0;
    for (const event of await thread.peek({ afterId: begun.id, limit: 1000, filter: "type = 'record'" })) {
      const content = JSON.parse(event.content) as { in_reply_to?: number };
      if (content.in_reply_to !== begun.id) continue;
      const usage = event.subtype === 'usage' ? usageOfRecord(event.content) : null;
      if (usage) tokens += usage.input_tokens + usage.output_tokens;
      if (event.subtype === 'error') outcome = 'error';
      if (event.subtype === 'decision') outcome = (content as DecisionRecord).decision === 'told_owner' ? 'told_owner' : 'ok';
    }
    return { at: begun.created_at, outcome, tokens };
  } finally {
    await thread.close();
  }
}
