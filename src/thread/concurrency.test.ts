import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import { initThread, openThread } from './thread.js';
import type { ThreadEvent } from './types.js';

let t: TestHome;

beforeEach(() => {
  t = createTestHome();
});

afterEach(() => t.cleanup());

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Starts every process, waits until each has printed `ready` (imports done, about to push), then
 * releases them all at once through stdin: a barrier, so that the pushes really overlap.
 */
async function startTogether(argvs: readonly string[][]): Promise<ChildResult[]> {
  const children = argvs.map((argv) => {
    const child = spawn(process.execPath, argv, { env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: string) => {
        stdout += chunk;
        if (stdout.startsWith('ready\n')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`a pusher exited with ${code} before it was ready: ${stderr}`)));
    });
    const done = new Promise<ChildResult>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, stdout: stdout.slice('ready\n'.length), stderr }));
    });
    return { child, ready, done };
  });
  try {
    await Promise.all(children.map((c) => c.ready));
  } catch (error) {
    for (const { child } of children) child.kill('SIGKILL');
    throw error;
  }
  for (const { child } of children) child.stdin.end('go\n');
  return Promise.all(children.map((c) => c.done));
}

function allEvents(path: string): ThreadEvent[] {
  const thread = openThread(path, { home: t.home });
  try {
    return thread.peek({ limit: 100_000 });
  } finally {
    thread.close();
  }
}

/**
 * The checks shared by both runs: exactly procs × perProc events, ids unique and strictly
 * increasing in peek order, every `<proc>-<n>` once, and each process's events in its push order.
 */
function expectEveryPushOnceAndInOrder(events: ThreadEvent[], procs: number, perProc: number): void {
  expect(events).toHaveLength(procs * perProc);
  for (let i = 1; i < events.length; i++) expect(events[i]!.id).toBeGreaterThan(events[i - 1]!.id);
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  const contents = events.map((e) => e.content);
  expect(new Set(contents).size).toBe(contents.length);
  for (let proc = 0; proc < procs; proc++) {
    const own = contents.filter((content) => content.startsWith(`${proc}-`));
    expect(own).toEqual(Array.from({ length: perProc }, (_, n) => `${proc}-${n}`));
  }
}

/** events.jsonl, the human-readable copy: the same events, each once (appended after each commit, so lines of concurrent writers may be out of id order). */
function expectJsonlCopyOf(path: string, events: ThreadEvent[]): void {
  const lines = readFileSync(join(path, 'events.jsonl'), 'utf8').split('\n');
  expect(lines.pop()).toBe('');
  const copied = lines.map((line) => JSON.parse(line) as ThreadEvent).sort((a, b) => a.id - b.id);
  expect(copied).toEqual(events);
}

function integrityCheck(path: string): unknown {
  const db = new Database(join(path, 'events.db'), { readonly: true });
  try {
    return db.pragma('integrity_check', { simple: true });
  } finally {
    db.close();
  }
}

/**
 * A pusher process: `pusher.mjs <thread> <proc> <count> [keyed]` opens the thread with the built
 * library, prints `ready`, waits for the go on stdin, pushes `<proc>-<n>` one by one (with the
 * idempotency key `key-<n>` when keyed) and prints the ids it was given as JSON.
 */
function writePusher(): string {
  const library = pathToFileURL(join(packageRoot(), 'dist', 'thread', 'index.js')).href;
  const script = join(t.home, 'pusher.mjs');
  writeFileSync(
    script,
    `import { openThread } from ${JSON.stringify(library)};
const [path, proc, count, keyed] = process.argv.slice(2);
const thread = openThread(path);
process.stdout.write('ready\\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
const ids = [];
for (let n = 0; n < Number(count); n++) {
  const idempotency_key = keyed ? 'key-' + n : undefined;
  ids.push(thread.push({ source: 'proc:' + proc, type: 'message', content: proc + '-' + n, idempotency_key }));
}
thread.close();
process.stdout.write(JSON.stringify(ids) + '\\n');
process.stdin.destroy();
`,
  );
  return script;
}

