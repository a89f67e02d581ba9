import Database from 'better-sqlite3';
import { errnoCode } from './errors.js';
import { withStoragePath } from './storage-error.js';

const BUSY_TIMEOUT_MS = 10_000;

/**
 * Opens a SQLite file the way every tool shares one: several processes at once (pushers,
 * handlers, daemons), so waiting for a lock instead of failing, WAL so readers never block the
 * writer, and `synchronous = NORMAL` (durable at each checkpoint; a power cut can lose the last
 * transactions but never corrupts the file). A full or read-only disk is a ClawError naming the
 * file (see storage-error.ts).
 */
export function openSqlite(file: string): Database.Database {
  return withStoragePath(file, () => {
    const db = new Database(file);
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      enableWal(db);
      db.pragma('synchronous = NORMAL');
      return db;
    } catch (error) {
      db.close();
      throw error;
    }
  });
}

/**
 * Switching a new file to WAL needs it to itself, and SQLite answers SQLITE_BUSY at once instead
 * of calling the busy handler when another process is opening the same new file. The mode is
 * stored in the file, so this only waits while a file is being created.
 */
function enableWal(db: Database.Database): void {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      if (db.pragma('journal_mode', { simple: true }) !== 'wal') db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (errnoCode(error) !== 'SQLITE_BUSY' || Date.now() > deadline) throw error;
      pauseSync(5 + Math.random() * 10);
    }
  }
}

/** Blocks this thread for `ms`: a wait for another process's hold on a file, where the caller is synchronous (better-sqlite3). */
export function pauseSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
