import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { identify, isAlive } from './process.js';
import { withStoragePath } from './storage-error.js';
import { writeFileWhole } from './whole-file.js';

/**
 * The processes a turn's tools start, found by a mark in their environment rather than by
 * process group: `setsid`, `nohup` and daemonising commands leave the group (and the session),
 * but every descendant inherits the environment. A turn's mark is one variable; each tool call
 * also gets its own, so a call that times out takes only what it started.
 *
 * Not a sandbox: a process that clears or rewrites its environment (`env -i setsid ...`) loses
 * the mark and is not found. The `none` sandbox profile has only this; a PID namespace, where
 * there is one, ends everything at once.
 *
 * Linux only (`/proc`); elsewhere nothing is found, and group kills are all there is.
 */
export interface ProcessMark {
  name: string;
  value: string;
}

/** The variable that marks every process of one turn. */
export const TURN_MARK = 'THECLAW_TURN';
/** The variable that marks every process of one tool call. */
export const CALL_MARK = 'THECLAW_TOOL_CALL';

export function newMark(name: typeof TURN_MARK | typeof CALL_MARK): ProcessMark {
  return { name, value: randomBytes(9).toString('base64url') };
}

/** The environment entries that put `marks` on a process and its descendants. */
export function markedEnv(env: NodeJS.ProcessEnv, ...marks: ProcessMark[]): NodeJS.ProcessEnv {
  return { ...env, ...Object.fromEntries(marks.map((mark) => [mark.name, mark.value])) };
}

/** Pids of this user's live processes whose environment holds exactly `mark`; never this process. */
export function findMarked(mark: ProcessMark): number[] {
  const entry = `\0${mark.name}=${mark.value}\0`;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      // Another user's environ is unreadable (EACCES); a zombie's is empty.
      if (`\0${readFileSync(`/proc/${name}/environ`, 'latin1')}`.includes(entry)) found.push(Number(name));
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return found;
}

const KILL_ROUNDS = 50;
const ROUND_MS = 20;

/**
 * SIGKILLs every process carrying `mark` until none is left (a process may fork while the
 * others die; a killed one stays visible until the kernel has ended it), at most ~1 s. Returns
 * the pids that were signalled. SIGKILL, not SIGTERM first: the turn is over and nothing waits
 * for a clean shutdown; the command's own group got its SIGTERM on timeout and `/stop`.
 */
export async function killMarked(mark: ProcessMark): Promise<number[]> {
  const killed = new Set<number>();
  for (let round = 0; round < KILL_ROUNDS; round++) {
    const pids = findMarked(mark);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        killed.add(pid);
      } catch {
        // gone meanwhile
      }
    }
    await new Promise((resolve) => setTimeout(resolve, ROUND_MS));
  }
  return [...killed];
}

const RegistryEntrySchema = z.object({
  mark: z.object({ name: z.string(), value: z.string() }),
  owner: z.object({ pid: z.number(), start: z.nullable(z.number()) }),
});
type RegistryEntry = z.infer<typeof RegistryEntrySchema>;

/**
 * The turns under way, one small file each in `dir`, with the process that runs them: when that
 * process is killed (SIGKILL of `agent run`, of a warm runner), nothing ends its turns' processes,
 * so the next run reaps those of every entry whose owner is dead.
 */
export class TurnRegistry {
  constructor(private readonly dir: string) {}

  /**
   * Runs a turn under a new mark, noted here before its first command starts; when it ends, what
   * its commands left running is killed, then the note is removed.
   */
  async during<T>(turn: (mark: ProcessMark) => Promise<T>): Promise<T> {
    const mark = newMark(TURN_MARK);
    this.register(mark);
    try {
      return await turn(mark);
    } finally {
      await killMarked(mark);
      rmSync(this.fileOf(mark), { force: true });
    }
  }

  /** Kills the processes of turns whose owner died, and forgets those turns. Returns the pids killed. */
  async reap(): Promise<number[]> {
    const killed: number[] = [];
    for (const entry of this.entries()) {
      if (isAlive(entry.owner)) continue;
      killed.push(...(await killMarked(entry.mark)));
      rmSync(this.fileOf(entry.mark), { force: true });
    }
    return killed;
  }

  private register(mark: ProcessMark): void {
    const entry: RegistryEntry = { mark, owner: identify(process.pid) };
    const file = this.fileOf(mark);
    // A full disk leaves no half-written file behind.
    withStoragePath(file, () => writeFileWhole(file, JSON.stringify(entry) + '\n'));
  }

  private entries(): RegistryEntry[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const entries: RegistryEntry[] = [];
    for (const name of names.filter((file) => file.endsWith('.json'))) {
      try {
        const entry = RegistryEntrySchema.safeParse(JSON.parse(readFileSync(join(this.dir, name), 'utf8')));
        if (entry.success) entries.push(entry.data);
      } catch {
        // gone meanwhile (another run reaped it), or not JSON: not an entry this wrote
      }
    }
    return entries;
  }

  private fileOf(mark: ProcessMark): string {
    return join(this.dir, `${mark.value}.json`);
  }
}
