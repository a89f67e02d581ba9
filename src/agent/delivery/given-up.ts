import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { isClawError } from '../../core/errors.js';
import { deliveriesDir, resolveHomeRef } from '../../core/layout.js';
import { openSqlite } from '../../core/sqlite.js';
import { agentDir, listAgentIds } from '../agent-dir.js';
import { FeedWriter, type ErrorFeedEntry } from '../accounting/index.js';
import { threadIdOfPath } from '../router.js';
import { agentOfThread, type Sender } from './sender.js';

/**
 * Replies delivery gave up on (`deliver.max_attempts`): each is told to the maintainer (an entry
 * in `feeds/errors`, which its sweep reports to the owner once) and kept in the agent's state.db
 * (or, delivered by a host without the agent's directory, in that home's `deliveries/state.db`:
 * sender.ts) until `theclaw retry` on that host sends it again. Both are written before the reply is acknowledged, and
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
export async function recordGivenUp(home: string, sender: Sender, ref: string, eventId: number, attempts: number, error: unknown, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  const db = openSqlite(sender.state);
  try {
    db.exec(TABLE);
    db.prepare('INSERT OR IGNORE INTO given_up_replies VALUES (?, ?, ?, ?)').run(ref, eventId, message.slice(0, 1000), new Date().toISOString());
  } finally {
    db.close();
  }
  const feeds = new FeedWriter(home, sender.id, env);
  try {
    const entry: ErrorFeedEntry = {
      agent: sender.id,
      thread: threadIdOfPath(sender.dir, resolveHomeRef(home, ref)) ?? basename(ref),
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

/** A given-up reply, with its agent and the file that keeps it. */
export interface GivenUpEntry {
  agent: string;
  state: string;
  reply: GivenUpReply;
}

/**
 * The replies that delivery here gave up on and no retry has sent yet, oldest first per file: those
 * of every agent of this home, then those of agents whose directory is on another host.
 */
export function givenUpReplies(home: string): GivenUpEntry[] {
  const agents = listAgentIds(home).flatMap((id) => readGivenUp(agentDir(home, id).state).map((reply) => ({ agent: id, state: agentDir(home, id).state, reply })));
  const elsewhere = join(deliveriesDir(home), 'state.db');
  return [...agents, ...readGivenUp(elsewhere).map((reply) => ({ agent: agentOfThread(resolveHomeRef(home, reply.thread)), state: elsewhere, reply }))];
}

function readGivenUp(state: string): GivenUpReply[] {
  if (!existsSync(state)) return [];
  const db = openSqlite(state);
  try {
    db.exec(TABLE);
    return db.prepare('SELECT * FROM given_up_replies ORDER BY at, event_id').all() as GivenUpReply[];
  } finally {
    db.close();
  }
}

/** Forgets a given-up reply, kept in `state`, once it was sent again. */
export function forgetGivenUp(state: string, reply: GivenUpReply): void {
  const db = openSqlite(state);
  try {
    db.prepare('DELETE FROM given_up_replies WHERE thread = ? AND event_id = ?').run(reply.thread, reply.event_id);
  } finally {
    db.close();
  }
}
