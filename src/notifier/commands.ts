import { printJson, printLines } from '../core/cli.js';
import { resolveHome } from '../core/home.js';
import { addTimer, daemonStatus, describeNotifierReload, listTimers, reloadNotifier, removeTimer, startDaemon, stopDaemon } from './control.js';
import { configChangedSince } from '../core/config.js';
import { daemonLogFile, notifierConfigPath } from '../core/layout.js';
import { runNotifier } from './daemon.js';
import { usageError } from '../core/errors.js';
import { isValidId } from '../core/slug.js';
import { leaveRequest, TIMER_PREFIX, turnOutbox, type TimerRequest } from '../core/turn-outbox.js';
import { formatSchedule, parseDuration, parseSchedule, type TimerJson } from './timers.js';
import type { NotifierStatus } from './types.js';

interface Json {
  json?: boolean;
}

export async function start(options: Json & { foreground?: boolean }): Promise<void> {
  const home = resolveHome();
  if (options.foreground) {
    await runNotifier(home);
    // Handlers started by this daemon run on in their own process groups; they must not keep
    // this process alive once the daemon has stopped.
    process.exit(0);
  }
  const { pid } = await startDaemon(home);
  if (options.json) printJson({ running: true, pid });
  else printLines([`notifier started (pid ${pid}); log: ${daemonLogFile(home, 'notifier')}`]);
}

export async function stop(options: Json): Promise<void> {
  const wasRunning = await stopDaemon(resolveHome());
  if (options.json) printJson({ running: false, was_running: wasRunning });
  else printLines([wasRunning ? 'notifier stopped' : 'notifier is not running']);
}

export async function reload(options: Json): Promise<void> {
  const result = await reloadNotifier(resolveHome());
  if (options.json) printJson(result);
  else printLines(describeNotifierReload(result));
}

export async function status(options: Json): Promise<void> {
  const home = resolveHome();
  const status = await daemonStatus(home);
  if (options.json) printJson(status);
  else printLines(formatStatus(home, status));
}

function formatStatus(home: string, status: NotifierStatus): string[] {
  const lines = [status.running ? `notifier running (pid ${status.pid}, up ${status.uptime_seconds}s)` : 'notifier is not running'];
  if (status.host) lines.push(`host ${status.host}, threads in ${status.store}`);
  if (configChangedSince(notifierConfigPath(home), status.config_sha256)) lines.push(`${notifierConfigPath(home)} changed since notifier loaded it - apply it with: notifier reload`);
  if (status.runs) lines.push(`runs: ${status.runs.running} running, ${status.runs.waiting} waiting (at most ${status.runs.limit} at once); ${status.runs.runners} warm runners`);
  lines.push(status.subscriptions.length ? 'subscriptions:' : 'subscriptions: none');
  for (const s of status.subscriptions) {
    const state =
      s.handler === null
        ? 'unreadable'
        : s.lease
          ? `running${s.lease.host ? ` on ${s.lease.host}` : ''} (pid ${s.lease.pid})`
          : s.failures > 0
            ? `failing (${s.failures}x, retry at ${s.retry_at})`
            : 'idle';
    lines.push(`  ${s.thread} ${s.consumer}: ${state}, pending ${s.pending}, progress ${s.progress}`);
    if (s.last_error) lines.push(`    last error: ${s.last_error}`);
  }
  lines.push(...formatTimers(status.timers));
  return lines;
}

function formatTimers(timers: TimerJson[]): string[] {
  if (timers.length === 0) return ['timers: none'];
  return ['timers:', ...timers.map((t) => `  ${t.id}: ${t.schedule}, next ${t.next_run_at ?? 'never'}, runs ${t.runs}${t.last_exit ? `, last ${t.last_exit}` : ''}: ${t.command}`)];
}

export async function timerAdd(options: Json & { id: string; cron?: string; every?: string; at?: string; in?: string; command?: string; message?: string }): Promise<void> {
  const at = options.in === undefined ? options.at : new Date(Date.now() + parseDuration(options.in, '--in')).toISOString();
  if (options.in !== undefined && options.at !== undefined) throw usageError('give --in or --at, not both', 'leave one out');
  const schedule = parseSchedule({ cron: options.cron, every: options.every, at });
  // In an agent's turn a timer is the conversation's reminder, set by the runtime once the command ends.
  const outbox = turnOutbox();
  if (outbox !== null) {
    if (options.command !== undefined || options.message === undefined) {
      throw usageError("in an agent's turn a timer sends a message, not a command: a command would run outside the sandbox", 'pass --message "what to be told" instead of --command');
    }
    if (!isValidId(options.id)) throw usageError(`invalid timer id ${JSON.stringify(options.id)}`, 'use lower-case letters, digits, _ and -');
    const request: TimerRequest = {
      id: options.id,
      ...(options.cron ? { cron: options.cron } : {}),
      ...(options.every ? { every: options.every } : {}),
      ...(at ? { at } : {}),
      message: options.message,
    };
    leaveRequest(outbox, TIMER_PREFIX, request);
    if (options.json) return printJson({ id: options.id, queued: true, schedule: formatSchedule(schedule) });
    return printLines([`timer ${options.id} (${formatSchedule(schedule)}) is set when this command ends; when it fires, this conversation's agent is told: ${options.message}`]);
  }
  if (options.command === undefined) throw usageError('--command is missing', '--message is for a timer an agent sets in a conversation; here give the command to run');
  const timer = await addTimer(resolveHome(), options.id, schedule, options.command);
  if (options.json) printJson(timer);
  else printLines([`added timer ${timer.id}: ${timer.schedule}, next ${timer.next_run_at ?? 'never'}`]);
}

export function timerList(options: Json): void {
  const timers = listTimers(resolveHome());
  if (options.json) printJson(timers);
  else printLines(formatTimers(timers));
}

export async function timerRemove(options: Json & { id: string }): Promise<void> {
  await removeTimer(resolveHome(), options.id);
  if (options.json) printJson({ id: options.id, removed: true });
  else printLines([`removed timer ${options.id}`]);
}
