/**
 * What the benchmarks measure with: figures and their targets, medians and percentiles, waits, and
 * the CPU and memory of process trees read from /proc (Linux).
 */
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface Figure {
  name: string;
  value: number;
  unit: string;
  target: string;
  ok: boolean;
}

/** Every figure recorded so far, in order: what `npm run bench` prints as JSON at the end. */
export const figures: Figure[] = [];
export const now = () => performance.timeOrigin + performance.now();

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function record(name: string, value: number, unit: string, target: { atLeast?: number; atMost?: number }): void {
  const ok = (target.atLeast === undefined || value >= target.atLeast) && (target.atMost === undefined || value <= target.atMost);
  const text = target.atLeast !== undefined ? `>= ${target.atLeast}` : `<= ${target.atMost}`;
  figures.push({ name, value: Math.round(value * 100) / 100, unit, target: `${text} ${unit}`, ok });
  console.error(`${ok ? 'ok  ' : 'MISS'} ${name}: ${Math.round(value * 100) / 100} ${unit} (target ${text})`);
}

export async function waitUntil(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('benchmark wait timed out');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Resident memory of a process, from /proc (Linux), in MB. */
export function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.replace(/\D+/g, '')) / 1024;
}

/** The p-th percentile (nearest rank). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Every live process below the given ones (their children, grandchildren, ...), the given ones too. */
export function processTree(roots: number[]): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // Field 4 is the parent pid; the command name (field 2) may hold spaces, so split after it.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const tree: number[] = [];
  const queue = [...roots];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** CPU seconds the processes have used, their reaped children's included. */
export function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, cutime, cstime: fields 14-17, here 11-14 (counted from field 3).
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // gone meanwhile: its time is in its parent's cutime once reaped
    }
  }
  return ticks / 100; // USER_HZ
}

export function totalRssMb(pids: number[]): number {
  return pids.reduce((sum, pid) => {
    try {
      return sum + rssMb(pid);
    } catch {
      return sum;
    }
  }, 0);
}

export function daemonPid(home: string, name: 'notifier' | 'xgw'): number {
  return (JSON.parse(readFileSync(join(home, 'run', `${name}.pid`), 'utf8')) as { pid: number }).pid;
}

/**
 * CPU seconds used so far by this process and every process started below it since the first
 * call, wherever they went: a turn's command runs in bubblewrap, which does not wait for the
 * sandbox's processes, so their time never reaches a parent's cutime. Read from a cpuacct cgroup
 * of this process's own (cgroup v1, root); null where there is none. Not cgroup v2's: there a
 * sandboxed call run as root moves to a pids cgroup of its own (pai/sandbox-limits.ts), out of it.
 */
export function treeCpuSeconds(): number | null {
  benchCgroup ??= ownCgroup();
  return benchCgroup ? Number(readFileSync(join(benchCgroup, 'cpuacct.usage'), 'utf8')) / 1e9 : null;
}

let benchCgroup: string | null | undefined;

function ownCgroup(): string | null {
  const dir = `/sys/fs/cgroup/cpuacct/theclaw-bench-${process.pid}`;
  try {
    mkdirSync(dir);
  } catch {
    return null;
  }
  try {
    writeFileSync(join(dir, 'cgroup.procs'), String(process.pid));
    return dir;
  } catch {
    rmdirSync(dir);
    return null;
  }
}

/**
 * Leaves the cgroup treeCpuSeconds made and removes it once the processes started from here have
 * left it too (a daemon that was told to stop may still be ending), or leaves it to them after 10 s.
 */
export async function leaveCgroup(): Promise<void> {
  if (!benchCgroup) return;
  const cgroup = benchCgroup;
  writeFileSync(join(dirname(cgroup), 'cgroup.procs'), String(process.pid));
  await waitUntil(() => readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').trim() === '', 10_000).catch(() => {});
  try {
    rmdirSync(cgroup);
  } catch {
    // a process started from here still runs in it: left to it
  }
}
