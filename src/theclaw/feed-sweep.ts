import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import type * as z from 'zod/mini';
import { ensureDir } from '../core/home.js';
import { feedPath, type FeedName } from '../core/layout.js';
import { openSqlite } from '../core/sqlite.js';
import { REPORTS_AGENT } from '../agent/identity.js';
import { placedElsewhere } from '../agent/placement.js';
import { hasAgentThread, withAgentThread } from '../agent/threads.js';
import type { ThreadEvent } from '../thread/index.js';

/**
 * What the system agents' sweeps share (maintainer.ts, warden.ts): reading a feed, and incidents.
 *
 * A sweep reads a feed as a consumer of its thread: what is new since its last sweep, acknowledged
 * once handled (the owner told), so that `theclaw prune` keeps what a sweep has yet to read. A sweep
 * that dies or fails before acknowledging reads the same entries again; what it tells the owner carries the entry's
 * id as idempotency key (tellOwnerOf), so nothing is told twice. The feed is read in the home's
 * store (SQLite or PostgreSQL), as the agents append to it.
 */
const BATCH = 500;

export interface FeedRead {
  read: number;
  /** Entries that are not what the feed holds (written by another version?), passed over. */
  skipped: number;
}

export async function readFeed<T>(
  home: string,
  feed: FeedName,
  consumer: string,
  schema: z.ZodMiniType<T>,
  handle: (entry: T, event: ThreadEvent) => void | Promise<void>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<FeedRead> {
  const path = feedPath(home, feed);
  const result: FeedRead = { read: 0, skipped: 0 };
  if (!(await hasAgentThread(home, path, env))) return result;
  return withAgentThread(
    home,
    path,
    async (thread) => {
      for (;;) {
        const batch = await thread.pop(consumer, { limit: BATCH });
        if (batch.length === 0) return result;
        for (const event of batch) {
          const entry = parseEntry(schema, event.content);
          if (entry === undefined) result.skipped++;
          else await handle(entry, event);
        }
        await thread.ack(consumer, batch.at(-1)!.id);
        result.read += batch.length;
      }
    },
    env,
  );
}

/**
 * Whether the feed has entries its consumer has yet to read: a look at the thread alone, so that
 * a sweep on a timer with nothing to do does not load what reviewing would need.
 */
export async function hasNew(home: string, feed: FeedName, consumer: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const path = feedPath(home, feed);
  if (!(await hasAgentThread(home, path, env))) return false;
  return withAgentThread(home, path, async (thread) => (await thread.peek({ afterId: (await thread.consumer(consumer))?.progress ?? 0, limit: 1 })).length > 0, env);
}

/**
 * Whether the sweeps run on this host: the one the reporting agent (admin) is placed on, whose
 * directory telling the owner needs. Every host's `theclaw up` sets the sweeps' timers; on a store
 * shared by hosts the others pass, rather than read the feed and fail to tell. SQLite: always.
 */
export async function sweepsHere(home: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  return (await placedElsewhere(home, REPORTS_AGENT, env)) === null;
}

function parseEntry<T>(schema: z.ZodMiniType<T>, content: string): T | undefined {
  try {
    const parsed = schema.safeParse(JSON.parse(content));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** An incident with nothing new for this long is over; the next occurrence opens another. */
const INCIDENT_GAP_MS = 60 * 60_000;

/**
 * Occurrences grouped into incidents by a key (the maintainer's: an agent and a kind of failure;
 * the warden's: an agent and a dangerous command), so that the owner hears of each once while it
 * goes on. Kept in a SQLite file of the sweep's own.
 */
export class Incidents {
  private readonly db: Database.Database;

  constructor(file: string) {
    ensureDir(dirname(file));
    this.db = openSqlite(file);
    this.db.exec('CREATE TABLE IF NOT EXISTS incidents (key TEXT PRIMARY KEY, first_at TEXT NOT NULL, last_at TEXT NOT NULL, count INTEGER NOT NULL)');
  }

  /**
   * An occurrence of `key` at `at` (ISO): when it opens an incident, `tell` is awaited first and
   * the incident stored after, so a sweep that dies or fails in between tells again (idempotently)
   * rather than never; returns whether it opened one. An occurrence of an open incident is counted.
   */
  async occur(key: string, at: string, tell: () => Promise<void>): Promise<boolean> {
    const open = this.db.prepare('SELECT last_at FROM incidents WHERE key = ?').get(key) as { last_at: string } | undefined;
    if (open && Date.parse(at) - Date.parse(open.last_at) < INCIDENT_GAP_MS) {
      this.db.prepare('UPDATE incidents SET last_at = max(last_at, ?), count = count + 1 WHERE key = ?').run(at, key);
      return false;
    }
    await tell();
    this.db.prepare('INSERT OR REPLACE INTO incidents VALUES (?, ?, ?, 1)').run(key, at, at);
    return true;
  }

  close(): void {
    this.db.close();
  }
}
