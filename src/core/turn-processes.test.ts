import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../testing/wait.js';
import { identify, isAlive } from './process.js';
import { CALL_MARK, findMarked, killMarked, markedEnv, newMark, TurnRegistry, TURN_MARK, type ProcessMark } from './turn-processes.js';

// Real processes, found and killed through the real /proc.

let dir: string;
const started: number[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'turn-processes-'));
});
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `setsid sleep 600` (its own session and group, out of any group kill) with `env`; returns its pid. */
function setsidSleep(env: NodeJS.ProcessEnv): number {
  const ran = spawnSync('bash', ['-c', 'setsid sleep 600 > /dev/null 2>&1 & echo $!'], { env, encoding: 'utf8' });
  const pid = Number(ran.stdout.trim());
  started.push(pid);
  return pid;
}

const baseEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH });
const gone = (pid: number) => !isAlive({ pid, start: null });

describe('findMarked and killMarked', () => {
  it('find and kill a setsid sleep carrying the mark, and nothing else', async () => {
    const mark = newMark(TURN_MARK);
    const marked = setsidSleep(markedEnv(baseEnv(), mark));
    const otherMark = setsidSleep(markedEnv(baseEnv(), newMark(TURN_MARK)));
    // The same value under another name, and the value as a prefix of a longer one, are not the mark.
    const otherName = setsidSleep({ ...baseEnv(), [CALL_MARK]: mark.value });
    const longer = setsidSleep(markedEnv(baseEnv(), { name: TURN_MARK, value: `${mark.value}x` }));
    const unmarked = setsidSleep(baseEnv());

    expect(findMarked(mark)).toEqual([marked]);
    expect(await killMarked(mark)).toEqual([marked]);
    await waitFor(() => gone(marked), 'the marked sleep to be gone', 5_000);
    expect(findMarked(mark)).toEqual([]);
    for (const pid of [otherMark, otherName, longer, unmarked]) expect(isAlive({ pid, start: null }), `pid ${pid} lives on`).toBe(true);
  });

  it('kill what a marked process forks while it is being killed', async () => {
    const mark = newMark(TURN_MARK);
    const spawner = spawnSync('bash', ['-c', `setsid bash -c 'while true; do sleep 600 & sleep 0.01; done' > /dev/null 2>&1 & echo $!`], { env: markedEnv(baseEnv(), mark), encoding: 'utf8' });
    started.push(Number(spawner.stdout.trim()));
    await waitFor(() => findMarked(mark).length >= 3, 'the spawner and a few sleeps', 5_000);
    await killMarked(mark);
    expect(findMarked(mark)).toEqual([]);
  });

  it('never finds the process that looks', () => {
    const mark = newMark(TURN_MARK);
    process.env[mark.name] = mark.value;
    try {
      expect(findMarked(mark)).toEqual([]);
    } finally {
      delete process.env[mark.name];
    }
  });
});

describe('TurnRegistry', () => {
  const registryDir = () => join(dir, 'turn-processes');

  it('notes a turn while it runs, and kills what it left running when it ends', async () => {
    const registry = new TurnRegistry(registryDir());
    let sleeper = 0;
    await registry.during(async (mark) => {
      expect(readdirSync(registryDir())).toEqual([`${mark.value}.json`]);
      sleeper = setsidSleep(markedEnv(baseEnv(), mark));
      expect(isAlive({ pid: sleeper, start: null })).toBe(true);
    });
    expect(readdirSync(registryDir())).toEqual([]);
    await waitFor(() => gone(sleeper), 'the sleep left by the turn to be gone', 5_000);
  });

  it('reaps the turns of a dead owner and leaves those of a live one', async () => {
    const dead = spawnSync('true').pid!;
    const deadMark = newMark(TURN_MARK);
    const liveMark = newMark(TURN_MARK);
    mkdirSync(registryDir(), { recursive: true });
    const note = (mark: ProcessMark, owner: object) => writeFileSync(join(registryDir(), `${mark.value}.json`), JSON.stringify({ mark, owner }));
    note(deadMark, { pid: dead, start: 1 });
    note(liveMark, identify(process.pid));
    const orphan = setsidSleep(markedEnv(baseEnv(), deadMark));
    const owned = setsidSleep(markedEnv(baseEnv(), liveMark));

    expect(await new TurnRegistry(registryDir()).reap()).toEqual([orphan]);
    await waitFor(() => gone(orphan), 'the orphaned sleep to be gone', 5_000);
    expect(isAlive({ pid: owned, start: null })).toBe(true);
    expect(readdirSync(registryDir())).toEqual([`${liveMark.value}.json`]);
  });
});
