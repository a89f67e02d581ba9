import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { identify, isAlive, killGroup, processStartTime, watchGroup } from './process.js';

const children: ChildProcess[] = [];
const strays: number[] = [];

afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const pid of strays.splice(0)) {
    if (isDead(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

function exited(child: ChildProcess, timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolveExit, reject) => {
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolveExit({ code, signal });
    });
  });
}

/** Gone, or a zombie nobody reaped yet (PID 1 in a container may not reap). */
function isDead(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The first line a child prints. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolveLine, reject) => {
    let out = '';
    child.once('error', reject);
    // 'close', not 'exit': a command that prints and exits at once may exit before its output is read.
    child.once('close', () => reject(new Error(`process ${child.pid} exited before printing a line`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const end = out.indexOf('\n');
      if (end !== -1) resolveLine(out.slice(0, end));
    });
  });
}

describe('processStartTime', () => {
  it('reads the start time of a live process and null for a missing one', () => {
    const start = processStartTime(process.pid);
    expect(start).not.toBeNull();
    expect(Number.isInteger(start)).toBe(true);
    expect(start).toBeGreaterThan(0);
    expect(processStartTime(process.pid)).toBe(start);
    expect(processStartTime(0x3fffffff)).toBeNull();
  });

  it('tells apart processes started at different times', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000); console.log("up")'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await firstLine(child);
    const start = processStartTime(child.pid!);
    expect(start).not.toBeNull();
    expect(start).toBeGreaterThanOrEqual(processStartTime(process.pid)!);
    expect(identify(child.pid!)).toEqual({ pid: child.pid, start });
  });
});

describe('isAlive', () => {
  it('is true for this process', () => {
    expect(isAlive(identify(process.pid))).toBe(true);
    expect(isAlive({ pid: process.pid, start: null })).toBe(true);
  });

  it('is false for a child that has exited', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    children.push(child);
    const identity = identify(child.pid!);
    expect((await exited(child)).code).toBe(0);
    expect(isAlive(identity)).toBe(false);
    expect(isAlive({ pid: identity.pid, start: null })).toBe(false);
  });

  it('is false when the pid is alive but its start time does not match', () => {
    const start = processStartTime(process.pid)!;
    expect(isAlive({ pid: process.pid, start: start + 1 })).toBe(false);
    expect(isAlive({ pid: process.pid, start: start - 1 })).toBe(false);
  });

  it('is false for pids that cannot be a process', () => {
    for (const pid of [0, -1, -process.pid, 1.5, Number.NaN]) {
      expect(isAlive({ pid, start: null })).toBe(false);
    }
  });

  it('is true for a live process of another user', () => {
    // PID 1 belongs to root; for a non-root test run kill(1, 0) fails with EPERM, which still
    // means alive. For root it simply succeeds.
    expect(isAlive({ pid: 1, start: null })).toBe(true);
  });
});

describe('killGroup', () => {
  it('kills a detached child and its grandchild', async () => {
    const child = spawn('bash', ['-c', 'sleep 100 & echo $!; wait'], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const grandchild = Number(await firstLine(child));
    strays.push(grandchild);
    expect(Number.isInteger(grandchild) && grandchild > 0).toBe(true);
    expect(isDead(child.pid!)).toBe(false);
    expect(isDead(grandchild)).toBe(false);

    expect(killGroup(child.pid!, 'SIGTERM')).toBe(true);

    expect((await exited(child)).signal).toBe('SIGTERM');
    await until(() => isDead(grandchild), `grandchild ${grandchild} is dead`);
  });

  it('never signals the bare pid of a process that does not lead a group (it may be a reused pid)', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000); console.log("up")'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await firstLine(child);
    expect(killGroup(child.pid!, 'SIGKILL')).toBe(false);
    expect(isAlive(identify(child.pid!))).toBe(true);
    // Nor this process, in the same group as that child.
    expect(isAlive(identify(process.pid))).toBe(true);
  });

  it('still reaches what a command left running in its group after the command itself exited', async () => {
    const child = spawn('bash', ['-c', 'sleep 100 & echo $!'], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const grandchild = Number(await firstLine(child));
    strays.push(grandchild);
    await exited(child);
    expect(killGroup(child.pid!, 'SIGKILL')).toBe(true);
    await until(() => isDead(grandchild), `grandchild ${grandchild} is dead`);
  });

  it('returns false when nothing is there to signal', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore', detached: true });
    children.push(child);
    await exited(child);
    expect(killGroup(child.pid!, 'SIGTERM')).toBe(false);
  });
});

describe('watchGroup', () => {
  const spawnGroup = async (script: string) => {
    const child = spawn('bash', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const grandchild = Number(await firstLine(child));
    strays.push(grandchild);
    return { child, grandchild };
  };

  it('kills the whole group with SIGTERM when the time is up, and says so', async () => {
    const { child, grandchild } = await spawnGroup('sleep 100 & echo $!; wait');
    const watch = watchGroup(child.pid!, { timeoutMs: 100, graceMs: 5_000 });
    expect((await exited(child)).signal).toBe('SIGTERM');
    watch.release();
    expect(watch.killedFor).toBe('timeout');
    await until(() => isDead(grandchild), `grandchild ${grandchild} is dead`);
  });

  it('follows with SIGKILL after the grace period for a group that ignores SIGTERM', async () => {
    const { child } = await spawnGroup("trap '' TERM; echo $$; while :; do sleep 0.05; done");
    const watch = watchGroup(child.pid!, { timeoutMs: 50, graceMs: 200 });
    expect((await exited(child)).signal).toBe('SIGKILL');
    watch.release();
    expect(watch.killedFor).toBe('timeout');
  });

  it('kills the group when the signal aborts, also when it had aborted already', async () => {
    for (const abortFirst of [false, true]) {
      const { child } = await spawnGroup('sleep 100 & echo $!; wait');
      const controller = new AbortController();
      if (abortFirst) controller.abort();
      const watch = watchGroup(child.pid!, { timeoutMs: 60_000, graceMs: 5_000, signal: controller.signal });
      controller.abort();
      expect((await exited(child)).signal).toBe('SIGTERM');
      watch.release();
      expect(watch.killedFor).toBe('aborted');
    }
  });

  it('leaves a child that ended in time and what it left behind alone', async () => {
    const { child, grandchild } = await spawnGroup('sleep 100 & echo $!');
    const watch = watchGroup(child.pid!, { timeoutMs: 60_000, graceMs: 5_000 });
    expect((await exited(child)).code).toBe(0);
    watch.release();
    expect(watch.killedFor).toBeNull();
    expect(isDead(grandchild)).toBe(false);
  });
});
