import { execFileSync, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  containedFsHooks,
  ContainedPathError,
  ensureContainedDir,
  kindContained,
  listContained,
  listFilesContained,
  readContained,
  readTextContained,
  removeContained,
  renameContained,
  statContained,
  writeContained,
} from './contained-fs.js';

let base: string;
/** The trusted root (an agent's directory). */
let root: string;
/** What a planted link points at: a secret outside the root, and a directory outside it. */
let secret: string;
let outside: string;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'theclaw-contained-'));
  root = join(base, 'agent');
  mkdirSync(join(root, 'memory', 'daily'), { recursive: true });
  secret = join(base, 'service.env');
  writeFileSync(secret, 'OPENAI_API_KEY=sk-secret\n');
  outside = join(base, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'x.md'), 'outside\n');
});

afterEach(() => {
  delete containedFsHooks.beforeOpen;
  rmSync(base, { recursive: true, force: true });
});

function refusal(run: () => unknown): ContainedPathError {
  try {
    run();
  } catch (error) {
    if (error instanceof ContainedPathError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('readContained', () => {
  it('reads a plain file, and null where it or its directory is missing', () => {
    writeFileSync(join(root, 'memory', 'agent.md'), '# me\n');
    expect(readTextContained(root, join(root, 'memory', 'agent.md'))).toBe('# me\n');
    expect(readContained(root, 'memory/agent.md')?.toString()).toBe('# me\n');
    expect(readContained(root, join(root, 'memory', 'none.md'))).toBeNull();
    expect(readContained(root, join(root, 'memory', 'gone', 'x.md'))).toBeNull();
    expect(readTextContained(root, join(root, 'memory', 'none.md'))).toBe('');
  });

  it('refuses a file link, naming the path and why', () => {
    const file = join(root, 'memory', 'agent.md');
    symlinkSync(secret, file);
    const error = refusal(() => readContained(root, file));
    expect(error.reason).toBe('link');
    expect(error.message).toBe(`${file} is a link — the runtime does not follow links in a sandbox-writable directory`);
    expect(error.suggestion).toContain(`rm ${file}`);
  });

  it('refuses a directory link on the way, and a relative link too', () => {
    rmSync(join(root, 'memory', 'daily'), { recursive: true });
    symlinkSync(outside, join(root, 'memory', 'daily'));
    expect(refusal(() => readContained(root, join(root, 'memory', 'daily', 'x.md'))).path).toBe(join(root, 'memory', 'daily'));
    symlinkSync('../daily/x.md', join(root, 'memory', 'rel.md'));
    expect(refusal(() => readContained(root, join(root, 'memory', 'rel.md'))).reason).toBe('link');
  });

  it('refuses a FIFO instead of hanging on it', () => {
    const fifo = join(root, 'memory', 'agent.md');
    execFileSync('mkfifo', [fifo]);
    expect(refusal(() => readContained(root, fifo)).reason).toBe('not_plain');
  });

  it('never reads through a directory swapped for a link between steps (the descriptor holds the real one)', () => {
    writeFileSync(join(root, 'memory', 'daily', 'x.md'), 'inside\n');
    const daily = join(root, 'memory', 'daily');
    containedFsHooks.beforeOpen = (path) => {
      if (path !== join(daily, 'x.md')) return;
      // memory/daily is open already: swap it for a link to a directory with the same name outside
      renameSync(daily, join(root, 'memory', 'moved'));
      symlinkSync(outside, daily);
    };
    expect(readTextContained(root, join(daily, 'x.md'))).toBe('inside\n');
  });

  it('refuses a link swapped in just before a step is opened', () => {
    const file = join(root, 'memory', 'agent.md');
    writeFileSync(file, '# me\n');
    containedFsHooks.beforeOpen = (path) => {
      if (path !== file) return;
      rmSync(file);
      symlinkSync(secret, file);
    };
    expect(refusal(() => readContained(root, file)).reason).toBe('link');
  });

  it('refuses a path outside its root', () => {
    expect(() => readContained(root, join(base, 'service.env'))).toThrow(/is not under/);
    expect(() => readContained(root, '../service.env')).toThrow(/is not under/);
  });
});

describe('writeContained', () => {
  it('writes whole (0600), making its directories (0700), with no temporary file left', () => {
    const file = join(root, 'memory', 'conversations', 't1', 'a.md');
    writeContained(root, file, 'summary\n');
    expect(readFileSync(file, 'utf8')).toBe('summary\n');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'memory', 'conversations')).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(root, 'memory', 'conversations', 't1'))).toEqual(['a.md']);
  });

  it('replaces a link in the file’s place, leaving its target as it was', () => {
    const file = join(root, 'memory', 'agent.md');
    symlinkSync(secret, file);
    writeContained(root, file, 'new\n');
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('new\n');
    expect(readFileSync(secret, 'utf8')).toBe('OPENAI_API_KEY=sk-secret\n');
  });

  it('refuses a directory link on the way and writes nothing where it points', () => {
    symlinkSync(outside, join(root, 'memory', 'conversations'));
    expect(refusal(() => writeContained(root, join(root, 'memory', 'conversations', 't1', 'a.md'), 'x')).reason).toBe('link');
    expect(readdirSync(outside)).toEqual(['x.md']);
  });

  it('writes nothing outside when the directory is swapped for a link between steps', () => {
    const daily = join(root, 'memory', 'daily');
    containedFsHooks.beforeOpen = (path) => {
      if (!path.startsWith(join(daily, 'note.md'))) return;
      delete containedFsHooks.beforeOpen;
      renameSync(daily, join(root, 'memory', 'moved'));
      symlinkSync(outside, daily);
    };
    writeContained(root, join(daily, 'note.md'), 'note\n');
    expect(readdirSync(outside)).toEqual(['x.md']);
    expect(readFileSync(join(root, 'memory', 'moved', 'note.md'), 'utf8')).toBe('note\n');
  });
});

