import { accessSync, constants, existsSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { ClawError, errnoCode, isClawError, type ErrorKind } from './errors.js';

/**
 * Storage failures, classified in one place so that every tool says the same thing about them: a
 * full disk (`ENOSPC`, `EDQUOT`, SQLite's `SQLITE_FULL`), a read-only data directory (`EROFS`,
 * `SQLITE_READONLY*`, and `EACCES`/`EPERM`: not writable by this user) and a failing disk (`EIO`,
 * `SQLITE_IOERR*`). Classified by error code, never by message text.
 *
 * SQLite reports a full disk at open as `SQLITE_IOERR_SHMSIZE` (it cannot grow the `-shm` file)
 * and a read-only one as `SQLITE_CANTOPEN` (it cannot create it), and Node's recursive `mkdir` a
 * read-only one as `ENOENT`: for those the file system of the path is asked whether it is full or
 * read-only.
 */
const DISK_FULL = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);
const READ_ONLY = new Set(['EROFS']);
const DENIED = new Set(['EACCES', 'EPERM']);
const STORAGE_KINDS: ReadonlySet<ErrorKind> = new Set(['disk_full', 'read_only']);

type Failure = 'disk_full' | 'read_only' | 'denied' | 'io' | 'no_place';

/**
 * The ClawError for a storage failure, or undefined when `error` is none. `path` names the file
 * that was being written (a Node error's own `path` is used when none is given). A ClawError is
 * returned as it is when it is a storage failure (or caused by one), so wrapping twice keeps the
 * innermost path.
 */
export function storageError(error: unknown, path?: string): ClawError | undefined {
  if (isClawError(error)) return STORAGE_KINDS.has(error.kind) || storageError(error.cause) ? error : undefined;
  const code = errnoCode(error);
  if (code === undefined) return undefined;
  const where = path ?? nodePath(error);
  const failure = classify(code, where, (error as { syscall?: unknown }).syscall);
  if (failure === undefined) return undefined;
  const at = where ? ` (writing ${where})` : '';
  switch (failure) {
    case 'disk_full':
      return new ClawError('disk_full', `the disk is full${at}`, {
        suggestion: `free space on the disk that holds ${where ? 'it' : '$THECLAW_HOME'} and retry`,
        cause: error,
      });
    case 'read_only':
      return new ClawError('read_only', `the data directory is read-only${at}`, {
        suggestion: 'remount it read-write (or point THECLAW_HOME at a writable directory) and retry',
        cause: error,
      });
    case 'denied':
      return new ClawError('read_only', `permission denied${where ? ` on ${where}` : ''}`, {
        suggestion: `give the user running it write access to ${where ? 'that path' : '$THECLAW_HOME'} and retry`,
        cause: error,
      });
    case 'no_place':
      return new ClawError(
        'io',
        `${where ?? 'a path'} cannot be made: ${code === 'ENOTDIR' ? 'a part of it is a file, not a directory' : 'its directory takes no new entries (a system file system such as /proc?)'}`,
        {
          suggestion: 'point THECLAW_HOME (or the path given) at a directory on a normal disk',
          cause: error,
        },
      );
    case 'io':
      return new ClawError('io', `a disk read or write failed (${where ? `${where}: ` : ''}${code})`, {
        suggestion: 'check the disk (free space, the kernel log) and retry',
        cause: error,
      });
  }
}

/** Whether `error` is a storage failure: the data is not the problem, and a retry may succeed. */
export function isStorageError(error: unknown): boolean {
  return storageError(error) !== undefined;
}

/** Runs `fn`; a storage failure it throws becomes the ClawError naming `path`. */
export function withStoragePath<T>(path: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw storageError(error, path) ?? error;
  }
}

function classify(code: string, path: string | undefined, syscall: unknown): Failure | undefined {
  if (DISK_FULL.has(code)) return 'disk_full';
  if (READ_ONLY.has(code) || code.startsWith('SQLITE_READONLY')) return path && probe(path) === 'denied' ? 'denied' : 'read_only';
  // Not a file's: a program that may not be run, a process that may not be signalled.
  if (DENIED.has(code)) return typeof syscall === 'string' && (syscall.startsWith('spawn') || syscall === 'kill') ? undefined : 'denied';
  if (code === 'EIO' || code.startsWith('SQLITE_IOERR')) return (path && probe(path)) || 'io';
  if (code === 'SQLITE_CANTOPEN') return path ? probe(path) : undefined;
  // mkdir says ENOENT in an existing directory that takes no new ones (ensureDir makes every
  // missing parent first), and a read-only file system may say it so too.
  if (code === 'ENOENT' && syscall === 'mkdir') return path ? (probe(path) ?? (existsSync(dirname(path)) ? 'no_place' : undefined)) : undefined;
  if (code === 'ENOTDIR') return 'no_place';
  return undefined;
}

/** Asks the file system holding `path` whether it is full or not writable. */
function probe(path: string): Failure | undefined {
  let dir = dirname(path);
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  try {
    accessSync(dir, constants.W_OK);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'EROFS') return 'read_only';
    if (code !== undefined && DENIED.has(code)) return 'denied';
  }
  try {
    // A pseudo file system (/proc, /sys) has no blocks at all: it is not full, it stores nothing.
    const space = statfsSync(dir);
    if (space.blocks > 0 && space.bavail === 0) return 'disk_full';
  } catch {
    // not answerable: the error stays what it was
  }
  return undefined;
}

function nodePath(error: unknown): string | undefined {
  const path = (error as { path?: unknown } | null)?.path;
  return typeof path === 'string' ? path : undefined;
}

/**
 * Whether `error` says the database file itself is damaged (written over, truncated, not SQLite):
 * no retry helps, only moving the file away or restoring it. Looked for in the causes too, since
 * a ClawError may wrap SQLite's.
 */
export function isDamagedDatabase(error: unknown): boolean {
  for (let at = error, depth = 0; at && depth < 5; at = (at as { cause?: unknown }).cause, depth++) {
    if (isClawError(at, 'damaged')) return true;
    const code = errnoCode(at);
    if (code === 'SQLITE_NOTADB' || code?.startsWith('SQLITE_CORRUPT')) return true;
  }
  return false;
}
