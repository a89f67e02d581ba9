import fc from 'fast-check';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentOfPath, homeRef, resolveHomeRef } from './layout.js';

let root: string;
let home: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'theclaw-layout-'));
  home = join(root, 'home');
  mkdirSync(join(home, 'agents', 'admin', 'inbox'), { recursive: true });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('paths written into the home', () => {
  it('writes a path in the home relative to it and one outside it absolute', () => {
    expect(homeRef(home, join(home, 'agents', 'admin', 'inbox'))).toBe('agents/admin/inbox');
    expect(homeRef(home, home)).toBe('.');
    expect(homeRef(home, join(root, 'elsewhere'))).toBe(join(root, 'elsewhere'));
    expect(homeRef(home, `${home}2/x`)).toBe(`${home}2/x`); // a sibling whose name starts the same is outside
    expect(homeRef(home, join(home, '..files'))).toBe('..files'); // a name starting with dots is inside
  });

  it('reads back what it wrote, for any path inside or outside the home', () => {
    const segment = fc.stringMatching(/^[a-z0-9._-]{1,8}$/).filter((name) => name !== '.' && name !== '..');
    fc.assert(
      fc.property(fc.boolean(), fc.array(segment, { minLength: 1, maxLength: 5 }), (inside, parts) => {
        const path = join(inside ? home : join(root, 'other'), ...parts);
        expect(resolveHomeRef(home, homeRef(home, path))).toBe(path);
      }),
    );
  });

  it("finds an absolute path of the home's old place (written before paths were relative) in the home where it is now", () => {
    // Moved: the old place is gone.
    expect(resolveHomeRef(home, '/gone/old-home/agents/admin/inbox')).toBe(join(home, 'agents', 'admin', 'inbox'));
    // Copied: the old place still exists, and is not this home's.
    const original = join(root, 'original');
    mkdirSync(join(original, 'agents', 'admin', 'inbox'), { recursive: true });
    expect(resolveHomeRef(home, join(original, 'agents', 'admin', 'inbox'))).toBe(join(home, 'agents', 'admin', 'inbox'));
    // A home whose own path holds an `agents` folder: the longest part that exists here counts.
    expect(resolveHomeRef(home, '/srv/agents/x/.theclaw/agents/admin/inbox')).toBe(join(home, 'agents', 'admin', 'inbox'));
  });

  it('leaves an absolute path outside the home as it is when nothing of it is in the home', () => {
    expect(resolveHomeRef(home, '/data/threads/news')).toBe('/data/threads/news');
    expect(resolveHomeRef(home, '/old-home/agents/nobody/inbox')).toBe('/old-home/agents/nobody/inbox');
    expect(resolveHomeRef(home, '/old-home/notes/admin/inbox')).toBe('/old-home/notes/admin/inbox'); // not a folder paths were written of
  });

  it('names the agent a path of the home belongs to', () => {
    expect(agentOfPath(home, join(home, 'agents', 'admin', 'threads', 'main'))).toBe('admin');
    expect(agentOfPath(home, join(home, 'feeds', 'errors'))).toBeNull();
    expect(agentOfPath(home, join(root, 'agents', 'x'))).toBeNull();
  });
});
