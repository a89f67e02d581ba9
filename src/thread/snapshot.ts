import { accessSync, constants, copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { ClawError } from '../core/errors.js';
import { dbPath } from './db.js';

/**
 * A private copy of a thread's database, for reading a thread in a directory this process may
 * not write. Inside an agent's sandbox its own threads are read-only, and SQLite in WAL mode
 * cannot open a database there unless a writer holds it open (it would have to create the
 * `-shm` file). The database and its WAL are copied while neither changes; a copy during which
 * one did (a write, a checkpoint) is taken again.
 */
export interface ThreadSnapshot {
  /** A thread directory holding the copy. */
  dir: string;
  remove(): void;
}

const ATTEMPTS = 5;

/** Whether this process may write in the thread's directory (and so open it as it is). */
export function canWrite(threadDir: string): boolean {
  try {
    accessSync(threadDir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

export function snapshotThread(threadDir: string): ThreadSnapshot {
  const file = dbPath(threadDir);
  const files = [file, `${file}-wal`];
  const signature = () =>
    files
      .map((path) => {
        const stat = statSync(path, { throwIfNoEntry: false });
        return stat ? `${stat.size}:${stat.mtimeMs}` : '-';
      })
      .join(' ');
  const dir = mkdtempSync(join(tmpdir(), 'theclaw-thread-'));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const before = signature();
      for (const path of files) {
        const copy = join(dir, basename(path));
        rmSync(copy, { force: true });
        if (existsSync(path)) copyFileSync(path, copy);
      }
      if (signature() === before) return { dir, remove };
    }
  } catch (error) {
    remove();
    throw error;
  }
  remove();
  throw new ClawError('conflict', `${threadDir} kept changing while it was copied for reading`, { suggestion: 'try again in a moment' });
}
