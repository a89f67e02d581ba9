import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { HEARTBEAT_THREAD_ID, tellOwnerOf, type FeedEntry } from '../agent/index.js';
import { ensureDir } from '../core/home.js';
import { errorFeedPath, incidentsPath } from '../core/layout.js';
import { openSqlite } from '../core/sqlite.js';
import { openThread } from '../thread/index.js';

/**
 * The maintainer's sweep (`theclaw maintain`, on a notifier timer `theclaw up` registers): reads
 * what the agents appended to the error feed since its last sweep, groups it into incidents (one
 * agent, one kind of failure, one HTTP status, while it keeps happening within an hour), and
 * tells the owner once per incident, in their direct chat with admin — in words of its own, with
 * no model call: the model failing is exactly what it reports. Later errors of an open incident
 * are counted, not reported again.
 */
export const SWEEP_TIMER_ID = 'maintainer-sweep';
/** An incident with no new error for this long is over; the next error opens another. */
const INCIDENT_GAP_MS = 60 * 60_000;

export interface SweepResult {
  read: number;
  reported: string[];
}

export function sweep(home: string): SweepResult {
  const feedPath = errorFeedPath(home);
  if (!existsSync(join(feedPath, 'events.db'))) return { read: 0, reported: [] };
  ensureDir(dirname(incidentsPath(home)));
  const db = openSqlite(incidentsPath(home));
  const feed = openThread(feedPath, { home });
  try {
    db.exec(
      'CREATE TABLE IF NOT EXISTS cursor (id INTEGER NOT NULL); CREATE TABLE IF NOT EXISTS incidents (key TEXT PRIMARY KEY, first_at TEXT NOT NULL, last_at TEXT NOT NULL, count INTEGER NOT NULL)',
    );
    const after = (db.prepare('SELECT id FROM cursor').pluck().get() as number | undefined) ?? 0;
    const entries = feed.peek({ afterId: after, limit: 10_000 });
    const reported: string[] = [];
    for (const event of entries) {
      const entry = JSON.parse(event.content) as FeedEntry;
      const key = `${entry.agent}|${entry.stage}|${entry.kind}|${entry.status ?? ''}`;
      const open = db.prepare('SELECT first_at, last_at, count FROM incidents WHERE key = ?').get(key) as { first_at: string; last_at: string; count: number } | undefined;
      const at = event.created_at;
      if (open && Date.parse(at) - Date.parse(open.last_at) < INCIDENT_GAP_MS) {
        db.prepare('UPDATE incidents SET last_at = ?, count = count + 1 WHERE key = ?').run(at, key);
        continue;
      }
      db.prepare('INSERT OR REPLACE INTO incidents VALUES (?, ?, ?, 1)').run(key, at, at);
      const text = reportText(entry, at);
      if (tellOwnerOf(home, 'admin', text, 'error')) reported.push(text);
    }
    const last = entries.at(-1)?.id;
    if (last !== undefined) {
      db.prepare('DELETE FROM cursor').run();
      db.prepare('INSERT INTO cursor VALUES (?)').run(last);
    }
    return { read: entries.length, reported };
  } finally {
    feed.close();
    db.close();
  }
}

/** What the owner reads: what happened, where, since when, and what to do. */
export function reportText(entry: FeedEntry, at: string): string {
  const fix =
    entry.kind === 'auth'
      ? 'Check the provider key (its variable in the environment of theclaw up, or pai/config.yaml), then run: theclaw doctor.'
      : entry.kind === 'over_budget'
        ? `Raise budget in agents/${entry.agent}/config.yaml, or wait for tomorrow (UTC).`
        : `See: theclaw logs ${entry.agent} --since 1h, and run: theclaw doctor.`;
  const what = entry.thread === HEARTBEAT_THREAD_ID ? 'could not run its heartbeat' : `could not answer a message (conversation ${entry.thread})`;
  return `maintainer: ${entry.agent} ${what}: ${entry.reason}. ${fix} (first at ${at.slice(11, 19)} UTC; I report this once while it goes on.)`;
}
