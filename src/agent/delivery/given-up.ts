import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { isClawError } from '../../core/errors.js';
import { resolveHomeRef } from '../../core/layout.js';
import { openSqlite } from '../../core/sqlite.js';
import { agentDir, listAgentIds, type AgentDir } from '../agent-dir.js';
import { FeedWriter, type ErrorFeedEntry } from '../accounting/index.js';
import { threadIdOfPath } from '../router.js';

/**
 * Replies delivery gave up on (`deliver.max_attempts`): each is told to the maintainer (an entry
 * in `feeds/errors`, which its sweep reports to the owner once) and kept in the agent's state.db
 * until `theclaw retry` sends it again. Both are written before the reply is acknowledged, and
 * both are idempotent, so a deliver process killed in between repeats them without doubling.
 */
const TABLE = 'CREATE TABLE IF NOT EXISTS given_up_replies (thread TEXT NOT NULL, event_id INTEGER NOT NULL, error TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (thread, event_id))';

export interface GivenUpReply {
  /** The conversation thread, relative to the home. */
  thread: string;
  event_id: number;
  error: string;
  at: string;
}

/** Records that delivery gave up on `eventId` of the thread `ref` (relative to the home) after `attempts`. */
export async function recordGivenUp(home: string, dir: AgentDir, ref: string, eventId: number, attempts: number, error: unknown): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  const db = openSqlite(dir.state);
  try {
    db.exec(TABLE);
    db.prepare('INSERT OR IGNORE INTO given_up_replies VALUES (?, ?, ?, ?)').run(ref, eventId, message.slice(0, 1000), new Date().toISOString());
  } finally {
    db.close();
  }
  const feeds = new FeedWriter(home, dir.id);
  try {
    const entry: ErrorFeedEntry = {
      agent: dir.id,
      thread: threadIdOfPath(dir, resolveHomeRef(home, ref)) ?? basename(ref),
      stage: 'deliver',
      kind: isClawError(error) ? error.kind : 'unknown',
      status: (isClawError(error) ? error.status : undefined) ?? null,
      // Ours: the platform's words stay in the conversation's error record and the log.
      reason: `the reply was not delivered after ${attempts} attempt(s)`,
    };
    await feeds.append('errors', 'error', entry, `deliver:${ref}#${eventId}`);
  } finally {
    await feeds.close();
  }
}

/** The replies of every agent that delivery gave up on and no retry has sent yet, oldest first. */
export function givenUpReplies(home: string): { dir: AgentDir; reply: GivenUpReply }[] {
  return listAgentIds(home).flatMap((id) => {
    const dir = agentDir(home, id);
    if (!existsSync(dir.state)) return [];
    const db = openSqlite(dir.state);
    try {
      db.exec(TABLE);
      return (db.prepare('SELECT * FROM given_up_replies ORDER BY at, event_id').all() as GivenUpReply[]).map((reply) => ({ dir, reply }));
    } finally {
      db.close();
    }
  });
}

/** Forgets a given-up reply once it was sent again. */
export function forgetGivenUp(dir: AgentDir, reply: GivenUpReply): void {
  const db = openSqlite(dir.state);
  try {
    db.prepare('DELETE FROM given_up_replies WHERE thread = ? AND event_id = ?').run(reply.thread, reply.event_id);
  } finally {
    db.close();
  }
}
