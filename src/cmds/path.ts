import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { ensureDir } from '../core/home.js';
import { pathIndexPath } from '../core/layout.js';
import type { Executable } from './types.js';
import { wellKnownDescription } from './well-known.js';

/**
 * The executables on PATH, with the system's one-line descriptions (`apropos`, man sections 1, 6
 * and 8). Listing ~2,000 files and running apropos takes ~100 ms, so the result is cached in
 * `$THECLAW_HOME/cmds/path-index.json`, keyed by the PATH value and the modification times of its
 * directories (installing or removing a command changes its directory's mtime). One slot: a
 * different PATH rebuilds and replaces it.
 */

const CACHE_VERSION = 1;

interface CachedExecutable {
  name: string;
  path: string;
  description: string;
}

interface CacheFile {
  version: number;
  path: string;
  /** mtimeMs of each absolute PATH directory, null when it does not exist. */
  dirs: Record<string, number | null>;
  executables: CachedExecutable[];
}

/** Reads descriptions for the found executables (name → path); returns name → description. */
export type DescriptionReader = (executables: ReadonlyMap<string, string>) => Map<string, string>;

export interface PathIndexOptions {
  home: string;
  /** The PATH value to index. */
  pathValue: string;
  warn: (message: string) => void;
  /** Default: `apropos -l .` when apropos is on this PATH; no descriptions otherwise. */
  readDescriptions?: DescriptionReader;
}

/**
 * The executables on PATH, first occurrence of a name winning, as shells resolve them. Curated
 * descriptions (well-known.ts) are applied on every read, so they are never stale in the cache.
 */
export function loadPathIndex(options: PathIndexOptions): Executable[] {
  const dirs = pathDirs(options.pathValue);
  const stamps = dirStamps(dirs);
  const file = pathIndexPath(options.home);
  let executables = readCache(file, options.pathValue, stamps);
  if (!executables) {
    executables = scanPath(dirs, options.readDescriptions ?? aproposDescriptions);
    writeCache(file, { version: CACHE_VERSION, path: options.pathValue, dirs: stamps, executables }, options.warn);
  }
  return executables.map(({ name, path, description }) => {
    const curated = wellKnownDescription(name);
    return curated === undefined ? { name, kind: 'executable' as const, description, path } : { name, kind: 'executable' as const, description: curated, path, curated: true };
  });
}

/** PATH's directories in order, without duplicates; relative entries (`.`, empty) are ignored, so the index never depends on the caller's working directory. */
export function pathDirs(pathValue: string): string[] {
  return [...new Set(pathValue.split(':').filter((dir) => isAbsolute(dir)))];
}

function dirStamps(dirs: readonly string[]): Record<string, number | null> {
  const stamps: Record<string, number | null> = {};
  for (const dir of dirs) {
    try {
      stamps[dir] = statSync(dir).mtimeMs;
    } catch {
      stamps[dir] = null;
    }
  }
  return stamps;
}

function readCache(file: string, pathValue: string, stamps: Record<string, number | null>): CachedExecutable[] | undefined {
  let cache: Partial<CacheFile>;
  try {
    cache = JSON.parse(readFileSync(file, 'utf8')) as Partial<CacheFile>;
  } catch {
    return undefined; // missing or unreadable: rebuild
  }
  // A private cache: anything unexpected is a miss, not an error. (Checked by hand rather than with
  // zod: validating ~2,000 rows would cost more than this whole command's other work.)
  if (cache.version !== CACHE_VERSION || cache.path !== pathValue || !Array.isArray(cache.executables)) return undefined;
  const cached = cache.dirs ?? {};
  const keys = Object.keys(stamps);
  if (Object.keys(cached).length !== keys.length || keys.some((dir) => cached[dir] !== stamps[dir])) return undefined;
  return cache.executables;
}

function writeCache(file: string, cache: CacheFile, warn: (message: string) => void): void {
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    ensureDir(join(file, '..'));
    writeFileSync(temp, JSON.stringify(cache));
    renameSync(temp, file);
  } catch (error) {
    try {
      rmSync(temp, { force: true });
    } catch {
      // the directory itself is unusable; nothing was left behind
    }
    warn(`cannot write the PATH index cache ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function scanPath(dirs: readonly string[], readDescriptions: DescriptionReader): CachedExecutable[] {
  const found = new Map<string, string>();
  for (const dir of dirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (found.has(name)) continue;
      const path = join(dir, name);
      if (isExecutableFile(path)) found.set(name, path);
    }
  }
  const descriptions = readDescriptions(found);
  return [...found].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, path]) => ({ name, path, description: descriptions.get(name) ?? '' }));
}

function isExecutableFile(path: string): boolean {
  try {
    const stat = statSync(path);
    return stat.isFile() && (stat.mode & 0o111) !== 0;
  } catch {
    return false; // a dangling symlink
  }
}

/** Runs `apropos -l .` (man-db) if it is among the executables; any failure means no descriptions. */
export function aproposDescriptions(executables: ReadonlyMap<string, string>): Map<string, string> {
  const apropos = executables.get('apropos');
  if (!apropos) return new Map();
  let output: string;
  try {
    output = execFileSync(apropos, ['-l', '.'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return new Map();
  }
  return parseApropos(output, new Set(executables.keys()));
}

// Man sections of commands: 1 user commands, 8 administration, 6 games; preferred in that order,
// a plain section before its variants (1 before 1ssl).
const SECTION_ORDER = ['1', '8', '6'];

function sectionRank(section: string): number {
  const base = SECTION_ORDER.indexOf(section[0] ?? '');
  if (base < 0) return -1;
  return base * 2 + (section.length > 1 ? 1 : 0);
}

/**
 * Parses `apropos -l` lines (`ls (1)               - list directory contents`) into name →
 * description, for names in `wanted`, from command sections only.
 */
export function parseApropos(output: string, wanted: ReadonlySet<string>): Map<string, string> {
  const best = new Map<string, { rank: number; description: string }>();
  for (const line of output.split('\n')) {
    const match = /^(\S+) \(([^)]+)\)\s+- (.*)$/.exec(line);
    if (!match) continue;
    const [, name = '', section = '', text = ''] = match;
    if (!wanted.has(name)) continue;
    const rank = sectionRank(section);
    if (rank < 0) continue;
    const previous = best.get(name);
    if (previous && previous.rank <= rank) continue;
    best.set(name, { rank, description: cleanDescription(name, text) });
  }
  return new Map([...best].map(([name, { description }]) => [name, description]));
}

// Pages documenting several commands repeat their NAME line: "zstd, zstdmt, unzstd - Compress or
// decompress .zst files". Keep the part after the names.
function cleanDescription(name: string, text: string): string {
  const dash = text.indexOf(' - ');
  if (
    dash > 0 &&
    text
      .slice(0, dash)
      .split(/,\s*/)
      .some((part) => part.trim() === name)
  )
    text = text.slice(dash + 3);
  return text.replace(/\s+/g, ' ').trim();
}
