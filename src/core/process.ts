import { readFileSync } from 'node:fs';
import { errnoCode } from './errors.js';

/**
 * Who holds something (a lock, a lease): a pid, and where the system tells it, the process's start
 * time, so that a pid reused by an unrelated process after the holder died is not taken for the
 * holder.
 */
export interface ProcessIdentity {
  pid: number;
  /** Start time in clock ticks since boot (Linux `/proc/<pid>/stat` field 22); null elsewhere. */
  start: number | null;
}

interface ProcStat {
  /** R, S, D, Z (zombie), X (dead), ... */
  state: string;
  start: number | null;
}

/** `/proc/<pid>/stat` where the system has it (Linux). */
function readProcStat(pid: number): ProcStat | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses; fields are counted after its
    // closing parenthesis, where field 3 (state) is the first.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const start = Number(fields[19]);
    return { state: fields[0] ?? '', start: Number.isFinite(start) ? start : null };
  } catch {
    return null;
  }
}

/** Resident memory of a process in bytes (`VmRSS`), or null where the system does not tell. */
export function residentBytes(pid: number): number | null {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}

/**
 * The environment a process was started with (`/proc/<pid>/environ`), or null where the system
 * does not tell (or the process is gone). Same user only: it holds the process's secrets.
 */
export function processEnvironment(pid: number): NodeJS.ProcessEnv | null {
  try {
    const env: NodeJS.ProcessEnv = {};
    for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
      const eq = entry.indexOf('=');
      if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
    }
    return env;
  } catch {
    return null;
  }
}

export function processStartTime(pid: number): number | null {
  return readProcStat(pid)?.start ?? null;
}

export function identify(pid: number): ProcessIdentity {
  return { pid, start: processStartTime(pid) };
}

/**
 * Whether the process is alive and is the same process that was identified. A zombie counts as
 * dead: a daemon that exited stays a zombie until its parent (often init, which may be slow)
 * reaps it, and it holds nothing any more.
 */
export function isAlive(holder: ProcessIdentity): boolean {
  if (!Number.isInteger(holder.pid) || holder.pid <= 0) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else, so it is alive.
    if (errnoCode(error) !== 'EPERM') return false;
  }
  const stat = readProcStat(holder.pid);
  if (stat === null) return true; // no /proc: the signal check is all there is
  if (stat.state === 'Z' || stat.state === 'X') return false;
  return holder.start === null || stat.start === null || stat.start === holder.start;
}

/**
 * Sends `signal` to the process group led by `pid` (children spawned `detached` lead their own
 * group). Returns false when no such group exists. Never the bare pid: after the child exited
 * and was reaped, its pid may belong to an unrelated process, while a group id stays taken as
 * long as any member of the group lives.
 */
export function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

export interface WatchGroupOptions {
  /** Kill the group this long after the watch began. */
  timeoutMs: number;
  /** Between SIGTERM and SIGKILL, for the group to end cleanly. */
  graceMs: number;
  /** Kill the group when this aborts (abort is not failure: `killedFor` says which it was). */
  signal?: AbortSignal;
}

export interface GroupWatch {
  /** Why the group was killed, or null while it was not. */
  readonly killedFor: 'timeout' | 'aborted' | null;
  /**
   * Call once the child exited: clears the timers and, if the group was killed, sends it a last
   * SIGKILL for whatever the child left running in it.
   */
  release(): void;
}

/**
 * Ends a detached child's process group when its time is up or `signal` aborts: SIGTERM to the
 * whole group, then SIGKILL after `graceMs` for what ignored it.
 */
export function watchGroup(pid: number, options: WatchGroupOptions): GroupWatch {
  let killedFor: GroupWatch['killedFor'] = null;
  let graceTimer: NodeJS.Timeout | undefined;
  const kill = (reason: 'timeout' | 'aborted') => {
    if (killedFor) return;
    killedFor = reason;
    killGroup(pid, 'SIGTERM');
    graceTimer = setTimeout(() => killGroup(pid, 'SIGKILL'), options.graceMs);
  };
  const timer = setTimeout(() => kill('timeout'), options.timeoutMs);
  const onAbort = () => kill('aborted');
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  return {
    get killedFor() {
      return killedFor;
    },
    release() {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      options.signal?.removeEventListener('abort', onAbort);
      if (killedFor) killGroup(pid, 'SIGKILL');
    },
  };
}
