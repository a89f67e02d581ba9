import type Database from 'better-sqlite3';
import { Cron } from 'croner';
import { dirname } from 'node:path';
import { splitCommand } from '../core/command.js';
import { openSqlite } from '../core/sqlite.js';
import { withStoragePath } from '../core/storage-error.js';
import { ClawError, usageError } from '../core/errors.js';
import { isValidId } from '../core/slug.js';
import { ensureDir } from '../core/home.js';
import { parseDuration } from '../core/duration.js';

export { parseDuration };
import { timersPath } from '../core/layout.js';

/**
 * Timers run a command on a schedule: a cron expression (through croner, not a hand-written
 * parser), a fixed interval, or once at a time. They live in `$THECLAW_HOME/notifier/timers.db`,
 * so `timer add` works while the daemon is down and timers survive restarts.
 */
export type Schedule = { kind: 'cron'; expr: string } | { kind: 'every'; ms: number } | { kind: 'at'; time: Date };

export interface Timer {
  id: string;
  schedule: Schedule;
  command: string;
  created_at: string;
  last_run_at: string | null;
  last_exit: string | null;
  runs: number;
  /** A one-shot (`at`) timer that has run. */
  done: boolean;
}

export interface TimerJson {
  id: string;
  schedule: string;
  command: string;
  created_at: string;
  last_run_at: string | null;
  last_exit: string | null;
  runs: number;
  next_run_at: string | null;
}

export function parseSchedule(spec: { cron?: string; every?: string; at?: string }): Schedule {
  const given = (['cron', 'every', 'at'] as const).filter((key) => spec[key] !== undefined);
  if (given.length !== 1) throw usageError('give exactly one of --cron, --every and --at', "e.g. --cron '*/5 * * * *', --every 30s or --at 2026-12-01T09:00:00Z");
  if (spec.cron !== undefined) {
    try {
      new Cron(spec.cron, { paused: true }).stop();
    } catch (error) {
      throw usageError(`invalid cron expression ${JSON.stringify(spec.cron)}: ${(error as Error).message}`, "use five fields (minute hour day month weekday), e.g. '0 9 * * 1-5'");
    }
    return { kind: 'cron', expr: spec.cron };
  }
  if (spec.every !== undefined) return { kind: 'every', ms: parseDuration(spec.every, '--every') };
  const time = new Date(spec.at!);
  if (Number.isNaN(time.getTime())) throw usageError(`invalid time ${JSON.stringify(spec.at)}`, 'give an ISO-8601 time such as 2026-12-01T09:00:00Z');
  return { kind: 'at', time };
}

export function formatSchedule(schedule: Schedule): string {
  switch (schedule.kind) {
    case 'cron':
      return `cron ${schedule.expr}`;
    case 'every':
      return `every ${schedule.ms / 1000}s`;
    case 'at':
      return `at ${schedule.time.toISOString()}`;
  }
}

/**
 * When the timer is due, counted from its last run (or its creation): a time in the past means it
 * is due now. Every kind keeps its rhythm across restarts, and runs missed while the daemon was
 * down collapse into one, because the run moves `last_run_at` to now. Null: it never runs again.
 */
export function dueAt(timer: Timer, now = new Date()): Date | null {
  const { schedule } = timer;
  // A last run "in the future" means the clock was stepped back: counting from it would hold
  // the timer back until the clock catches up (hours, for a clock that was an hour ahead).
  const from = new Date(Math.min(Date.parse(timer.last_run_at ?? timer.created_at), now.getTime()));
  switch (schedule.kind) {
    case 'cron': {
      const cron = new Cron(schedule.expr, { paused: true });
      const next = cron.nextRun(from);
      cron.stop();
      return next;
    }
    case 'every':
      return new Date(from.getTime() + schedule.ms);
    case 'at':
      return timer.done ? null : schedule.time;
  }
}

/** When the timer runs next, `now` if it is overdue, or null if it never will. */
export function nextRunAt(timer: Timer, now: Date): Date | null {
  const due = dueAt(timer, now);
  if (due === null || timer.schedule.kind === 'at') return due;
  return new Date(Math.max(due.getTime(), now.getTime()));
}

