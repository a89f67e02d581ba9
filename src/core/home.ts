import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The data root every tool shares: `$THECLAW_HOME`, default `~/.theclaw`. Resolved to an
 * absolute path so that paths stored in one process (subscriptions, registry) mean the same thing
 * in another process started from a different directory.
 */
export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.THECLAW_HOME?.trim();
  return resolve(configured ? configured : join(homedir(), '.theclaw'));
}

/** `mkdir -p` that returns its argument, for paths created on first use. */
export function ensureDir(path: string): string {
  mkdirSync(path, { recursive: true });
  return path;
}

/** `$THECLAW_HOME/run/`: pid files and sockets of the daemons. */
export function runDir(home: string): string {
  return join(home, 'run');
}

/** `$THECLAW_HOME/logs/`: logs of components that are not an agent or a thread. */
export function logsDir(home: string): string {
  return join(home, 'logs');
}

// Linux caps a Unix socket path at 107 bytes. A deep THECLAW_HOME would make `listen` fail, so a
// long path is replaced by a short one in the temp directory, derived from the home so that every
// process of the same home still finds it.
const MAX_SOCKET_PATH = 100;

/** The Unix socket of a daemon (`notifier`, `xgw`) of this home. */
export function socketPath(home: string, name: string): string {
  const preferred = join(runDir(home), `${name}.sock`);
  if (Buffer.byteLength(preferred) <= MAX_SOCKET_PATH) return preferred;
  const digest = createHash('sha256').update(home).digest('hex').slice(0, 16);
  return join(tmpdir(), `theclaw-${digest}`, `${name}.sock`);
}
