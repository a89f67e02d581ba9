import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { registryDir } from '../../core/layout.js';
import { createTestHome, type TestHome } from '../../testing/index.js';
import { listThreads, registerThread, unregisterThread } from './registry.js';
import { initThread } from '../thread.js';

let t: TestHome;
/** Homes and threads the tests make beside the test home. */
let beside: string[];

beforeEach(() => {
  t = createTestHome();
  beside = [];
});

afterEach(() => {
  t.cleanup();
  for (const path of beside) rmSync(path, { recursive: true, force: true });
});

const entries = (home: string) => readdirSync(registryDir(home)).map((name) => JSON.parse(readFileSync(join(registryDir(home), name), 'utf8')) as { path: string });

/** A thread in `home` as older versions registered it: by its absolute path, in a file named by that path's hash. */
function registerAsBefore(home: string, threadPath: string): void {
  mkdirSync(registryDir(home), { recursive: true });
  const name = `${createHash('sha256').update(threadPath).digest('hex').slice(0, 24)}.json`;
  writeFileSync(join(registryDir(home), name), JSON.stringify({ path: threadPath, registered_at: '2026-01-01T00:00:00.000Z' }));
}

function makeThread(home: string, ...parts: string[]): string {
  const path = join(home, ...parts);
  initThread(path, { home }).close();
  return path;
}

describe('the registry of threads', () => {
  it('writes a thread of the home relative to it, and one outside absolute', () => {
    const inbox = makeThread(t.home, 'agents', 'a', 'inbox');
    beside.push(`${t.home}-outside`);
    const outside = makeThread(`${t.home}-outside`, 'feed');
    registerThread(t.home, inbox);
    registerThread(t.home, outside);
    expect(
      entries(t.home)
        .map((entry) => entry.path)
        .sort(),
    ).toEqual([outside, 'agents/a/inbox'].sort());
    expect(listThreads(t.home).sort()).toEqual([inbox, outside].sort());
    unregisterThread(t.home, inbox);
    expect(listThreads(t.home)).toEqual([outside]);
  });

  it('lists the threads of a moved home where they are now, and of a copy its own, not the original', () => {
    const inbox = makeThread(t.home, 'agents', 'a', 'inbox');
    registerThread(t.home, inbox);
    const copy = `${t.home}-copy`;
    beside.push(copy);
    cpSync(t.home, copy, { recursive: true });
    const moved = `${t.home}-moved`;
    renameSync(t.home, moved);
    try {
      expect(listThreads(moved)).toEqual([join(moved, 'agents', 'a', 'inbox')]);
      expect(listThreads(copy)).toEqual([join(copy, 'agents', 'a', 'inbox')]);
    } finally {
      renameSync(moved, t.home);
    }
  });

  it("reads an entry an older version wrote with an absolute path, in this home or in its place before a move, and writes it again as the home's own", () => {
    const inbox = makeThread(t.home, 'agents', 'a', 'inbox');
    const feed = makeThread(t.home, 'feeds', 'errors');
    registerAsBefore(t.home, inbox);
    registerAsBefore(t.home, '/old/place/of/the/home/feeds/errors');
    registerAsBefore(t.home, '/old/place/of/the/home/agents/gone/inbox'); // not in this home: left as it is
    expect(listThreads(t.home).sort()).toEqual(['/old/place/of/the/home/agents/gone/inbox', feed, inbox].sort());
    expect(
      entries(t.home)
        .map((entry) => entry.path)
        .sort(),
    ).toEqual(['/old/place/of/the/home/agents/gone/inbox', 'agents/a/inbox', 'feeds/errors'].sort());
    // The names match what a subscriber computes now: unregistering finds them.
    unregisterThread(t.home, inbox);
    unregisterThread(t.home, feed);
    unregisterThread(t.home, '/old/place/of/the/home/agents/gone/inbox');
    expect(readdirSync(registryDir(t.home))).toEqual([]);
  });
});
