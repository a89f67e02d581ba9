import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pathIndexPath } from '../core/layout.js';
import { loadPathIndex, parseApropos, pathDirs, type DescriptionReader } from './path.js';

let root: string;
let home: string;
let warnings: string[];
let scans: number;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'cmds-path-'));
  home = join(root, 'home');
  warnings = [];
  scans = 0;
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function bin(dir: string, name: string, mode = 0o755): string {
  mkdirSync(join(root, dir), { recursive: true });
  const path = join(root, dir, name);
  writeFileSync(path, '#!/bin/sh\n');
  chmodSync(path, mode);
  return path;
}

// Stands in for apropos: counts the scans and describes some names.
const describeFake: DescriptionReader = (executables) => {
  scans++;
  return new Map([...executables.keys()].filter((name) => name !== 'nodesc').map((name) => [name, `the ${name} tool`]));
};

function load(pathValue: string) {
  return loadPathIndex({ home, pathValue, warn: (m) => warnings.push(m), readDescriptions: describeFake });
}

describe('loadPathIndex', () => {
  it('lists executable files, first occurrence of a name winning, with descriptions', () => {
    bin('a', 'tool');
    bin('a', 'nodesc');
    bin('a', 'notes.txt', 0o644);
    bin('b', 'tool');
    bin('b', 'other');
    mkdirSync(join(root, 'b', 'subdir'));
    symlinkSync(join(root, 'missing'), join(root, 'b', 'dangling'));
    const index = load(`${join(root, 'a')}:${join(root, 'b')}:relative/dir::${join(root, 'absent')}`);
    expect(index).toEqual([
      { name: 'nodesc', kind: 'executable', description: '', path: join(root, 'a', 'nodesc') },
      { name: 'other', kind: 'executable', description: 'the other tool', path: join(root, 'b', 'other') },
      { name: 'tool', kind: 'executable', description: 'the tool tool', path: join(root, 'a', 'tool') },
    ]);
    expect(warnings).toEqual([]);
  });

  it('uses the curated description of a well-known command and marks it', () => {
    bin('a', 'ls');
    expect(load(join(root, 'a'))).toEqual([{ name: 'ls', kind: 'executable', description: 'list files and directories (ls -la: all, with details)', path: join(root, 'a', 'ls'), curated: true }]);
  });

  it('caches the index and rebuilds it when PATH or a PATH directory changes', () => {
    bin('a', 'one');
    const path = join(root, 'a');
    expect(load(path).map((e) => e.name)).toEqual(['one']);
    expect(existsSync(pathIndexPath(home))).toBe(true);
    expect(load(path).map((e) => e.name)).toEqual(['one']);
    expect(scans).toBe(1);

    bin('a', 'two'); // a new file changes the directory's mtime
    utimesSync(join(root, 'a'), new Date(), new Date(Date.now() + 5_000));
    expect(load(path).map((e) => e.name)).toEqual(['one', 'two']);
    expect(scans).toBe(2);

    bin('b', 'three');
    expect(load(`${path}:${join(root, 'b')}`).map((e) => e.name)).toEqual(['one', 'three', 'two']);
    expect(scans).toBe(3);
    // The cache was replaced atomically: no temp files left beside it.
    expect(readdirSync(join(home, 'cmds'))).toEqual(['path-index.json']);
  });

  it('rebuilds a corrupt cache', () => {
    bin('a', 'one');
    mkdirSync(join(home, 'cmds'), { recursive: true });
    writeFileSync(pathIndexPath(home), '{"version":1,"path":');
    expect(load(join(root, 'a')).map((e) => e.name)).toEqual(['one']);
    expect(JSON.parse(readFileSync(pathIndexPath(home), 'utf8'))).toMatchObject({ version: 1, path: join(root, 'a') });
  });

  it('still answers when the cache cannot be written, with a warning', () => {
    bin('a', 'one');
    writeFileSync(home, 'a file where the home directory should be');
    expect(load(join(root, 'a')).map((e) => e.name)).toEqual(['one']);
    expect(warnings).toEqual([expect.stringContaining('cannot write the PATH index cache')]);
  });

  it('gives no descriptions when apropos is not on PATH', () => {
    bin('a', 'one');
    expect(loadPathIndex({ home, pathValue: join(root, 'a'), warn: () => {} })).toEqual([{ name: 'one', kind: 'executable', description: '', path: join(root, 'a', 'one') }]);
  });
});

describe('pathDirs', () => {
  it('keeps absolute directories once, in order', () => {
    expect(pathDirs('/a:/b::.:rel:/a:/c')).toEqual(['/a', '/b', '/c']);
  });
});

describe('parseApropos', () => {
  const output = [
    'ls (1)               - list directory contents',
    'printf (3)           - formatted output conversion',
    'printf (1)           - format and print data',
    'openssl (1ssl)       - OpenSSL command line program',
    'useradd (8)          - create a new user or update default new user information',
    'zstdcat (1)          - zstd, zstdmt, unzstd, zstdcat - Compress or decompress .zst files',
    'intro (1)            - introduction to user commands',
    'kill (2)             - send signal to a process',
    'garbage line',
  ].join('\n');

  it('takes command sections (1, 8, 6) for wanted names, and drops a repeated NAME list', () => {
    const wanted = new Set(['ls', 'printf', 'openssl', 'useradd', 'zstdcat', 'kill']);
    expect(Object.fromEntries(parseApropos(output, wanted))).toEqual({
      ls: 'list directory contents',
      printf: 'format and print data',
      openssl: 'OpenSSL command line program',
      useradd: 'create a new user or update default new user information',
      zstdcat: 'Compress or decompress .zst files',
    });
  });

  it('prefers section 1 over a variant of it', () => {
    const lines = 'tool (1ssl)          - the ssl one\ntool (1)             - the plain one';
    expect(parseApropos(lines, new Set(['tool'])).get('tool')).toBe('the plain one');
  });
});
