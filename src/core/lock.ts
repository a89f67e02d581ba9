import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { ClawError, errnoCode } from './errors.js';
import { identify, isAlive, type ProcessIdentity } from './process.js';
import { withStoragePath } from './storage-error.js';

/** What a lock file holds. */
export interface LockHolder extends ProcessIdentity {
  acquired_at: string;
}

export interface Lock {
  readonly path: string;
  readonly holder: LockHolder;
  /** Removes the lock file if it is still this lock's. Safe to call twice. */
  release(): void;
}

export type LockAttempt = { acquired: true; lock: Lock } | { acquired: false; holder: LockHolder };

// A reclaim guard older than this belongs to a process that died while reclaiming.
const STALE_GUARD_MS = 5_000;

/**
 * Takes the lock, waiting (polling) while a live process holds it, at most `timeoutMs`; then a
 * `timeout` error naming the holder and `what` the lock guards.
 */
export async function waitForLock(path: string, what: string, timeoutMs: number): Promise<Lock> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const attempt = tryLock(path);
    if (attempt.acquired) return attempt.lock;
    if (Date.now() >= deadline) {
      throw new ClawError('timeout', `${what} (pid ${attempt.holder.pid}) has held ${path} for more than ${timeoutMs / 1000} s`, {
        suggestion: `wait for it to finish, or stop pid ${attempt.holder.pid}`,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Takes a pid-aware lock file. The file appears atomically with its full content (written to a
 * temp file, then hard-linked into place, which fails if the lock exists), so no reader ever sees
 * it half-written. A lock whose holder is dead is reclaimed; reclaiming happens under a second
 * guard file so that two processes reclaiming at once cannot delete a lock that a third process
 * has just taken.
 */
export function tryLock(path: string, pid: number = process.pid): LockAttempt {
  const holder: LockHolder = { ...identify(pid), acquired_at: new Date().toISOString() };
  const content = JSON.stringify({ ...holder, nonce: randomBytes(6).toString('hex') });
  const temp = `${path}.${pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    // Inside the try: a write that fails (a full disk) leaves no temp file behind either.
    withStoragePath(path, () => writeFileSync(temp, content, { mode: 0o600 }));
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        linkSync(temp, path);
        return { acquired: true, lock: createLock(path, holder, content) };
      } catch (error) {
        if (errnoCode(error) !== 'EEXIST') throw error;
      }
      const seen = readRaw(path);
      if (seen === null) continue; // released meanwhile
      const current = parseHolder(seen);
      if (current && isAlive(current)) return { acquired: false, holder: current };
      reclaim(path, seen);
    }
    throw new ClawError('conflict', `could not take the lock ${path}: it keeps changing hands`, {
      suggestion: 'try again in a moment',
    });
  } finally {
    unlinkQuietly(temp);
  }
}

/** Like `tryLock`, but a live holder is a `conflict` error naming `what` is locked. */
export function lock(path: string, what: string): Lock {
  const attempt = tryLock(path);
  if (attempt.acquired) return attempt.lock;
  throw new ClawError('conflict', `${what} is locked by running process ${attempt.holder.pid}`, {
    suggestion: `wait for it to finish, or stop process ${attempt.holder.pid}`,
  });
}

/** The live holder of a lock file, or null when it is free or its holder is dead. */
export function readLockHolder(path: string): LockHolder | null {
  const raw = readRaw(path);
  const holder = raw === null ? null : parseHolder(raw);
  return holder && isAlive(holder) ? holder : null;
}

/**
 * Whether a lock file is free (absent), held by a live process, or stale: left by a process that
 * died (or unreadable). A stale lock is reclaimed by the next taker; `theclaw doctor` reports it.
 */
export function lockState(path: string): 'free' | 'held' | 'stale' {
  const raw = readRaw(path);
  if (raw === null) return 'free';
  const holder = parseHolder(raw);
  return holder && isAlive(holder) ? 'held' : 'stale';
}

function createLock(path: string, holder: LockHolder, content: string): Lock {
  let released = false;
  return {
    path,
    holder,
    release() {
      if (released) return;
      released = true;
      if (readRaw(path) === content) unlinkQuietly(path);
    },
  };
}

function reclaim(path: string, staleContent: string): void {
  const guard = `${path}.reclaim`;
  try {
    writeFileSync(guard, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
    if (ageMs(guard) > STALE_GUARD_MS) unlinkQuietly(guard);
    return; // someone else is reclaiming; the caller tries again
  }
  try {
    if (readRaw(path) === staleContent) unlinkQuietly(path);
  } finally {
    unlinkQuietly(guard);
  }
}

function parseHolder(raw: string): LockHolder | null {
  try {
    const value = JSON.parse(raw) as Partial<LockHolder>;
    if (typeof value.pid !== 'number') return null;
    return {
      pid: value.pid,
      start: typeof value.start === 'number' ? value.start : null,
      acquired_at: String(value.acquired_at ?? ''),
    };
  } catch {
    return null; // not ours or damaged: treated as a dead holder
  }
}

function readRaw(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}
