import { freePort } from './free-port.js';
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A throwaway PostgreSQL cluster for tests: `initdb` and `pg_ctl` (Debian's, `.ci/run` installs
 * them) on a Unix socket in a private directory and a free loopback port, trust authentication,
 * durability off (a test's data need not outlive it). As root the server runs as the `postgres`
 * user, which PostgreSQL demands. One cluster per test file, started in `beforeAll`: initdb
 * costs seconds. `postgresUnavailable` says why none can be had, for a skip that says so.
 */
export interface PostgresCluster {
  /** The URL of the `postgres` database, as the superuser `postgres`. */
  readonly url: string;
  /** Creates a database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** The server's main process (its connections' processes are its children), for the bench's CPU and memory. */
  serverPid(): number;
  /**
   * Stops the server as an upgrade's restart does (`-m fast`: its connections are cut, what was
   * committed is kept; `immediate` could lose the last commits, which run without synchronous
   * commit here), keeping its files, for `restart`.
   */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port and data. */
  restart(): Promise<void>;
  /**
   * Stops the server's processes (SIGSTOP) without closing a connection, as a host that stops
   * answering (cut off, or hung) looks to its clients: their queries wait; `thaw` lets them on.
   */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** Stops the server at once and removes its files; safe to call twice. */
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /**
   * PostgreSQL's own durability (fsync, synchronous commit), as a real deployment runs it: for
   * the bench, which sets it against SQLite's. Default: off, a test's data need not outlive it.
   */
  durable?: boolean;
  /** Counts the statements each database runs (`pg_stat_statements`), for the bench's statements per message. Default: off. */
  statementStats?: boolean;
}

const run = promisify(execFile);
const PG_ROOT = '/usr/lib/postgresql';

/** The newest installed PostgreSQL's bin directory, or null. */
function postgresBin(): string | null {
  const versions = existsSync(PG_ROOT) ? readdirSync(PG_ROOT).filter((v) => existsSync(join(PG_ROOT, v, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  return newest === undefined ? null : join(PG_ROOT, newest, 'bin');
}

const asRoot = userInfo().uid === 0;

/** Why no cluster can be started here, or null when one can. */
export function postgresUnavailable(): string | null {
  if (postgresBin() === null) return `no PostgreSQL: ${PG_ROOT}/*/bin/initdb is missing (apt-get install postgresql)`;
  if (asRoot && !existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser')) return 'no PostgreSQL: running as root without runuser to start it as postgres';
  return null;
}

/** A test name's note: which tests skip here, and why. */
export const NEEDS_POSTGRES = `needs PostgreSQL${postgresUnavailable() ? `: ${postgresUnavailable()}` : ''}`;

export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresCluster> {
  const bin = postgresBin();
  if (bin === null) throw new Error(postgresUnavailable()!);
  const dir = mkdtempSync(join(tmpdir(), 'theclaw-pg-'));
  const data = join(dir, 'data');
  const socket = join(dir, 'socket');
  mkdirSync(socket);
  if (asRoot) {
    const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
    const [uid, gid] = [await id('-u'), await id('-g')];
    chownSync(dir, uid, gid);
    chownSync(socket, uid, gid);
  }
  const pg = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args));
  let started = false;
  let settings = '';
  const halt = async (mode = 'fast') => {
    if (!started) return;
    started = false;
    await pg('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
  };
  const start = async () => {
    await pg('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-o', settings, '-w', '-t', '60', 'start']);
    started = true;
  };
  const stop = async () => {
    await halt('immediate').catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync']);
    const port = await freePort();
    const durability = options.durable ? '' : ' -c fsync=off -c synchronous_commit=off -c full_page_writes=off';
    const stats = options.statementStats ? ' -c shared_preload_libraries=pg_stat_statements' : '';
    settings = `-c listen_addresses=127.0.0.1 -p ${port} -k ${socket}${durability}${stats}`;
    await start();
    const serverPid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    /** The server and its children (every backend and worker is the postmaster's child). */
    const signalServer = async (signal: NodeJS.Signals) => {
      const children = (await run('pgrep', ['-P', String(serverPid())]).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean).map(Number);
      for (const pid of [serverPid(), ...children]) process.kill(pid, signal);
    };
    const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
    return {
      url: url('postgres'),
      async createDatabase(name) {
        await pg('psql', ['-h', socket, '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-q', '-c', `CREATE DATABASE "${name}"`]);
        return url(name);
      },
      serverPid,
      halt: () => halt(),
      restart: start,
      freeze: () => signalServer('SIGSTOP'),
      thaw: () => signalServer('SIGCONT'),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
