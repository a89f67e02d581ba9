import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ClawError, errnoCode } from '../core/errors.js';
import { ensureDir } from '../core/home.js';

/**
 * The runtime's writes to memory files: the conversation summary (compaction), the facts a flush
 * keeps (memory-flush.ts), the daily notes, a condensed file and its archived version
 * (memory-condense.ts). memory/ is writable in the agent's sandbox, so nothing here follows a
 * link a command may have left there.
 */

/** Under memory/: `daily/<memory file name>/<YYYY-MM-DD>.md`, the dated notes a flush writes. */
export const DAILY_DIR = 'daily';
/** Under memory/: `archive/<memory file name>/<time>.md`, the versions a condensing replaced. */
export const ARCHIVE_DIR = 'archive';

/** The folder of a memory file's daily notes (`memory/daily/user-….md` → `memory/daily/user-…/`). */
export function dailyFolder(memoryDir: string, file: string): string {
  return join(memoryDir, DAILY_DIR, basename(file, '.md'));
}

/** The folder of a memory file's archived versions. */
export function archiveFolder(memoryDir: string, file: string): string {
  return join(memoryDir, ARCHIVE_DIR, basename(file, '.md'));
}

/** Tells one version of a memory file from another (the cap warning and the condensing key on it). */
export function memoryVersion(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** An ISO time as a file name part: `2025-01-31T12-00-00.000Z`. */
export function fileStamp(iso: string): string {
  return iso.replaceAll(':', '-');
}

/** A memory file's text ('' when there is none); a link or anything but a plain file is refused. */
export function readMemoryFile(file: string): string {
  try {
    if (!lstatSync(file).isFile()) throw new ClawError('invalid', `${file} is not a plain file`, { suggestion: 'replace it with a Markdown file' });
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return '';
    throw error;
  }
  return readFileSync(file, 'utf8');
}

/**
 * Written whole or not at all: the next prompt reads it. The temp file is made anew, never opened
 * through what is there: memory/ is writable in the agent's sandbox, where a command could leave
 * a link by that name to a file outside it.
 */
export function writeSummary(file: string, summary: string): void {
  const temp = `${file}.${process.pid}.tmp`;
  rmSync(temp, { force: true });
  writeFileSync(temp, summary + '\n', { flag: 'wx', mode: 0o600 });
  renameSync(temp, file);
}

/**
 * Appends the lines the file does not hold yet under `heading` (starting the file with `title`
 * when it is new); returns the lines added. Applying the same lines twice adds nothing: a flush
 * repeated after a crash leaves the file as one flush would.
 */
export function appendNewLines(file: string, lines: readonly string[], heading: string, title?: string): string[] {
  const current = readMemoryFile(file);
  const held = new Set(current.split('\n').map(normalLine));
  const fresh = lines.filter((line) => !held.has(normalLine(line)));
  if (fresh.length === 0) return [];
  const start = current.trim() || (title ?? '');
  ensureDir(join(file, '..'));
  writeSummary(file, `${start ? `${start}\n\n` : ''}${heading}\n${fresh.join('\n')}`);
  return fresh;
}

function normalLine(line: string): string {
  return line.trim().replace(/\s+/g, ' ').toLowerCase();
}
