import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RotatingFile } from './rotating-file.js';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'theclaw-rotating-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const ROTATED = /^events-\d{8}-\d{6}(-\d+)?\.jsonl$/;

function files(): string[] {
  return readdirSync(dir).sort();
}

function rotatedFiles(): string[] {
  return files().filter((name) => ROTATED.test(name));
}

function linesOf(name: string): string[] {
  return readFileSync(join(dir, name), 'utf8').split('\n').slice(0, -1);
}

/** Every line of every file in the directory, in no particular order. */
function allLines(): string[] {
  return files().flatMap(linesOf);
}

function fixedClock(iso: string): () => Date {
  return () => new Date(iso);
}

describe('RotatingFile', () => {
  it('rotates past maxLines into <stem>-YYYYMMDD-HHmmss<ext>', () => {
    const path = join(dir, 'events.jsonl');
    const file = new RotatingFile(path, { maxLines: 10, now: fixedClock('2026-11-22T10:15:07.123Z') });
    for (let i = 0; i < 10; i++) file.append(`line ${i}\n`, 1);
    expect(files()).toEqual(['events.jsonl']);

    file.append('line 10\n', 1);
    expect(files()).toEqual(['events-20261122-101507.jsonl', 'events.jsonl']);
    expect(linesOf('events-20261122-101507.jsonl')).toEqual(Array.from({ length: 10 }, (_, i) => `line ${i}`));
    expect(linesOf('events.jsonl')).toEqual(['line 10']);
  });

  it('rotates before a multi-line append that would pass the limit, never splitting it', () => {
    const path = join(dir, 'events.jsonl');
    const file = new RotatingFile(path, { maxLines: 10, now: fixedClock('2026-01-02T03:04:05Z') });
    for (let i = 0; i < 8; i++) file.append(`line ${i}\n`, 1);
    file.append('a\nb\nc\n', 3);
    expect(rotatedFiles()).toEqual(['events-20260102-030405.jsonl']);
    expect(linesOf('events-20260102-030405.jsonl')).toHaveLength(8);
    expect(linesOf('events.jsonl')).toEqual(['a', 'b', 'c']);
  });

  it('names the rotated file after the stem for a path without an extension', () => {
    const path = join(dir, 'log');
    const file = new RotatingFile(path, { maxLines: 1, now: fixedClock('2026-01-02T03:04:05Z') });
    file.append('one\n', 1);
    file.append('two\n', 1);
    expect(files()).toEqual(['log', 'log-20260102-030405']);
  });

  it('does not rotate when a new instance opens a file that is below the limit', () => {
    const path = join(dir, 'events.jsonl');
    writeFileSync(path, Array.from({ length: 9 }, (_, i) => `old ${i}\n`).join(''));

    // A "process start": a fresh instance on an existing file.
    const file = new RotatingFile(path, { maxLines: 10 });
    file.append('new 0\n', 1);
    expect(files()).toEqual(['events.jsonl']);
    expect(linesOf('events.jsonl')).toHaveLength(10);

    // And another one, now that the file is exactly full: the next line rotates.
    const restarted = new RotatingFile(path, { maxLines: 10 });
    restarted.append('new 1\n', 1);
    expect(rotatedFiles()).toHaveLength(1);
    expect(linesOf('events.jsonl')).toEqual(['new 1']);
  });

  it('counts the existing lines of a file a new instance opens', () => {
    const path = join(dir, 'events.jsonl');
    writeFileSync(path, Array.from({ length: 10 }, (_, i) => `old ${i}\n`).join(''));
    const file = new RotatingFile(path, { maxLines: 10, now: fixedClock('2026-01-02T03:04:05Z') });
    file.append('new\n', 1);
    expect(linesOf('events-20260102-030405.jsonl')).toHaveLength(10);
    expect(linesOf('events.jsonl')).toEqual(['new']);
  });

  it('keeps both files when it rotates twice in the same second, and loses no line', () => {
    const path = join(dir, 'events.jsonl');
    const file = new RotatingFile(path, { maxLines: 10, now: fixedClock('2026-03-04T05:06:07Z') });
    const written: string[] = [];
    for (let i = 0; i < 35; i++) {
      written.push(`line ${i}`);
      file.append(`line ${i}\n`, 1);
    }
    expect(rotatedFiles()).toEqual(['events-20260304-050607-1.jsonl', 'events-20260304-050607-2.jsonl', 'events-20260304-050607.jsonl']);
    expect(linesOf('events-20260304-050607.jsonl')).toEqual(written.slice(0, 10));
    expect(linesOf('events-20260304-050607-1.jsonl')).toEqual(written.slice(10, 20));
    expect(linesOf('events-20260304-050607-2.jsonl')).toEqual(written.slice(20, 30));
    expect(linesOf('events.jsonl')).toEqual(written.slice(30));
    expect(allLines().sort()).toEqual([...written].sort());
  });

  it('loses no line when two writers on the same path append alternately across rotations', () => {
    const path = join(dir, 'events.jsonl');
    // Two instances stand for two processes; the same clock makes their rotations collide.
    const clock = fixedClock('2026-05-06T07:08:09Z');
    const a = new RotatingFile(path, { maxLines: 10, now: clock });
    const b = new RotatingFile(path, { maxLines: 10, now: clock });
    const written: string[] = [];
    for (let i = 0; i < 100; i++) {
      const writer = i % 2 === 0 ? a : b;
      const line = `${i % 2 === 0 ? 'a' : 'b'} ${i}`;
      written.push(line);
      // Every third append is two lines, so the writers' counts drift apart.
      if (i % 3 === 0) {
        written.push(`${line} more`);
        writer.append(`${line}\n${line} more\n`, 2);
      } else {
        writer.append(`${line}\n`, 1);
      }
    }
    const lines = allLines();
    expect(lines).toHaveLength(written.length);
    expect([...lines].sort()).toEqual([...written].sort());
    expect(rotatedFiles().length).toBeGreaterThanOrEqual(5);
    // Lines of one append stay together in one file.
    for (const name of files()) {
      const content = linesOf(name);
      content.forEach((line, i) => {
        if (line.endsWith(' more')) expect(content[i - 1]).toBe(line.slice(0, -' more'.length));
      });
    }
  });
});

describe('RotatingFile.rotateIfFull', () => {
  it('rotates a file that others filled past the limit, and leaves a smaller one alone', () => {
    const path = join(dir, 'events.jsonl');
    const file = new RotatingFile(path, { maxLines: 3, now: fixedClock('2026-11-22T10:15:00.000Z') });
    expect(file.rotateIfFull()).toBe(false); // no file yet
    writeFileSync(path, 'a\nb\n');
    expect(file.rotateIfFull()).toBe(false);
    expect(files()).toEqual(['events.jsonl']);
    writeFileSync(path, 'a\nb\nc\n');
    expect(file.rotateIfFull()).toBe(true);
    expect(files()).toEqual(['events-20261122-101500.jsonl']);
    expect(linesOf('events-20261122-101500.jsonl')).toEqual(['a', 'b', 'c']);
  });
});
