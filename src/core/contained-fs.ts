import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, type Stats, unlinkSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ClawError, errnoCode } from './errors.js';

/**
 * Files in a directory a sandboxed command can write (an agent's memory/, workdir/, skills/,
 * index/, its outboxes), read and written by the runtime from outside the sandbox without ever
 * following a link a command left there: a link to service.env in place of memory/agent.md would
 * put the secret into every prompt, and a link in place of memory/conversations would let `/new`
 * write wherever it points.
 *
 * Node has no openat(2), so each step goes through Linux's /proc/self/fd/<fd>/<name>: the
 * directory already opened (by descriptor, so a rename of it or of its parents meanwhile changes
 * nothing) and one name in it, opened with O_NOFOLLOW. A path is walked from a trusted root (the
 * agent's directory, which no sandbox can write, or a directory bound into the sandbox, a mount
 * point there that no command can rename or replace) one component at a time, and a link anywhere
 * below the root is refused, never resolved; there is no check-then-use to race. A link in a
 * written file's own place is replaced (a rename never follows it); one in a reader's place or
 * on the way to either is an error (ContainedPathError) that callers report and go on.
 */

/** Why a path was refused: a link in it, or a thing that is not a plain file or directory (a FIFO would hang the reader). */
export class ContainedPathError extends ClawError {
  override name = 'ContainedPathError';
  constructor(
    readonly path: string,
    readonly reason: 'link' | 'not_plain',
  ) {
    super(
      'invalid',
      reason === 'link'
        ? `${path} is a link — the runtime does not follow links in a sandbox-writable directory`
        : `${path} is not a plain file or directory — the runtime reads only those in a sandbox-writable directory`,
      { suggestion: `remove it (rm ${path}) and put a plain file there` },
    );
  }
}

export function isContainedPathError(error: unknown): error is ContainedPathError {
  return error instanceof ContainedPathError;
}

/** What is at a path, read without following a link. */
export type ContainedKind = 'file' | 'dir' | 'link' | 'other';

/** An entry of a listed directory; links and other odd things are left out. */
export interface ContainedEntry {
  name: string;
  kind: 'file' | 'dir';
}

/** The test seam: called before each step opens `path` (a test swaps a link in there). */
export const containedFsHooks: { beforeOpen?: (path: string) => void } = {};

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = constants;

/** A plain file's bytes, or null when it (or a directory on its way) does not exist. */
export function readContained(root: string, path: string): Buffer | null {
  const steps = stepsOf(root, path);
  const file = steps.pop();
  if (file === undefined) throw new ContainedPathError(path, 'not_plain');
  return orMissing(() =>
    withDir(root, steps, false, (dir) => {
      const fd = openAt(dir, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, path);
      try {
        if (!fstatSync(fd).isFile()) throw new ContainedPathError(path, 'not_plain');
        return readFileSync(fd);
      } finally {
        closeSync(fd);
      }
    }),
  );
}

/** The same as text ('' for none). */
export function readTextContained(root: string, path: string): string {
  return readContained(root, path)?.toString('utf8') ?? '';
}

/** The stat of a plain file (null when missing): its size and time, for telling versions apart. */
export function statContained(root: string, path: string): Stats | null {
  const steps = stepsOf(root, path);
  const file = steps.pop();
  if (file === undefined) return null;
  return orMissing(() =>
    withDir(root, steps, false, (dir) => {
      const stat = lstatAt(dir, file);
      if (stat?.isSymbolicLink()) throw new ContainedPathError(path, 'link');
      return stat ?? null;
    }),
  );
}

/** What is at a path: null when it, or a directory on its way, is missing; a link on the way is refused. */
export function kindContained(root: string, path: string): ContainedKind | null {
  const steps = stepsOf(root, path);
  const last = steps.pop();
  if (last === undefined) return 'dir';
  return orMissing(() =>
    withDir(root, steps, false, (dir) => {
      const stat = lstatAt(dir, last);
      return stat ? kindOf(stat) : null;
    }),
  );
}

/**
 * Writes a file whole or not at all, mode 0600, making the directories on its way (0700): a
 * temporary file created anew (O_EXCL, so never opened through what is there) renamed over it.
 */
