import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDir } from '../../core/home.js';

/**
 * The threads that have subscriptions, so that notifier's sweep knows where to look
 * (`$THECLAW_HOME/notifier/threads/`). One small file per thread, named by a hash of its path and
 * written atomically (temp file + rename), so concurrent subscribers never corrupt the registry
 * and a reader never sees half a file.
 */
export function registryDir(home: string): string {
  return join(home, 'notifier', 'threads');
}

function entryPath(home: string, threadPath: string): string {
  return join(registryDir(home), `${createHash('sha256').update(threadPath).digest('hex').slice(0, 24)}.json`);
}

export function registerThread(home: string, threadPath: string): void {
  const file = entryPath(home, threadPath);
  if (existsSync(file)) return;
  ensureDir(registryDir(home));
  const temp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, JSON.stringify({ path: threadPath, registered_at: new Date().toISOString() }) + '\n');
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}

export function unregisterThread(home: string, threadPath: string): void {
  try {
    unlinkSync(entryPath(home, threadPath));
  } catch {
    // not registered
  }
}

/** Registered thread paths, in no particular order. */
export function listThreads(home: string): string[] {
  let names: string[];
  try {
    names = readdirSync(registryDir(home));
  } catch {
    return [];
  }
  const paths: string[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    try {
      const { path } = JSON.parse(readFileSync(join(registryDir(home), name), 'utf8')) as { path?: unknown };
      if (typeof path === 'string') paths.push(path);
    } catch {
      // removed meanwhile
    }
  }
  return paths;
}
