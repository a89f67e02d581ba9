import { createHash } from 'node:crypto';
import { basename, join } from 'node:path';
import type { Logger } from '../../core/logger.js';
import { isContainedPathError, readTextContained, writeContained, type ContainedPathError } from '../../core/contained-fs.js';

/**
 * The runtime's reads and writes of memory files: the prompt's layers, the conversation summary
 * (compaction), the facts a flush keeps (memory-flush.ts), the daily notes, a condensed file and
 * its archived version (memory-condense.ts). memory/ is writable in the agent's sandbox, so each
 * goes through core/contained-fs.ts from a root no command can replace (the agent's directory, or
 * memory/ itself, a mount point in the sandbox) and never follows a link a command left there.
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

/** A memory file's text under `root` ('' when there is none); a link or anything but a plain file is refused (ContainedPathError). */
export function readMemoryFile(root: string, file: string): string {
  return readTextContained(root, file);
}

/**
 * A memory file's text for a reader that goes on without it (the prompt, a summary): '' when
 * there is none, and when it is refused, which `refused` is told — never a link's target's text.
 */
export function readMemoryOrEmpty(root: string, file: string, refused: (error: ContainedPathError) => void): string {
  try {
    return readTextContained(root, file);
  } catch (error) {
    if (!isContainedPathError(error)) throw error;
    refused(error);
    return '';
  }
}

/** Says a refused memory file in the log, and what to do about it. */
export function warnRefused(logger: Pick<Logger, 'warn'>): (error: ContainedPathError) => void {
  return (error) => logger.warn(`run: ${error.message}, so it is read as empty - ${error.suggestion}`);
}

/** Written whole or not at all (the next prompt reads it), with its directories; a link in its place is replaced, one on its way refused. */
export function writeSummary(root: string, file: string, summary: string): void {
  writeContained(root, file, summary + '\n');
}

/**
 * Appends the lines the file does not hold yet under `heading` (starting the file with `title`
 * when it is new); returns the lines added. Applying the same lines twice adds nothing: a flush
 * repeated after a crash leaves the file as one flush would.
 */
export function appendNewLines(root: string, file: string, lines: readonly string[], heading: string, title?: string): string[] {
  const current = readMemoryFile(root, file);
  const held = new Set(current.split('\n').map(normalLine));
  const fresh = lines.filter((line) => !held.has(normalLine(line)));
  if (fresh.length === 0) return [];
  const start = current.trim() || (title ?? '');
  writeSummary(root, file, `${start ? `${start}\n\n` : ''}${heading}\n${fresh.join('\n')}`);
  return fresh;
}

function normalLine(line: string): string {
  return line.trim().replace(/\s+/g, ' ').toLowerCase();
}
