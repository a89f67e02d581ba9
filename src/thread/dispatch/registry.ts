import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { writeFileWhole } from '../../core/whole-file.js';
import { homeRef, registryDir, resolveHomeRef } from '../../core/layout.js';

/**
 * The threads that have subscriptions, so that notifier's sweep knows where to look
 * (`$THECLAW_HOME/notifier/threads/`). One small file per thread, named by a hash of its path and
 * written atomically (temp file + rename), so concurrent subscribers never corrupt the registry
 * and a reader never sees half a file. A thread in the home is written relative to it (layout.ts
 * homeRef), so a moved or copied home finds its own threads.
 */
function entryPath(home: string, ref: string): string {
  return join(registryDir(home), `${createHash('sha256').update(ref).digest('hex').slice(0, 24)}.json`);
}

export function registerThread(home: string, threadPath: string): void {
  const ref = homeRef(home, threadPath);
  const file = entryPath(home, ref);
  if (existsSync(file)) return;
  writeEntry(file, { path: ref, registered_at: new Date().toISOString() });
}

function writeEntry(file: string, entry: { path: string; registered_at: string }): void {
  writeFileWhole(file, JSON.stringify(entry) + '\n');
}

export function unregisterThread(home: string, threadPath: string): void {
  try {
    unlinkSync(entryPath(home, homeRef(home, threadPath)));
  } catch {
    // not registered
  }
}

/** Registered thread paths (absolute), in no particular order. */
export function listThreads(home: string): string[] {
  let names: string[];
  try {
    names = readdirSync(registryDir(home));
  } catch {
    return [];
  }
  const paths = new Set<string>();
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    try {
      const entry = JSON.parse(readFileSync(join(registryDir(home), name), 'utf8')) as { path?: unknown; registered_at?: unknown };
      if (typeof entry.path !== 'string') continue;
      const path = resolveHomeRef(home, entry.path);
      if (isAbsolute(entry.path)) rewriteOldEntry(home, name, path, entry.registered_at);
      paths.add(path);
    } catch {
      // removed meanwhile
    }
  }
  return [...paths];
}

/**
 * An entry an older version wrote with an absolute path in the home (or in the home at its
 * place before a move): written again as the home's own, so that the next subscriber's and
 * unsubscriber's names for it match. Best effort: it is read the same way until then.
 */
function rewriteOldEntry(home: string, name: string, path: string, registeredAt: unknown): void {
  const ref = homeRef(home, path);
  if (isAbsolute(ref)) return; // a thread outside the home: absolute is what it is
  try {
    const file = entryPath(home, ref);
    const old = join(registryDir(home), name);
    if (file === old) return; // not an older version's: its name is the home's own
    if (!existsSync(file)) writeEntry(file, { path: ref, registered_at: typeof registeredAt === 'string' ? registeredAt : new Date().toISOString() });
    rmSync(old, { force: true });
  } catch {
    // a read-only home: the entry stays as it was, and is resolved again next time
  }
}
