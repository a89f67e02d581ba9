import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { ClawError, errnoCode } from './errors.js';
import { daemonSocketFile, type DaemonName } from './layout.js';

/**
 * The data root every tool shares: `$THECLAW_HOME`, default `~/.theclaw`. Resolved to an
 * absolute path so that paths stored in one process (subscriptions, registry) mean the same thing
 * in another process started from a different directory.
 */
export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.THECLAW_HOME?.trim();
  return resolve(configured ? configured : join(homedir(), '.theclaw'));
}

/**
 * `mkdir -p` (private: 0700) that returns its argument, for paths created on first use. Node's
 * own recursive mkdir never returns where an existing directory refuses a new one with ENOENT
 * (`/proc/x`: it spins, retrying the parent): this makes the missing directories one by one
 * from the nearest existing one, and throws the first refusal.
 */
export function ensureDir(path: string): string {
  const missing: string[] = [];
  for (let at = resolve(path); !isDirectory(at); at = dirname(at)) {
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST') throw error;
    }
  }
  return path;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

// Linux caps a Unix socket path at 107 bytes. A deep THECLAW_HOME would make `listen` fail, so a
// long path is replaced by a short one in the temp directory, derived from the home so that every
// process of the same home still finds it.
const MAX_SOCKET_PATH = 100;

/**
 * The Unix socket of a daemon (`notifier`, `xgw`) of this home. The temp directory is shared with
 * other users, who could create the short directory first and listen in the daemon's place: it
 * is created private, and used only if it is a real directory of this user that nobody else
 * may enter (else a `conflict`).
 */
export function socketPath(home: string, name: DaemonName): string {
  const preferred = daemonSocketFile(home, name);
  if (Buffer.byteLength(preferred) <= MAX_SOCKET_PATH) return preferred;
  const digest = createHash('sha256').update(home).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `theclaw-${digest}`);
  ensurePrivateDir(dir, home);
  return join(dir, `${name}.sock`);
}

function ensurePrivateDir(dir: string, home: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
  }
  const stat = lstatSync(dir);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o077) !== 0) {
    throw new ClawError('conflict', `${dir} is not a private directory of this user, and the sockets of ${home} would live there because its path is too long for a socket`, {
      suggestion: `set a shorter THECLAW_HOME (at most ${MAX_SOCKET_PATH - 20} bytes), or remove ${dir} if it is yours`,
    });
  }
}