describe('the other operations', () => {
  it('lists plain files and directories, leaving links out', () => {
    writeFileSync(join(root, 'memory', 'agent.md'), '');
    writeFileSync(join(root, 'memory', 'daily', 'd.md'), '');
    symlinkSync(secret, join(root, 'memory', 'user-x.md'));
    symlinkSync(outside, join(root, 'memory', 'archive'));
    expect(listContained(root, join(root, 'memory'))).toEqual([
      { name: 'agent.md', kind: 'file' },
      { name: 'daily', kind: 'dir' },
    ]);
    expect(listFilesContained(root, join(root, 'memory'))).toEqual(['agent.md', 'daily/d.md']);
    expect(listContained(root, join(root, 'none'))).toEqual([]);
    expect(refusal(() => listContained(root, join(root, 'memory', 'archive'))).reason).toBe('link');
  });

  it('tells what is at a path without following it, and stats plain files only', () => {
    symlinkSync(secret, join(root, 'memory', 'agent.md'));
    expect(kindContained(root, join(root, 'memory', 'agent.md'))).toBe('link');
    expect(kindContained(root, join(root, 'memory', 'daily'))).toBe('dir');
    expect(kindContained(root, join(root, 'memory', 'none'))).toBeNull();
    expect(refusal(() => statContained(root, join(root, 'memory', 'agent.md'))).reason).toBe('link');
    writeFileSync(join(root, 'memory', 'b.md'), 'abc');
    expect(statContained(root, join(root, 'memory', 'b.md'))?.size).toBe(3);
    expect(statContained(root, join(root, 'memory', 'none.md'))).toBeNull();
  });

  it('renames and removes under the root, never through a link', () => {
    writeFileSync(join(root, 'memory', 'thread-t.md'), 's');
    renameContained(root, join(root, 'memory', 'thread-t.md'), join(root, 'memory', 'archive', 'thread-t-1.md'));
    expect(readFileSync(join(root, 'memory', 'archive', 'thread-t-1.md'), 'utf8')).toBe('s');
    symlinkSync(outside, join(root, 'memory', 'conversations'));
    writeFileSync(join(root, 'memory', 'thread-u.md'), 's');
    expect(refusal(() => renameContained(root, join(root, 'memory', 'thread-u.md'), join(root, 'memory', 'conversations', 'u.md'))).reason).toBe('link');
    expect(refusal(() => ensureContainedDir(root, join(root, 'memory', 'conversations', 'x'))).reason).toBe('link');
    removeContained(root, join(root, 'memory', 'conversations'));
    expect(readdirSync(outside)).toEqual(['x.md']);
    expect(kindContained(root, join(root, 'memory', 'conversations'))).toBeNull();
    removeContained(root, join(root, 'memory', 'none.md'));
    ensureContainedDir(root, join(root, 'memory', 'conversations', 'x'));
    expect(kindContained(root, join(root, 'memory', 'conversations', 'x'))).toBe('dir');
  });
});

describe('against a process that swaps a directory for a link and back, again and again', () => {
  it('never reads the link’s target nor writes through it, whichever moment the swap falls on', async () => {
    const daily = join(root, 'memory', 'daily');
    writeFileSync(join(daily, 'x.md'), 'inside\n');
    const swapper = `const fs = require('node:fs');
      const [daily, outside] = process.argv.slice(1);
      for (let i = 0; i < 20000; i++) {
        fs.renameSync(daily, daily + '.real');
        fs.symlinkSync(outside, daily);
        fs.unlinkSync(daily);
        fs.renameSync(daily + '.real', daily);
      }`;
    const child = spawn(process.execPath, ['-e', swapper, daily, outside], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 2000 && child.exitCode === null; i++) {
        for (const attempt of [() => seen.add(readTextContained(root, join(daily, 'x.md'))), () => writeContained(root, join(daily, `w${i}.md`), 'written')]) {
          try {
            attempt();
          } catch (error) {
            // Refused, or missing for the moment: never anything else.
            if (!(error instanceof ContainedPathError) && (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
          }
        }
      }
    } finally {
      child.kill();
      await exited;
    }
    expect([...seen].filter((text) => text !== 'inside\n' && text !== '')).toEqual([]);
    expect(readdirSync(outside)).toEqual(['x.md']);
  });
});
