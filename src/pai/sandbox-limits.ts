import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { lstat, readdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../core/errors.js';

/**
 * What one sandboxed call may use, and how each limit is made (none needs more than bubblewrap,
 * util-linux's `prlimit`):
 *
 * - `processes`: RLIMIT_NPROC, set inside the sandbox once bwrap made its user namespace, where the
 *   kernel (5.14+) counts only the sandbox's own processes and threads. The kernel exempts root from
 *   it, so when the runtime runs as root the call gets a pids cgroup of its own instead (v1 or v2).
 * - `memoryMb`: RLIMIT_DATA, per process (heap and private writable memory). Not RLIMIT_AS: Node
 *   (WebAssembly, so `fetch`) reserves far more address space than it uses.
 * - `fileSizeMb`: RLIMIT_FSIZE (a bigger write gets SIGXFSZ or EFBIG).
 * - `tmpMb`: the size of the sandbox's own tmpfs `/tmp` (bwrap 0.8+ `--size`).
 * - `diskMb`: what the sandbox's writable binds hold together, measured every second of a call
 *   and when it ends (walked only when their file systems filled enough, see diskUseAtMost): over
 *   it, the call is killed or fails. A measure, not a quota: a call can pass it by what it writes
 *   within a second.
 */
export interface SandboxLimits {
  processes: number;
  memoryMb: number;
  fileSizeMb: number;
  tmpMb: number;
  diskMb: number;
}

const MB = 1024 * 1024;

/** `bash -c command` under the per-process limits; run inside the sandbox, past its namespaces. */
export function limitedBash(limits: SandboxLimits, command: string): string[] {
  return ['prlimit', `--nproc=${limits.processes}`, `--data=${limits.memoryMb * MB}`, `--fsize=${limits.fileSizeMb * MB}`, 'bash', '-c', command];
}

/** bwrap's options that size its `/tmp`. */
export function sizedTmp(limits: SandboxLimits | undefined): string[] {
  return limits ? ['--size', String(limits.tmpMb * MB), '--tmpfs', '/tmp'] : ['--tmpfs', '/tmp'];
}

/** A call's own pids cgroup: bwrap is moved in before it starts, so every process of the call is in it. */
export interface ProcessGroup {
  /** `[file, argv]` that runs `file argv` inside the cgroup, under the limits' rlimits. */
  wrap(file: string, argv: string[]): [string, string[]];
  /** Whether a fork was refused for the limit. */
  reached(): boolean;
  /** Removes the cgroup once every process of it ended (soon after the call). */
  remove(): void;
}

const REMOVE_ATTEMPTS = 100;
const REMOVE_RETRY_MS = 100;

/** Where pids cgroups can be made (v2 with `pids` enabled, or v1's pids hierarchy), found once. */
let pidsParent: string | null | undefined;

/**
 * The call's pids cgroup when the runtime is root (which RLIMIT_NPROC does not bind), or null
 * when it is not or no cgroup can be made here (a container without cgroup access).
 */
export function processGroup(limits: SandboxLimits, name: string): ProcessGroup | null {
  if (process.getuid?.() !== 0) return null;
  pidsParent ??= findPidsParent();
  if (pidsParent === null) return null;
  const dir = join(pidsParent, name);
  try {
    mkdirSync(dir);
  } catch {
    return null;
  }
  // The kernel may still be taking the namespace's last processes down when the call has ended:
  // the cgroup is busy until then.
  const remove = (attempt = 0) => {
    try {
      rmdirSync(dir);
    } catch (error) {
      if (errnoCode(error) === 'EBUSY' && attempt < REMOVE_ATTEMPTS) setTimeout(() => remove(attempt + 1), REMOVE_RETRY_MS).unref();
    }
  };
  try {
    writeFileSync(join(dir, 'pids.max'), String(limits.processes));
  } catch {
    remove();
    return null;
  }
  return {
    // The shell moves itself in, then becomes bwrap: nothing forks before it is in the cgroup. It
    // sets the other limits too (ulimit -d in KiB, -f in POSIX's 512-byte blocks), which saves the call
    // prlimit's start. It adds PWD to the environment, which bwrap, the sandbox's pid 1, is to
    // get no more than listed.
    wrap: (file, argv) => [
      '/bin/sh',
      ['-c', `echo $$ > "$0" && ulimit -d ${limits.memoryMb * 1024} && ulimit -f ${limits.fileSizeMb * 2048} && unset PWD && exec "$@"`, join(dir, 'cgroup.procs'), file, ...argv],
    ],
    reached: () => /^max [1-9]/m.test(readOr(join(dir, 'pids.events'))),
    remove: () => remove(),
  };
}

function findPidsParent(): string | null {
  const candidates = [
    // v2: a parent of our own, whose children get the pids controller.
    { root: '/sys/fs/cgroup', ok: () => readOr('/sys/fs/cgroup/cgroup.controllers').split(' ').includes('pids'), enable: true },
    { root: '/sys/fs/cgroup/pids', ok: () => existsSync('/sys/fs/cgroup/pids/cgroup.procs'), enable: false },
  ];
  for (const { root, ok, enable } of candidates) {
    try {
      if (!ok()) continue;
      const parent = join(root, 'theclaw-sandbox');
      mkdirSync(parent, { recursive: true });
      if (enable) {
        writeFileSync(join(root, 'cgroup.subtree_control'), '+pids');
        writeFileSync(join(parent, 'cgroup.subtree_control'), '+pids');
      }
      return parent;
    } catch {
      // not writable here
    }
  }
  return null;
}

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return '';
  }
}

