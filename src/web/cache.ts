import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { webCacheDir } from '../core/layout.js';
import { writeFileWhole } from '../core/whole-file.js';
import type { Page } from './types.js';

/**
 * `web fetch`'s cache: the same URL (and form, raw or read) within `cache_minutes` is answered
 * from disk. Per agent: in a turn it lives in the agent's workdir (`workdir/.cache/web`, which
 * the sandbox lets it write), else in `$THECLAW_HOME/web/cache`. Best effort: a cache that cannot
 * be read or written only means fetching again.
 */

export function cacheDir(home: string, env: NodeJS.ProcessEnv): string {
  const agentDir = env.THECLAW_AGENT_DIR?.trim();
  return agentDir ? join(agentDir, 'workdir', '.cache', 'web') : webCacheDir(home);
}

function entryFile(dir: string, url: string, raw: boolean): string {
  return join(
    dir,
    `${createHash('sha256')
      .update(JSON.stringify([url, raw]))
      .digest('hex')
      .slice(0, 32)}.json`,
  );
}

/** The whole page (before --max-chars) fetched less than `maxAgeMs` ago, if any. */
export function cachedPage(dir: string, url: string, raw: boolean, maxAgeMs: number, now = Date.now()): Page | undefined {
  try {
    const entry = JSON.parse(readFileSync(entryFile(dir, url, raw), 'utf8')) as { fetched_at: number; page: Page };
    if (typeof entry.fetched_at === 'number' && now - entry.fetched_at < maxAgeMs && entry.page?.url === url) return entry.page;
  } catch {
    // Missing or damaged: fetched again.
  }
  return undefined;
}

/** Keeps `page`, and removes the entries older than `maxAgeMs` (so the cache stays small). */
export function cachePage(dir: string, page: Page, raw: boolean, maxAgeMs: number, now = Date.now()): void {
  try {
    writeFileWhole(entryFile(dir, page.url, raw), JSON.stringify({ fetched_at: now, page }));
    for (const name of readdirSync(dir)) {
      const file = join(dir, name);
      if (now - statSync(file).mtimeMs > maxAgeMs) rmSync(file, { force: true });
    }
  } catch {
    // A read-only or full disk: the page is still answered.
  }
}