export function writeContained(root: string, path: string, data: string | Buffer): void {
  const steps = stepsOf(root, path);
  const file = steps.pop();
  if (file === undefined) throw new ContainedPathError(path, 'not_plain');
  withDir(root, steps, true, (dir) => {
    const temp = `.${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const fd = openAt(dir, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, path, 0o600);
    try {
      try {
        const bytes = typeof data === 'string' ? Buffer.from(data) : data;
        for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
      } finally {
        closeSync(fd);
      }
      renameSync(at(dir, temp), at(dir, file));
    } finally {
      rmSync(at(dir, temp), { force: true });
    }
  });
}

/** Makes a directory and the ones on its way (0700), refusing a link anywhere on it. */
export function ensureContainedDir(root: string, path: string): void {
  withDir(root, stepsOf(root, path), true, () => undefined);
}

/** Moves a file (or a link, as itself) to another place under the same root, making the target's directories. */
export function renameContained(root: string, from: string, to: string): void {
  const source = stepsOf(root, from);
  const target = stepsOf(root, to);
  const fromName = source.pop();
  const toName = target.pop();
  if (fromName === undefined || toName === undefined) throw new ContainedPathError(fromName === undefined ? from : to, 'not_plain');
  withDir(root, source, false, (fromDir) => withDir(root, target, true, (toDir) => renameSync(at(fromDir, fromName), at(toDir, toName))));
}

/** Removes a file or a link (as itself); nothing when it is missing. */
export function removeContained(root: string, path: string): void {
  const steps = stepsOf(root, path);
  const name = steps.pop();
  if (name === undefined) return;
  orMissing(() => withDir(root, steps, false, (dir) => unlinkSync(at(dir, name))));
}

/** Removes a file, a link (as itself) or a directory with all in it; nothing when it is missing. */
export function removeTreeContained(root: string, path: string): void {
  const kind = kindContained(root, path);
  if (kind === null) return;
  if (kind === 'dir') {
    const names = withDir(root, stepsOf(root, path), false, (dir) => readdirSync(`/proc/self/fd/${dir}`));
    for (const name of names) removeTreeContained(root, join(resolve(root, path), name));
    const steps = stepsOf(root, path);
    const last = steps.pop()!;
    withDir(root, steps, false, (dir) => rmdirSync(at(dir, last)));
  } else {
    removeContained(root, path);
  }
}

/** A directory's plain files and directories, by name; links and other things are left out ([] when it is missing). */
export function listContained(root: string, path: string): ContainedEntry[] {
  return (
    orMissing(() =>
      withDir(root, stepsOf(root, path), false, (dir) =>
        readdirSync(`/proc/self/fd/${dir}`, { withFileTypes: true })
          .flatMap((entry): ContainedEntry[] => (entry.isFile() ? [{ name: entry.name, kind: 'file' }] : entry.isDirectory() ? [{ name: entry.name, kind: 'dir' }] : []))
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
      ),
    ) ?? []
  );
}

/** Every plain file under a directory, as paths under it (`a/b.md`); links (the directory's own too) and dot names left out. */
export function listFilesContained(root: string, path: string): string[] {
  let entries: ContainedEntry[];
  try {
    entries = listContained(root, path);
  } catch (error) {
    if (isContainedPathError(error)) return [];
    throw error;
  }
  return entries
    .filter((entry) => !entry.name.startsWith('.'))
    .flatMap((entry) => (entry.kind === 'file' ? [entry.name] : listFilesContained(root, join(resolve(root, path), entry.name)).map((name) => `${entry.name}/${name}`)));
}

/** A directory held open (made if missing, no link followed): `path` names it by descriptor, whatever is renamed meanwhile, until `release`. */
export interface HeldDir {
  path: string;
  release(): void;
}

/**
 * Holds a directory open, for a library that opens files by path (SQLite): names in `path` are
 * looked up in the held directory itself. The library follows a link in a file's own place, so
 * the caller checks those (kindContained on `path`).
 */
export function holdContainedDir(root: string, path: string): HeldDir {
  const steps = stepsOf(root, path);
  const dir = withDir(root, steps, true, (fd) => openSync(`/proc/self/fd/${fd}`, O_RDONLY | O_DIRECTORY));
  return { path: `/proc/self/fd/${dir}`, release: () => closeSync(dir) };
}

/** What `read` gives, or null when something on the way is missing. */
function orMissing<T>(read: () => T): T | null {
  try {
    return read();
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
}

/** The names from the root to a path under it; a path outside it is a programming error. */
function stepsOf(root: string, path: string): string[] {
  const rel = relative(resolve(root), resolve(root, path));
  if (rel === '') return [];
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) throw new Error(`${path} is not under ${root}`);
  return rel.split(sep);
}

/** Runs `use` with the directory of `steps` open, each step opened without following a link. */
function withDir<T>(root: string, steps: readonly string[], create: boolean, use: (dir: number) => T): T {
  let dir = openSync(root, O_RDONLY | O_DIRECTORY);
  try {
    let walked = resolve(root);
    for (const step of steps) {
      walked = join(walked, step);
      if (create) {
        try {
          mkdirSync(at(dir, step), { mode: 0o700 });
        } catch (error) {
          if (errnoCode(error) !== 'EEXIST') throw error;
        }
      }
      const next = openAt(dir, step, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, walked);
      closeSync(dir);
      dir = next;
    }
    return use(dir);
  } finally {
    closeSync(dir);
  }
}

/** openat(dir, name, flags) without following a link in `name`'s place (named `path` in the error). */
function openAt(dir: number, name: string, flags: number, path: string, mode?: number): number {
  containedFsHooks.beforeOpen?.(path);
  try {
    return openSync(at(dir, name), flags, mode);
  } catch (error) {
    const code = errnoCode(error);
    if (code !== 'ELOOP' && code !== 'ENOTDIR') throw error;
    const stat = lstatAt(dir, name);
    // ELOOP under O_NOFOLLOW: a link stood there. ENOTDIR with a folder or nothing there now: the
    // open met a link that was swapped out meanwhile. Only a plain file is what ENOTDIR says.
    if (code === 'ELOOP' || stat?.isSymbolicLink() || ((flags & O_DIRECTORY) !== 0 && !stat?.isFile() && (stat === undefined || stat.isDirectory()))) throw new ContainedPathError(path, 'link');
    if (stat && !stat.isDirectory() && !stat.isFile()) throw new ContainedPathError(path, 'not_plain');
    throw error;
  }
}

function lstatAt(dir: number, name: string): Stats | undefined {
  return lstatSync(at(dir, name), { throwIfNoEntry: false });
}

function kindOf(stat: Stats): ContainedKind {
  if (stat.isSymbolicLink()) return 'link';
  if (stat.isFile()) return 'file';
  return stat.isDirectory() ? 'dir' : 'other';
}

/** A name in an open directory, as a path the kernel resolves through the descriptor (openat's). */
function at(dir: number, name: string): string {
  return `/proc/self/fd/${dir}/${name}`;
}