/**
 * Bytes the paths hold on disk together, as `du -sx` counts them (each file once, however many
 * links or paths lead to it; not into another file system mounted inside), walked in-process:
 * starting `du` would cost a call as much as starting its bash.
 */
export async function diskUse(paths: readonly string[]): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const walk = async (path: string, dev: number | null): Promise<void> => {
    const stat = await lstat(path).catch(() => null); // removed meanwhile: nothing
    if (!stat || (dev !== null && stat.dev !== dev)) return;
    const id = `${stat.dev}:${stat.ino}`;
    if (seen.has(id)) return;
    seen.add(id);
    total += stat.blocks * 512;
    if (!stat.isDirectory()) return;
    const names = await readdir(path).catch(() => []);
    await Promise.all(names.map((name) => walk(join(path, name), stat.dev)));
  };
  await Promise.all(paths.map((path) => walk(path, null)));
  return total;
}

/** The last walk of a set of paths, and how full their file systems were then. */
interface DiskWalk {
  bytes: number;
  filled: number;
  at: number;
}

const lastWalks = new Map<string, DiskWalk>();
/** However little the file systems grew, the paths are walked again after this. */
const WALK_AT_LEAST_EVERY_MS = 60_000;

/**
 * What the paths hold, or more: walked (a second per 25,000 files on a loaded machine) only when
 * their file systems filled by enough since the last walk to take them past `capBytes`, or a
 * minute went by; else the last walk plus that growth, a bound from above, from one statfs each.
 * Space others free meanwhile hides as much growth, for a minute at most.
 */
export async function diskUseAtMost(paths: readonly string[], capBytes: number, now: () => number = Date.now): Promise<number> {
  const key = paths.join('\0');
  const filled = await fileSystemsFilled(paths);
  const last = lastWalks.get(key);
  if (last && now() - last.at < WALK_AT_LEAST_EVERY_MS) {
    const bound = last.bytes + Math.max(0, filled - last.filled);
    if (bound <= capBytes) return bound;
  }
  const bytes = await diskUse(paths);
  lastWalks.set(key, { bytes, filled, at: now() });
  return bytes;
}

