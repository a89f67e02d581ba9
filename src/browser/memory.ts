import { readdirSync, readFileSync } from 'node:fs';
import { residentBytes } from '../core/process.js';

/**
 * The memory a browser uses: the proportional set size (PSS: each shared page counted once across
 * the processes sharing it; summing their RSS would count Chromium's shared code many times) of
 * its main process (the child of this process whose command line names the profile) and of all
 * that process's descendants (renderers, GPU, network service). Playwright does not give a
 * persistent context's process id, so /proc tells.
 */
export function browserMemoryBytes(profileDir: string, parentPid: number = process.pid): number {
  const parents = new Map<number, number>();
  let root: number | undefined;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const ppid = parentOf(pid);
    if (ppid === null) continue;
    parents.set(pid, ppid);
    if (ppid === parentPid && root === undefined && commandLine(pid).includes(`--user-data-dir=${profileDir}`)) root = pid;
  }
  if (root === undefined) return 0;
  let total = 0;
  for (const pid of parents.keys()) if (descends(pid, root, parents)) total += proportionalBytes(pid) ?? residentBytes(pid) ?? 0;
  return total;
}

function descends(pid: number, root: number, parents: Map<number, number>): boolean {
  for (let at: number | undefined = pid, hops = 0; at !== undefined && hops < 64; at = parents.get(at), hops++) if (at === root) return true;
  return false;
}

function parentOf(pid: number): number | null {
  try {
    // The command name (in parentheses) may hold spaces and parentheses: the fields follow the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** `Pss` of /proc/<pid>/smaps_rollup in bytes, or null where the system does not tell. */
function proportionalBytes(pid: number): number | null {
  try {
    const kb = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}
