import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmdirSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errnoCode } from '../core/errors.js';

/**
 * A small tmpfs of its own for tests of a full or read-only disk: it can be filled to the last
 * page and remounted read-only, which a directory on the machine's disk cannot. Needs root (the
 * tests run as root here and in CI); `tmpfsUnavailable` says why not, for a skip message.
 */
export interface Tmpfs {
  /** The mount point. */
  readonly dir: string;
  /** Writes a filler file until the file system says ENOSPC. */
  fill(): void;
  /** Removes the filler. */
  free(): void;
  /** `mount -o remount,ro`: refused (EBUSY) while a process holds a file of it open for writing. */
  readOnly(): void;
  /** `mount -o remount,rw`. */
  readWrite(): void;
  /** Frees, remounts read-write and unmounts it; safe to call twice. */
  unmount(): void;
}

const FILLER = '.filler';

/** Mounts a tmpfs of `sizeBytes` on a new directory under the temp directory. */
export function mountTmpfs(sizeBytes: number): Tmpfs {
  const dir = mkdtempSync(join(tmpdir(), 'theclaw-tmpfs-'));
  try {
    mount(['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0755`, 'tmpfs', dir]);
  } catch (error) {
    rmdirSync(dir);
    throw error;
  }
  let mounted = true;
  const tmpfs: Tmpfs = {
    dir,
    fill() {
      const fd = openSync(join(dir, FILLER), 'a');
      const chunk = Buffer.alloc(64 * 1024);
      try {
        for (;;) writeSync(fd, chunk, 0, chunk.length);
      } catch (error) {
        if (errnoCode(error) !== 'ENOSPC') throw error;
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(join(dir, FILLER), { force: true });
    },
    readOnly() {
      mount(['-o', 'remount,ro', dir]);
    },
    readWrite() {
      mount(['-o', 'remount,rw', dir]);
    },
    unmount() {
      if (!mounted) return;
      try {
        tmpfs.readWrite();
        tmpfs.free();
      } finally {
        // Lazy: a straggling child process must not leave the mount (and the test run) hanging.
        mount(['-l', dir], 'umount');
        mounted = false;
        rmdirSync(dir);
      }
    },
  };
  return tmpfs;
}

/** Why a tmpfs cannot be mounted here, or null when it can (found out by mounting one). */
export const tmpfsUnavailable: string | null = probe();

function probe(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root';
  try {
    mountTmpfs(1 << 20).unmount();
    return null;
  } catch (error) {
    return `mount failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`;
  }
}

function mount(args: string[], command = 'mount'): void {
  execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