/** Bytes in use on the file systems the paths are on, each counted once. */
async function fileSystemsFilled(paths: readonly string[]): Promise<number> {
  const byDevice = new Map<number, string>();
  for (const path of paths) {
    const stat = await lstat(path).catch(() => null);
    if (stat) byDevice.set(stat.dev, path);
  }
  let filled = 0;
  for (const path of byDevice.values()) {
    const fs = await statfs(path).catch(() => null);
    if (fs) filled += (fs.blocks - fs.bfree) * fs.bsize;
  }
  return filled;
}

/**
 * Measures what `paths` hold every second while a call runs, calling `over` (once) when it is more
 * than the disk limit; `end` measures a last time once the call is over.
 */
export function watchDisk(paths: readonly string[], limits: SandboxLimits, over: (bytes: number) => void): { end(): Promise<number> } {
  const cap = limits.diskMb * MB;
  let measuring: Promise<number> | null = null;
  let told = false;
  const timer = setInterval(() => {
    measuring ??= diskUseAtMost(paths, cap).then((bytes) => {
      measuring = null;
      if (bytes > cap && !told) {
        told = true;
        over(bytes);
      }
      return bytes;
    });
  }, DISK_POLL_MS);
  return {
    async end() {
      clearInterval(timer);
      await measuring;
      return diskUseAtMost(paths, cap);
    },
  };
}

const DISK_POLL_MS = 1_000;

/** What a call ended with, to name the limit it ran into. */
export interface CallOutcome {
  exitCode: number;
  stderr: string;
  /** The call's pids cgroup refused a fork. */
  processesReached: boolean;
}

/**
 * Lines for the call's stderr naming each limit it ran into. The kernel only says EAGAIN, ENOMEM,
 * ENOSPC or EFBIG, so besides SIGXFSZ and the cgroup's count this reads the command's own error
 * output for those errors' standard wording.
 */
export function limitsReached(limits: SandboxLimits, outcome: CallOutcome): string[] {
  const { stderr } = outcome;
  const lines: string[] = [];
  const ask = (setting: string) => `or ask the owner to raise sandbox.limits.${setting} in the agent's config`;
  if (outcome.processesReached || /(fork|spawn|clone|thread).*(Resource temporarily unavailable|EAGAIN)|EAGAIN.*(fork|spawn)/i.test(stderr)) {
    lines.push(`the sandbox's process limit (${limits.processes} processes and threads at once) was reached - run fewer at once, ${ask('processes')}`);
  }
  if (/Cannot allocate memory|out of memory|memory exhausted|allocation failed|MemoryError|ENOMEM|cannot allocate/i.test(stderr)) {
    lines.push(`the sandbox's memory limit (${limits.memoryMb} MB of data per process) was probably reached - use less at once, ${ask('memory_mb')}`);
  }
  if (outcome.exitCode === 128 + SIGXFSZ || /File size limit exceeded|File too large|EFBIG/i.test(stderr)) {
    lines.push(`the sandbox's file size limit (${limits.fileSizeMb} MB) was reached - write smaller files, ${ask('file_size_mb')}`);
  }
  if (/No space left on device|ENOSPC/i.test(stderr)) {
    lines.push(`a write found no space: the sandbox's /tmp holds at most ${limits.tmpMb} MB - if it was there, write in the working directory instead, ${ask('tmp_mb')}`);
  }
  return lines;
}

const SIGXFSZ = 25;

/** The line of a call whose writable directories hold more than the disk limit, or null. */
export function diskLimitReached(limits: SandboxLimits, bytes: number): string | null {
  if (bytes <= limits.diskMb * MB) return null;
  return `the sandbox's disk limit was reached: the agent's writable directories hold ${Math.ceil(bytes / MB)} MB, over ${limits.diskMb} MB - remove files there (every call fails until they are under it), or ask the owner to raise sandbox.limits.disk_mb in the agent's config`;
}
