import { printJson, printLines } from '../core/cli.js';
import { resolveHome } from '../core/home.js';
import { addTimer, daemonStatus, listTimers, removeTimer, startDaemon, stopDaemon } from './control.js';
import { daemonLogFile } from '../core/daemon.js';
import { runNotifier } from './daemon.js';
import { parseSchedule, type TimerJson } from './timers.js';
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

export async function status(options: Json): Promise<void> {
  const status = await daemonStatus(resolveHome());
  if (options.json) printJson(status);
  else printLines(formatStatus(status));
}

function formatStatus(status: NotifierStatus): string[] {
  const lines = [status.running ? `notifier running (pid ${status.pid}, up ${status.uptime_seconds}s)` : 'notifier is not running'];
  if (status.runs) lines.push(`runs: ${status.runs.running} running, ${status.runs.waiting} waiting (at most ${status.runs.limit} at once); ${status.runs.runners} warm runners`);
  lines.push(status.subscriptions.length ? 'subscriptions:' : 'subscriptions: none');
  for (const s of status.subscriptions) {
    const state = s.handler === null ? 'unreadable' : s.lease ? `running (pid ${s.lease.pid})` : s.failures > 0 ? `failing (${s.failures}x, retry at ${s.retry_at})` : 'idle';
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

export async function timerAdd(options: Json & { id: string; cron?: string; every?: string; at?: string; command: string }): Promise<void> {
  const timer = await addTimer(resolveHome(), options.id, parseSchedule(options), options.command);
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
