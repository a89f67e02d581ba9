import type Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { ClawError } from '../core/errors.js';
import { openSqlite, pauseSync } from '../core/sqlite.js';
import { isDamagedDatabase, withStoragePath } from '../core/storage-error.js';

const SCHEMA_VERSION = 1;

// AUTOINCREMENT keeps ids monotonic and never reused, even if the newest events were deleted.
const SCHEMA = `
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at TEXT NOT NULL,
  source TEXT NOT NULL,
  type TEXT NOT NULL,
  subtype TEXT,
  content TEXT NOT NULL,
  idempotency_key TEXT UNIQUE
);
CREATE INDEX events_type ON events(type, id);
CREATE TABLE consumers (
  consumer TEXT PRIMARY KEY,
  progress INTEGER NOT NULL DEFAULT 0,
  subscribed INTEGER NOT NULL DEFAULT 0,
  handler TEXT,
  filter TEXT,
  lease_pid INTEGER,
  lease_start INTEGER,
  lease_since TEXT,
  failures INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  retry_at INTEGER,
  updated_at TEXT NOT NULL
);
`;

export function dbPath(threadDir: string): string {
  return join(threadDir, 'events.db');
}

/** Opens a thread's database; `create` makes the schema (the caller made the directory). */
export function openDatabase(threadDir: string, create: boolean): Database.Database {
  const file = dbPath(threadDir);
  const opening = create ? 'create' : readingOpening(threadDir, file);
  let db: Database.Database | undefined;
  try {
    db = openSqlite(file);
    return withStoragePath(file, () => checkSchema(db!, threadDir, file, opening));
  } catch (error) {
    db?.close();
    throw isDamagedDatabase(error) ? damagedThread(threadDir, error) : error;
  }
}

/** How a reader opens the file: refused where there is none, else by its age. */
function readingOpening(threadDir: string, file: string): Exclude<Opening, 'create'> {
  // Read before opening it: opening a file without a schema writes its header (WAL), and its time.
  const modified = statSync(file, { throwIfNoEntry: false })?.mtimeMs;
  if (modified === undefined) {
    throw new ClawError('not_found', `${threadDir} is not a thread`, {
      suggestion: `create it with: thread init ${JSON.stringify(threadDir)}`,
    });
  }
  return Date.now() - modified < NEW_FILE_MS ? 'read new' : 'read old';
}

/**
 * A thread whose database is damaged: named with its file, and what to do. Never a suggestion to
 * delete: the file may still be rescued, so it is moved aside.
 */
export function damagedThread(threadDir: string, cause: unknown): ClawError {
  const file = dbPath(threadDir);
  return new ClawError('damaged', `the thread database ${file} is damaged (${(cause as Error).message})`, {
    suggestion: `move the thread away to start it afresh: mv ${JSON.stringify(threadDir)} ${JSON.stringify(`${threadDir}.damaged`)}`,
    cause,
  });
}

/**
 * How a thread's database is opened: to create its schema where it has none, or to read it, its
 * file made moments ago (its creator may still be making the schema) or earlier.
 */
type Opening = 'create' | 'read new' | 'read old';

/** How long a reader gives the creator of a new thread database to make its schema. */
const CREATOR_GRACE_MS = 1_500;
/** A database file without a schema that is older than this has no creator coming. */
const NEW_FILE_MS = 10_000;

/**
 * A thread another process is creating has no schema until its creator's transaction commits.
 * Taking the write lock (briefly) waits for a creator inside that transaction; a file made
 * moments ago is given a little longer, since its creator may not have begun that transaction yet
 * (on a busy machine it can be held up between making the file and its schema). Either way the
 * file is not mistaken for an empty or foreign one while it is being made.
 */
function awaitCreator(db: Database.Database, opening: Exclude<Opening, 'create'>, schemaless: () => boolean): void {
  const deadline = Date.now() + CREATOR_GRACE_MS;
  for (;;) {
    if (!schemaless()) return;
    db.transaction(() => {}).immediate();
    if (!schemaless() || opening === 'read old' || Date.now() > deadline) return;
    pauseSync(20);
  }
}

/** Creates the schema if asked, then checks that the file is a thread database of this version. */
function checkSchema(db: Database.Database, threadDir: string, file: string, opening: Opening): Database.Database {
  const create = opening === 'create';
  const readVersion = () => db.pragma('user_version', { simple: true }) as number;
  if (create && readVersion() === 0) {
    // Checked again under the write lock: two processes may create the same thread at once.
    db.transaction(() => {
      if (readVersion() !== 0) return;
      db.exec(SCHEMA);
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
  }
  const empty = () => (db.prepare('SELECT COUNT(*) FROM sqlite_master').pluck().get() as number) === 0;
  if (opening !== 'create') awaitCreator(db, opening, () => readVersion() === 0 && empty());
  const version = readVersion();
  if (version === 0 && !create && empty()) {
    throw new ClawError('not_found', `${threadDir} is not a thread (its database has no schema)`, {
      suggestion: `if nothing is creating it now, remove the empty ${file} and run: thread init ${JSON.stringify(threadDir)}`,
    });
  }
  if (version !== SCHEMA_VERSION) {
    throw new ClawError('invalid', `${file} has schema version ${version}, this thread tool knows ${SCHEMA_VERSION}`, {
      suggestion: version > SCHEMA_VERSION ? 'upgrade theclaw' : 'the file is not a thread database; restore it from a backup',
    });
  }
  return db;
}