describe('concurrent pushers', () => {
  it('10 processes pushing 100 events each through the library lose, duplicate and reorder nothing', async () => {
    const path = join(t.home, 'busy thread');
    initThread(path, { home: t.home }).close();
    const script = writePusher();
    const PROCS = 10;
    const PER_PROC = 100;
    const results = await startTogether(Array.from({ length: PROCS }, (_, proc) => [script, path, String(proc), String(PER_PROC)]));
    for (const result of results) expect(result.code, result.stderr).toBe(0);

    const events = allEvents(path);
    expectEveryPushOnceAndInOrder(events, PROCS, PER_PROC);
    // The ids each process was given are the ids its events were stored under, in its order.
    const idOf = new Map(events.map((e) => [e.content, e.id]));
    results.forEach((result, proc) => {
      const returned = JSON.parse(result.stdout) as number[];
      expect(returned).toEqual(Array.from({ length: PER_PROC }, (_, n) => idOf.get(`${proc}-${n}`)));
    });
    // The pushes really interleaved: otherwise this test proves nothing about concurrency.
    const switches = events.filter((e, i) => i > 0 && e.source !== events[i - 1]!.source).length;
    expect(switches).toBeGreaterThan(PROCS - 1);
    expectJsonlCopyOf(path, events);
    expect(integrityCheck(path)).toBe('ok');
  });

  it('5 concurrent loops of the real CLI `thread push` lose, duplicate and reorder nothing', async () => {
    const path = join(t.home, 'cli thread');
    expect((await runTool('thread', ['init', path], t.env)).code).toBe(0);
    const PROCS = 5;
    const PER_PROC = 10;
    const printed = await Promise.all(
      Array.from({ length: PROCS }, async (_, proc) => {
        const ids: number[] = [];
        for (let n = 0; n < PER_PROC; n++) {
          const result = await runTool('thread', ['push', '--thread', path, '--source', `proc:${proc}`, '--type', 'message', '--content', `${proc}-${n}`], t.env);
          expect(result, `push ${proc}-${n}`).toMatchObject({ code: 0, stderr: '' });
          ids.push(Number(result.stdout));
        }
        return ids;
      }),
    );
    const events = allEvents(path);
    expectEveryPushOnceAndInOrder(events, PROCS, PER_PROC);
    const idOf = new Map(events.map((e) => [e.content, e.id]));
    printed.forEach((ids, proc) => {
      expect(ids).toEqual(Array.from({ length: PER_PROC }, (_, n) => idOf.get(`${proc}-${n}`)));
    });
    expectJsonlCopyOf(path, events);
    expect(integrityCheck(path)).toBe('ok');
  });

  it('processes pushing the same idempotency keys at once store each key once and all get its id', async () => {
    const path = join(t.home, 'keyed');
    initThread(path, { home: t.home }).close();
    const script = writePusher();
    const PROCS = 6;
    const KEYS = 50;
    const results = await startTogether(Array.from({ length: PROCS }, (_, proc) => [script, path, String(proc), String(KEYS), 'keyed']));
    for (const result of results) expect(result.code, result.stderr).toBe(0);
    const returned = results.map((result) => JSON.parse(result.stdout) as number[]);
    const events = allEvents(path);
    expect(events).toHaveLength(KEYS);
    // No gaps: a key seen before consumed no id.
    expect(events.map((e) => e.id)).toEqual(Array.from({ length: KEYS }, (_, n) => n + 1));
    for (let n = 0; n < KEYS; n++) {
      const ids = new Set(returned.map((ids) => ids[n]));
      expect(ids.size, `key-${n}`).toBe(1);
      const [id] = ids;
      expect(events.find((e) => e.id === id)!.content).toMatch(new RegExp(`^\\d+-${n}$`));
    }
    expectJsonlCopyOf(path, events);
    expect(integrityCheck(path)).toBe('ok');
  });
});
