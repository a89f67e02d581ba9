import type Database from 'better-sqlite3';
import { readdirSync, statSync, unlinkSync, type Dirent } from 'node:fs';
import { join } from 'node:path';
import { hasAgentThread, withAgentThread } from '../agent/threads.js';
import { FEED_NAMES, feedPath, xgwStatePath } from '../core/layout.js';
import { openSqlite } from '../core/sqlite.js';
import type { StoredThread } from '../thread/index.js';
import { forEachAgentThread } from './agent-threads.js';

/**
 * `theclaw prune`: removes what is safe to remove while the daemons run, and says what it freed.
 *
 * - rotated logs (`<name>-<YYYYMMDD-HHmmss>.log`, see rotating-file.ts) beyond the newest
 *   `keepLogs` of each log;
 * - xgw's delivery keys of complete deliveries older than the cut-off (a retry of a delivery
 *   comes within minutes, never after `olderThan`; incomplete ones are kept: they are work),
 *   mailbox messages that were read and are older than the cut-off, and expired pairing codes;
 * - thread events (every agent's inbox and conversations, and the feeds) older than the cut-off that every
 *   consumer of the thread has acknowledged, except the newest `keepEvents` of each thread, which
 *   stay as its recent history (Thread.prune): unacknowledged work is never removed; in the
 *   home's store, SQLite or PostgreSQL (where the files and WALs are only the home's own);
 * - then every database's WAL is checkpointed and truncated (`wal_checkpoint(TRUNCATE)`; a
 *   database a reader holds now keeps its WAL until the next time).
 */
export interface PruneOptions {
  olderThanMs: number;
  dryRun?: boolean;
  /** Rotated files kept of each log. Default: 5. */
  keepLogs?: number;
  /** Newest events kept of each thread, whatever their age. Default: 1,000. */
  keepEvents?: number;
  now?: number;
}

export interface PruneReport {
  dry_run: boolean;
  older_than: string;
  rotated_logs: { files: number; bytes: number };
  events: { threads: number; removed: number };
  xgw: { deliveries: number; mailbox: number; pairing_requests: number };
  wal: { files: number; bytes: number };
  freed_bytes: number;
}

export const DEFAULT_KEEP_LOGS = 5;
export const DEFAULT_KEEP_EVENTS = 1_000;
const ROTATED_LOG = /^(.+)-\d{8}-\d{6}(?:-\d+)?\.log$/;
/** A checkpoint waits this long for a busy writer, not the usual 10 s: it can wait for the next prune. */
const CHECKPOINT_BUSY_MS = 500;

export async function prune(home: string, options: PruneOptions, env: NodeJS.ProcessEnv = process.env): Promise<PruneReport> {
  const now = options.now ?? Date.now();
  const cutoff = new Date(now - options.olderThanMs).toISOString();
  const dryRun = options.dryRun ?? false;
  const files = walk(home);
  const rotated_logs = pruneLogs(files, options.keepLogs ?? DEFAULT_KEEP_LOGS, dryRun);
  const xgw = pruneGateway(xgwStatePath(home), cutoff, now, dryRun);
  const events = await pruneEvents(home, cutoff, options.keepEvents ?? DEFAULT_KEEP_EVENTS, dryRun, env);
  const wal = checkpoint(
    files.filter((file) => file.endsWith('.db')),
    dryRun,
  );
  return { dry_run: dryRun, older_than: cutoff, rotated_logs, xgw, events, wal, freed_bytes: rotated_logs.bytes + wal.bytes };
}

/** Old, acknowledged events of every agent thread and feed (a damaged thread is skipped: status names it). */
async function pruneEvents(home: string, cutoff: string, keep: number, dryRun: boolean, env: NodeJS.ProcessEnv): Promise<PruneReport['events']> {
  const report = { threads: 0, removed: 0 };
  const pruneThread = async (thread: StoredThread) => {
    const removed = await thread.prune({ before: cutoff, keep, dryRun });
    if (removed > 0) report.threads++;
    report.removed += removed;
  };
  await forEachAgentThread(home, { inbox: true }, ({ thread }) => pruneThread(thread), [], env);
  for (const name of FEED_NAMES) {
    if (await hasAgentThread(home, feedPath(home, name), env)) await withAgentThread(home, feedPath(home, name), pruneThread, env);
  }
  return report;
}

/** Every file under `dir`, not following symlinks. */
function walk(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return []; // removed meanwhile
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return walk(path);
    return entry.isFile() ? [path] : [];
  });
}

function pruneLogs(files: readonly string[], keep: number, dryRun: boolean): { files: number; bytes: number } {
  const byLog = new Map<string, string[]>();
  for (const file of files) {
    const name = file.slice(file.lastIndexOf('/') + 1);
    const match = ROTATED_LOG.exec(name);
    if (!match) continue;
    const log = join(file, '..', match[1]!);
    byLog.set(log, [...(byLog.get(log) ?? []), file]);
  }
  let removed = 0;
  let bytes = 0;
  for (const rotations of byLog.values()) {
    // The stamp in the name orders them (the -n suffix of the same second sorts after).
    for (const file of rotations.sort().reverse().slice(keep)) {
      try {
        const size = statSync(file).size;
        if (!dryRun) unlinkSync(file);
        removed++;
        bytes += size;
      } catch {
        // removed meanwhile
      }
    }
  }
  return { files: removed, bytes };
}

function pruneGateway(file: string, cutoff: string, now: number, dryRun: boolean): PruneReport['xgw'] {
  const none = { deliveries: 0, mailbox: 0, pairing_requests: 0 };
  if (!exists(file)) return none;
  const db = openSqlite(file);
  try {
    const tables = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
    const statements = {
      deliveries: tables.has('deliveries') ? 'FROM deliveries WHERE complete = 1 AND updated_at < ?' : null,
      mailbox: tables.has('mailbox') ? 'FROM mailbox WHERE seen = 1 AND created_at < ?' : null,
      pairing_requests: tables.has('pairing_requests') ? 'FROM pairing_requests WHERE expires_at < ?' : null,
    };
    const params = { deliveries: cutoff, mailbox: cutoff, pairing_requests: now };
    // One transaction: xgw writes meanwhile wait for it (busy_timeout), never see half of it.
    return db
      .transaction(() => {
        const counts = { ...none };
        for (const [table, where] of Object.entries(statements) as [keyof typeof none, string | null][]) {
          if (where === null) continue;
          counts[table] = dryRun ? (db.prepare(`SELECT COUNT(*) ${where}`).pluck().get(params[table]) as number) : db.prepare(`DELETE ${where}`).run(params[table]).changes;
        }
        return counts;
      })
      .immediate();
  } finally {
    db.close();
  }
}

function checkpoint(databases: readonly string[], dryRun: boolean): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const file of databases) {
    const before = sizeOf(`${file}-wal`);
    if (before === 0) continue;
    if (dryRun) {
      files++;
      bytes += before;
      continue;
    }
    let db: Database.Database | undefined;
    try {
      db = openSqlite(file);
      db.pragma(`busy_timeout = ${CHECKPOINT_BUSY_MS}`);
      db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      continue; // damaged, or busy: status and doctor report the first, the next prune gets the second
    } finally {
      db?.close();
    }
    const freed = before - sizeOf(`${file}-wal`);
    if (freed > 0) {
      files++;
      bytes += freed;
    }
  }
  return { files, bytes };
}

function sizeOf(file: string): number {
  return statSync(file, { throwIfNoEntry: false })?.size ?? 0;
}

function exists(file: string): boolean {
  return statSync(file, { throwIfNoEntry: false }) !== undefined;
}
