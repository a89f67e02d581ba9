import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClawError } from './errors.js';
import { lock, readLockHolder, tryLock, type Lock } from './lock.js';
import { processStartTime } from './process.js';

const here = dirname(fileURLToPath(import.meta.url));
const projectRoot = resolve(here, '..', '..');
const lockModule = join(here, 'lock.ts');

let dir: string;
let lockPath: string;
const children: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'theclaw-lock-'));
  lockPath = join(dir, 'thing.lock');
});

afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A child process that stays alive until killed (or 30 s pass). */
async function spawnSleeper(): Promise<ChildProcess & { pid: number }> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000); console.log("up")'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolveUp, reject) => {
    child.once('error', reject);
    child.stdout!.once('data', () => resolveUp());
  });
  return child as ChildProcess & { pid: number };
}

function exited(child: ChildProcess, timeoutMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolveExit, reject) => {
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolveExit();
    });
  });
}

function acquired(path: string, pid?: number): Lock {
  const attempt = tryLock(path, pid);
  if (!attempt.acquired) throw new Error(`expected to acquire ${path}, held by ${attempt.holder.pid}`);
  return attempt.lock;
}

describe('tryLock', () => {
  it('acquires a free lock, writes the holder into it and removes it on release', () => {
    const held = acquired(lockPath);
    expect(held.path).toBe(lockPath);
    expect(held.holder.pid).toBe(process.pid);
    expect(held.holder.start).toBe(processStartTime(process.pid));
    expect(Number.isNaN(Date.parse(held.holder.acquired_at))).toBe(false);

    const stored = JSON.parse(readFileSync(lockPath, 'utf8')) as Record<string, unknown>;
    expect(stored.pid).toBe(process.pid);
    expect(stored.start).toBe(held.holder.start);
    expect(readLockHolder(lockPath)).toMatchObject({ pid: process.pid, start: held.holder.start });
    // No temp file is left next to the lock.
    expect(readdirSync(dir)).toEqual(['thing.lock']);

    held.release();
    expect(existsSync(lockPath)).toBe(false);
    expect(readLockHolder(lockPath)).toBeNull();
    held.release(); // twice is harmless
    expect(readdirSync(dir)).toEqual([]);
  });

  it('can be taken again after release', () => {
    acquired(lockPath).release();
    const again = acquired(lockPath);
    expect(existsSync(lockPath)).toBe(true);
    again.release();
  });

  it('returns the holder when the lock is held, and leaves the lock alone', () => {
    const held = acquired(lockPath);
    const before = readFileSync(lockPath, 'utf8');
    const second = tryLock(lockPath);
    expect(second.acquired).toBe(false);
    if (second.acquired) return;
    expect(second.holder.pid).toBe(process.pid);
    expect(second.holder.start).toBe(held.holder.start);
    expect(readFileSync(lockPath, 'utf8')).toBe(before);
    expect(readdirSync(dir)).toEqual(['thing.lock']);
    held.release();
  });

  it('reclaims a lock whose holder died', async () => {
    const child = await spawnSleeper();
    const stale = acquired(lockPath, child.pid);
    expect(stale.holder.pid).toBe(child.pid);
    expect(readLockHolder(lockPath)?.pid).toBe(child.pid);

    child.kill('SIGKILL');
    await exited(child);

    expect(readLockHolder(lockPath)).toBeNull();
    const mine = acquired(lockPath);
    expect(mine.holder.pid).toBe(process.pid);
    expect((JSON.parse(readFileSync(lockPath, 'utf8')) as { pid: number }).pid).toBe(process.pid);
    expect(readdirSync(dir)).toEqual(['thing.lock']);
    mine.release();
  });

  it('reclaims a lock whose pid now belongs to another process (start time differs)', () => {
    const start = processStartTime(process.pid);
    expect(start).not.toBeNull();
    writeFileSync(lockPath, JSON.stringify({ pid: process.pid, start: start! - 1, acquired_at: '2020-01-01T00:00:00.000Z' }));
    expect(readLockHolder(lockPath)).toBeNull();
    const mine = acquired(lockPath);
    expect(mine.holder.start).toBe(start);
    mine.release();
  });

  it('does not reclaim a lock held by a live other process', async () => {
    const child = await spawnSleeper();
    const theirs = acquired(lockPath, child.pid);
    const content = readFileSync(lockPath, 'utf8');

    const attempt = tryLock(lockPath);
    expect(attempt.acquired).toBe(false);
    if (!attempt.acquired) {
      expect(attempt.holder.pid).toBe(child.pid);
      expect(attempt.holder.start).toBe(processStartTime(child.pid));
    }
    expect(readFileSync(lockPath, 'utf8')).toBe(content);

    let thrown: unknown;
    try {
      lock(lockPath, 'the thread "main"');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ClawError);
    expect((thrown as ClawError).kind).toBe('conflict');
    expect((thrown as ClawError).message).toBe(`the thread "main" is locked by running process ${child.pid}`);
    expect((thrown as ClawError).suggestion).toContain(String(child.pid));
    expect(readFileSync(lockPath, 'utf8')).toBe(content);
    theirs.release();
  });

  it('treats garbage in the lock file as a stale lock', () => {
    for (const garbage of ['garbage', '', '{"pid":"12"}', '{', 'null', '[]']) {
      writeFileSync(lockPath, garbage);
      expect(readLockHolder(lockPath)).toBeNull();
      const mine = acquired(lockPath);
      expect((JSON.parse(readFileSync(lockPath, 'utf8')) as { pid: number }).pid).toBe(process.pid);
      mine.release();
      expect(existsSync(lockPath)).toBe(false);
    }
  });

  it('does not let release remove a lock that another holder owns now', async () => {
    const child = await spawnSleeper();
    const old = acquired(lockPath, child.pid);
    child.kill('SIGKILL');
    await exited(child);

    const current = acquired(lockPath);
    const content = readFileSync(lockPath, 'utf8');
    old.release();
    expect(readFileSync(lockPath, 'utf8')).toBe(content);
    expect(readLockHolder(lockPath)?.pid).toBe(process.pid);
    current.release();
    expect(existsSync(lockPath)).toBe(false);
  });

  it('clears a reclaim guard left behind by a process that died while reclaiming', () => {
    writeFileSync(lockPath, 'garbage');
    const guard = `${lockPath}.reclaim`;
    writeFileSync(guard, '999999');
    const old = new Date(Date.now() - 60_000);
    utimesSync(guard, old, old);

    const mine = acquired(lockPath);
    expect(existsSync(guard)).toBe(false);
    mine.release();
  });

  it('gives up with a conflict, without deleting anything, while another process is reclaiming', () => {
    writeFileSync(lockPath, 'garbage');
    const guard = `${lockPath}.reclaim`;
    writeFileSync(guard, '999999'); // fresh: someone is reclaiming right now

    let thrown: unknown;
    try {
      tryLock(lockPath);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ClawError);
    expect((thrown as ClawError).kind).toBe('conflict');
    expect(readFileSync(lockPath, 'utf8')).toBe('garbage');
    expect(readdirSync(dir).sort()).toEqual(['thing.lock', 'thing.lock.reclaim']);
  });

  it('lets only one of 8 racing processes hold the lock at a time', async () => {
    const markers = join(dir, 'markers.log');
    const go = join(dir, 'go');
    const rounds = 5;
    const script = `
      import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
      import { tryLock } from ${JSON.stringify(lockModule)};
      const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
      writeFileSync(${JSON.stringify(join(dir, 'ready-'))} + process.pid, '');
      for (let i = 0; i < 10000 && !existsSync(${JSON.stringify(go)}); i++) pause(1);
      let busy = 0;
      for (let round = 0; round < ${rounds}; round++) {
        let attempt = tryLock(${JSON.stringify(lockPath)});
        while (!attempt.acquired) {
          busy++;
          pause(1);
          attempt = tryLock(${JSON.stringify(lockPath)});
        }
        appendFileSync(${JSON.stringify(markers)}, 'enter ' + process.pid + '\\n');
        pause(3);
        appendFileSync(${JSON.stringify(markers)}, 'exit ' + process.pid + '\\n');
        attempt.lock.release();
      }
      process.stdout.write(JSON.stringify({ busy }));
    `;
    const racers = Array.from({ length: 8 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: projectRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let out = '';
      let err = '';
      child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
      // 'close', not 'exit': the output is read whole (it says why a racer failed).
      const done = new Promise<{ code: number | null; out: string; err: string }>((resolveDone) => child.once('close', (code) => resolveDone({ code, out, err })));
      return { child, done };
    });

    // Start them together once all have loaded, so that they really race.
    for (let i = 0; readdirSync(dir).filter((name) => name.startsWith('ready-')).length < racers.length; i++) {
      if (i > 3000) throw new Error('the racing processes did not start');
      await new Promise((r) => setTimeout(r, 10));
    }
    writeFileSync(go, '');

    const results = await Promise.race([Promise.all(racers.map((racer) => racer.done)), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('racers did not finish')), 50_000))]);
    for (const result of results) expect(result.code, result.err).toBe(0);

    const lines = readFileSync(markers, 'utf8').split('\n').slice(0, -1);
    expect(lines).toHaveLength(8 * rounds * 2);
    for (let i = 0; i < lines.length; i += 2) {
      const pid = lines[i]!.replace(/^enter /, '');
      expect(lines[i]).toBe(`enter ${pid}`);
      expect(lines[i + 1]).toBe(`exit ${pid}`);
    }
    const pids = new Set(lines.map((line) => line.split(' ')[1]));
    expect(pids.size).toBe(8);
    // They did contend: some tried while another held the lock.
    const busy = results.reduce((sum, result) => sum + (JSON.parse(result.out) as { busy: number }).busy, 0);
    expect(busy).toBeGreaterThan(0);
    expect(existsSync(lockPath)).toBe(false);
    expect(readdirSync(dir).filter((name) => name.includes('.tmp') || name.endsWith('.reclaim'))).toEqual([]);
  });
});
