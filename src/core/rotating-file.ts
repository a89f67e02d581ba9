import { closeSync, fstatSync, ftruncateSync, linkSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { errnoCode } from './errors.js';

export interface RotatingFileOptions {
  /** Rotate once the file would pass this many lines. Default: 10,000. */
  maxLines?: number;
  /** Clock for the rotated file's name. Default: `() => new Date()`. */
  now?: () => Date;
}

/**
 * An append-only line file (a log, `events.jsonl`) that is rotated past `maxLines` into
 * `<name>-<YYYYMMDD-HHmmss><ext>`. Several processes may append to the same file: each append
 * opens the current path, so a process never keeps writing into a file another one rotated, and
 * a rotation never overwrites an earlier one (a second rotation in the same second gets a `-1`
 * suffix). The file is only rotated when it is full, never because a process started. An append
 * is whole or not there: one that fails part-way (a full disk) is cut off again, so the file never
 * holds half a line.
 */
export class RotatingFile {
  readonly path: string;
  private readonly maxLines: number;
  private readonly now: () => Date;
  /** Lines in the file as far as this process knows; counted on first append. */
  private lines: number | undefined;

  constructor(path: string, options: RotatingFileOptions = {}) {
    this.path = path;
    this.maxLines = options.maxLines ?? 10_000;
    this.now = options.now ?? (() => new Date());
  }

  /** Appends `text`, which must end with a newline and hold `lineCount` lines. */
  append(text: string, lineCount: number): void {
    this.lines ??= countLines(this.path);
    if (this.lines > 0 && this.lines + lineCount > this.maxLines) {
      // Another process may have rotated meanwhile; count again before deciding.
      this.lines = countLines(this.path);
      if (this.lines > 0 && this.lines + lineCount > this.maxLines) {
        this.rotate();
        this.lines = 0;
      }
    }
    appendWhole(this.path, text);
    this.lines += lineCount;
  }

  /**
   * Rotates the file now if it holds `maxLines` lines or more; returns whether it did. For a file
   * that others write into without counting (a child's output through an inherited fd): call it
   * before opening the file for them.
   */
  rotateIfFull(): boolean {
    const lines = countLines(this.path);
    if (lines < this.maxLines) {
      this.lines = lines;
      return false;
    }
    this.rotate();
    this.lines = 0;
    return true;
  }

  private rotate(): void {
    const ext = extname(this.path);
    const stem = join(dirname(this.path), basename(this.path, ext));
    const stamp = formatStamp(this.now());
    for (let n = 0; ; n++) {
      const target = `${stem}-${stamp}${n === 0 ? '' : `-${n}`}${ext}`;
      try {
        // link + unlink instead of rename: link fails when the target exists, rename would
        // silently replace an earlier rotation from the same second.
        linkSync(this.path, target);
      } catch (error) {
        if (errnoCode(error) === 'EEXIST') continue;
        if (errnoCode(error) === 'ENOENT') return; // rotated by another process just now
        throw error;
      }
      try {
        unlinkSync(this.path);
      } catch (error) {
        if (errnoCode(error) !== 'ENOENT') throw error;
      }
      return;
    }
  }
}

/**
 * Appends `text` in as many writes as it takes; when one fails after others wrote a part, the part
 * is cut off again (a failing write on a full disk has nothing of anyone else's after it).
 */
function appendWhole(path: string, text: string): void {
  const data = Buffer.from(text);
  const fd = openSync(path, 'a');
  try {
    let written = 0;
    try {
      while (written < data.length) written += writeSync(fd, data, written, data.length - written);
    } catch (error) {
      if (written > 0) {
        try {
          ftruncateSync(fd, fstatSync(fd).size - written);
        } catch {
          // the error thrown below says what went wrong
        }
      }
      throw error;
    }
  } finally {
    closeSync(fd);
  }
}

function formatStamp(date: Date): string {
  const iso = date.toISOString(); // 2026-11-22T10:15:00.000Z
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}-${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}`;
}

/** Counts newline bytes without reading the whole file into memory. */
function countLines(path: string): number {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return 0;
    throw error;
  }
  try {
    const buffer = Buffer.allocUnsafe(1 << 16);
    let lines = 0;
    for (;;) {
      const read = readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) return lines;
      let at = buffer.indexOf(10);
      while (at !== -1 && at < read) {
        lines++;
        at = buffer.indexOf(10, at + 1);
      }
    }
  } finally {
    closeSync(fd);
  }
}
