import { spawnSync } from 'node:child_process';
import { accessSync, constants, lstatSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { limitedBash, sizedTmp, type SandboxLimits } from './sandbox-limits.js';

/**
 * Where bash_exec's commands run when a sandbox is asked for: bubblewrap (`bwrap`) with the whole
 * file system read-only, some directories hidden behind an empty tmpfs, a few paths bound back in
 * (writable or not), its own `/tmp`, `/proc` and PID namespace (every process of the call ends
 * with it: when the command exits, bwrap's init exits and the kernel kills the rest of the
 * namespace, `setsid` and `nohup` included), a new session (no TIOCSTI into a terminal), and
 * optionally no network (its own network namespace: not even the host's loopback, nor abstract
 * Unix sockets; the directories of the system's socket files, `/run` and `/var/run`, are hidden
 * then too: a Unix socket on the file system is reachable from any network namespace). With
 * `limits`, each call runs under them (sandbox-limits.ts).
 *
 * Which paths are hidden and bound is the caller's business (an agent's profile, see
 * agent/sandbox-profile.ts); this module only turns them into bwrap's argv.
 */
export interface Sandbox {
  /** bwrap's path; null where it is not installed, and every call is refused. */
  bwrap: string | null;
  network: boolean;
  /** Directories replaced by an empty, read-only tmpfs (e.g. THECLAW_HOME). */
  hidden: readonly string[];
  /** Paths put back, in order (a later one over an earlier one); `optional` ones may be missing. */
  binds: readonly SandboxBind[];
  /** The only variables the command gets (with the process marks); every other is dropped. */
  env: readonly string[];
  /** What each call may use (sandbox-limits.ts); without them, as much as the user may. */
  limits?: SandboxLimits;
  /** Variables set in the sandbox besides those kept (where a narrow path leads). */
  setEnv?: Readonly<Record<string, string>>;
  /**
   * Runs outside the sandbox after each call, once every process of it has ended, before its
   * result is returned; what it returns is added to the call's stderr (what went wrong there).
   */
  afterCall?: () => string[] | Promise<string[]>;
  /**
   * Started outside the sandbox as each call starts, and closed once every process of it has
   * ended, before afterCall: what the call's commands ask the runtime while they run (a door
   * they knock on through a bound directory, agent/manage-door.ts).
   */
  serveCall?: () => CallService;
}

/** What serveCall started; `close` resolves once it is done with the call. */
export interface CallService {
  close(): Promise<void>;
}

export interface SandboxBind {
  path: string;
  writable: boolean;
  optional?: boolean;
}

/** What a call answers when the sandbox it needs is not installed. */
export const SANDBOX_MISSING = "the sandbox (bubblewrap) is not installed — apt-get install bubblewrap, or set sandbox.profile: none in the agent's config";

/** Variables every sandboxed command gets when set: nothing a daemon keeps (tokens, sockets). */
export const BASE_SANDBOX_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM'] as const;

/**
 * The bwrap argv (without bwrap itself) that runs `bash -c command` in `sandbox`, in `cwd`;
 * `rlimitsSet` when bwrap is started under the limits' rlimits already (a root's call, whose
 * cgroup set them: sandbox-limits.ts).
 */
export function sandboxArgs(sandbox: Sandbox, command: string, cwd: string, rlimitsSet = false): string[] {
  const args = ['--die-with-parent', '--unshare-pid', '--new-session', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', ...sizedTmp(sandbox.limits)];
  if (!sandbox.network) args.push('--unshare-net');
  const hidden = sandbox.network ? sandbox.hidden : [...socketDirs(), ...sandbox.hidden];
  // Shorter first: a hidden directory inside another (a home under /tmp) is mounted after it.
  for (const path of [...hidden].sort((a, b) => a.length - b.length)) args.push('--tmpfs', path);
  for (const bind of sandbox.binds) {
    const option = `${bind.writable ? '--bind' : '--ro-bind'}${bind.optional ? '-try' : ''}`;
    args.push(option, bind.path, bind.path);
  }
  // Read-only once the binds have their mount points in it: nothing written there would last.
  for (const path of hidden) args.push('--remount-ro', path);
  args.push('--chdir', cwd, '--', ...(sandbox.limits && !rlimitsSet ? limitedBash(sandbox.limits, command) : ['bash', '-c', command]));
  return args;
}

/**
 * Where the system keeps its Unix sockets (docker's, PostgreSQL's, D-Bus's, the user's session's
 * under /run/user, ssh and gpg agents there): the directories of `/run` and `/var/run` that are
 * not links to another (Debian's /var/run is one to /run). The sandbox's own /tmp and /dev already
 * hold none of the host's (`/tmp/.X11-unix`, `/dev/log`).
 */
function socketDirs(): string[] {
  socketDirsFound ??= ['/run', '/var/run'].filter((path) => {
    try {
      return lstatSync(path).isDirectory();
    } catch {
      return false;
    }
  });
  return socketDirsFound;
}

let socketDirsFound: string[] | undefined;

/**
 * Only the listed variables of `env`. bwrap itself gets no more than this either: it is pid 1 of
 * the sandbox, where `/proc/1/environ` is readable.
 */
export function sandboxEnv(env: NodeJS.ProcessEnv, names: readonly string[]): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = {};
  for (const name of names) if (env[name] !== undefined) kept[name] = env[name];
  return kept;
}

/** bwrap on `PATH`, else in /usr/bin; null when there is none. */
export function findBwrap(env: NodeJS.ProcessEnv = process.env): string | null {
  const dirs = [...(env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/bin'];
  for (const dir of dirs) {
    const path = join(dir, 'bwrap');
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Why bwrap cannot make a sandbox here (it is installed, but e.g. unprivileged user namespaces
 * are off, or it is older than 0.8 and cannot size /tmp, or `prlimit` is missing), or null when it
 * can: one call of `true` with the options every call uses.
 */
export function sandboxProblem(bwrap: string): string | null {
  const limits = { processes: 64, memoryMb: 256, fileSizeMb: 1, tmpMb: 1, diskMb: 1 };
  const probe: Sandbox = { bwrap, network: false, hidden: [], binds: [], env: [], limits };
  const result = spawnSync(bwrap, sandboxArgs(probe, 'true', '/'), { encoding: 'utf8', env: { PATH: process.env.PATH }, timeout: 10_000 });
  if (result.status === 0) return null;
  return (result.error?.message ?? result.stderr.trim()) || `bwrap exited with ${result.status ?? result.signal}`;
}
