import { join, relative } from 'node:path';
import { isDamagedDatabase } from '../core/storage-error.js';
import type { AgentDir } from './agent-dir.js';

/**
 * A conversation thread whose events.db is damaged (written over, truncated). It stops only its
 * own conversation: its messages are acknowledged unanswered with this in the agent log, every
 * other conversation goes on, and `agent status`, `theclaw status` and `doctor` name it until it
 * is moved away; the next message of that conversation then starts it afresh.
 */
export interface DamagedThread {
  /** The thread, relative to the agent's directory. */
  thread: string;
  /** The damaged database file. */
  file: string;
  /** What SQLite said of it (its first line). */
  error: string;
  /** The command that moves it away, out of the agent's threads, so that it can still be rescued. */
  fix: string;
}

/** The damage `error` shows in the thread at `path`, or null when it is some other failure. */
export function damagedThread(dir: AgentDir, path: string, error: unknown): DamagedThread | null {
  if (!isDamagedDatabase(error)) return null;
  const thread = relative(dir.root, path);
  const aside = join(dir.root, `damaged-${relative(dir.threads, path).replaceAll('/', '-')}`);
  return {
    thread,
    file: join(path, 'events.db'),
    error: rootMessage(error).split('\n', 1)[0] ?? '',
    fix: `move it away to start the conversation afresh: mv ${JSON.stringify(path)} ${JSON.stringify(aside)}`,
  };
}

/** One line for logs and status: what is damaged and what to do. */
export function describeDamage(damaged: DamagedThread): string {
  return `thread ${damaged.thread} is damaged: ${damaged.file} (${damaged.error}) - ${damaged.fix}`;
}

/** SQLite's own words, under the ClawError that names the file. */
function rootMessage(error: unknown): string {
  let at = error as { cause?: unknown; message?: unknown };
  while (at.cause && typeof at.cause === 'object') at = at.cause as typeof at;
  return typeof at.message === 'string' ? at.message : String(error);
}