interface TimerRow {
  id: string;
  kind: Schedule['kind'];
  spec: string;
  command: string;
  created_at: string;
  last_run_at: string | null;
  last_exit: string | null;
  runs: number;
  done: number;
}

export class TimerStore {
  private readonly db: Database.Database;
  private readonly file: string;

  constructor(home: string) {
    this.file = timersPath(home);
    ensureDir(dirname(this.file));
    this.db = openSqlite(this.file);
    this.write(() =>
      this.db.exec(`CREATE TABLE IF NOT EXISTS timers (
      id TEXT PRIMARY KEY, kind TEXT NOT NULL, spec TEXT NOT NULL, command TEXT NOT NULL,
      created_at TEXT NOT NULL, last_run_at TEXT, last_exit TEXT, runs INTEGER NOT NULL DEFAULT 0,
      done INTEGER NOT NULL DEFAULT 0)`),
    );
  }

  add(id: string, schedule: Schedule, command: string): Timer {
    if (!isValidId(id)) throw usageError(`invalid timer id ${JSON.stringify(id)}`, 'use lower-case letters, digits, _ and - (at most 63)');
    splitCommand(command);
    const spec = schedule.kind === 'cron' ? schedule.expr : schedule.kind === 'every' ? String(schedule.ms) : schedule.time.toISOString();
    const inserted = this.write(
      () =>
        this.db.prepare('INSERT INTO timers (id, kind, spec, command, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING').run(id, schedule.kind, spec, command, new Date().toISOString())
          .changes,
    );
    if (inserted === 0) throw new ClawError('conflict', `timer ${id} exists`, { suggestion: `remove it first: notifier timer remove --id ${id}` });
    return this.get(id)!;
  }

  remove(id: string): void {
    if (this.write(() => this.db.prepare('DELETE FROM timers WHERE id = ?').run(id).changes) === 0) {
      throw new ClawError('not_found', `no timer ${id}`, { suggestion: 'see the timers with: notifier timer list' });
    }
  }

  get(id: string): Timer | undefined {
    const row = this.db.prepare('SELECT * FROM timers WHERE id = ?').get(id) as TimerRow | undefined;
    return row && toTimer(row);
  }

  list(): Timer[] {
    return (this.db.prepare('SELECT * FROM timers ORDER BY id').all() as TimerRow[]).map(toTimer);
  }

  /** Records a run as started; a one-shot timer is done from then on, whatever its exit. */
  markRun(id: string, at: Date): void {
    this.write(() => this.db.prepare("UPDATE timers SET last_run_at = ?, runs = runs + 1, done = (kind = 'at') WHERE id = ?").run(at.toISOString(), id));
  }

  markExit(id: string, exit: string): void {
    this.write(() => this.db.prepare('UPDATE timers SET last_exit = ? WHERE id = ?').run(exit, id));
  }

  /** A full or read-only disk names timers.db. */
  private write<T>(fn: () => T): T {
    return withStoragePath(this.file, fn);
  }

  close(): void {
    this.db.close();
  }
}

function toTimer(row: TimerRow): Timer {
  const schedule: Schedule = row.kind === 'cron' ? { kind: 'cron', expr: row.spec } : row.kind === 'every' ? { kind: 'every', ms: Number(row.spec) } : { kind: 'at', time: new Date(row.spec) };
  return {
    id: row.id,
    schedule,
    command: row.command,
    created_at: row.created_at,
    last_run_at: row.last_run_at,
    last_exit: row.last_exit,
    runs: row.runs,
    done: row.done === 1,
  };
}

export function timerToJson(timer: Timer, now: Date = new Date()): TimerJson {
  return {
    id: timer.id,
    schedule: formatSchedule(timer.schedule),
    command: timer.command,
    created_at: timer.created_at,
    last_run_at: timer.last_run_at,
    last_exit: timer.last_exit,
    runs: timer.runs,
    next_run_at: nextRunAt(timer, now)?.toISOString() ?? null,
  };
}
