import type Database from 'better-sqlite3';
import { openSqlite } from '../core/sqlite.js';
import type { AgentDir } from './agent-dir.js';

/**
 * The tasks an agent delegated (tasks.ts), in its state.db: what each asked, of whom, for which
 * of its conversations, and how it ended. A task ends once: every end is a change from `running`,
 * so the result, a timeout and a `/tasks stop` that meet settle on whichever came first.
 */
export type TaskState = 'running' | 'done' | 'failed' | 'timed_out' | 'stopped';

export interface TaskRow {
  id: string;
  /** The agent that works on it (the asker itself for `self`). */
  target: string;
  label: string | null;
  task: string;
  /** The asker's conversation (thread id) the result goes back into. */
  conversation: string;
  /** The message in that conversation the task was started for, whose sender hears the result. */
  asking_event: number | null;
  /** 1 for a task a person's conversation started, 2 for one a task started, … */
  depth: number;
  state: TaskState;
  started_at: string;
  ended_at: string | null;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS tasks (
  id TEXT PRIMARY KEY, target TEXT NOT NULL, label TEXT, task TEXT NOT NULL, conversation TEXT NOT NULL,
  asking_event INTEGER, depth INTEGER NOT NULL, state TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT)`;

export class TaskStore {
  private readonly db: Database.Database;

  constructor(dir: AgentDir) {
    this.db = openSqlite(dir.state);
    this.db.exec(SCHEMA);
  }

  /** Adds a task; false when one with its id is there already (a request taken twice). */
  add(row: Omit<TaskRow, 'state' | 'ended_at'>): boolean {
    const insert = this.db.prepare(
      `INSERT OR IGNORE INTO tasks (id, target, label, task, conversation, asking_event, depth, state, started_at)
       VALUES (@id, @target, @label, @task, @conversation, @asking_event, @depth, 'running', @started_at)`,
    );
    return insert.run(row).changes === 1;
  }

  get(id: string): TaskRow | undefined {
    return this.db.prepare('SELECT * FROM tasks WHERE id = ?').get(id) as TaskRow | undefined;
  }

  running(): number {
    return this.db.prepare("SELECT count(*) FROM tasks WHERE state = 'running'").pluck().get() as number;
  }

  /** Ends a running task; false when it had ended already. */
  end(id: string, state: Exclude<TaskState, 'running'>, at = new Date()): boolean {
    return this.db.prepare("UPDATE tasks SET state = ?, ended_at = ? WHERE id = ? AND state = 'running'").run(state, at.toISOString(), id).changes === 1;
  }

  /** The running tasks and the newest `recent` others, of one conversation or all, newest first. */
  list(options: { conversation?: string; recent?: number } = {}): TaskRow[] {
    const where = options.conversation === undefined ? '' : 'AND conversation = @conversation';
    return this.db
      .prepare(
        `SELECT * FROM (SELECT * FROM tasks WHERE state = 'running' ${where}
         UNION ALL SELECT * FROM (SELECT * FROM tasks WHERE state != 'running' ${where} ORDER BY started_at DESC LIMIT @recent))
         ORDER BY started_at DESC, id`,
      )
      .all({ recent: options.recent ?? 10, ...(options.conversation === undefined ? {} : { conversation: options.conversation }) }) as TaskRow[];
  }

  close(): void {
    this.db.close();
  }
}

/** Runs `fn` with the task store of `dir`, closed after. */
export function withTasks<T>(dir: AgentDir, fn: (store: TaskStore) => T): T {
  const store = new TaskStore(dir);
  try {
    return fn(store);
  } finally {
    store.close();
  }
}
