import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BWRAP, NEEDS_BWRAP } from '../testing/index.js';
import { mountTmpfs, tmpfsUnavailable } from '../testing/tmpfs.js';
import { bashExec } from './bash-exec.js';
import type { SandboxLimits } from './sandbox-limits.js';
import { diskUseAtMost, limitsReached } from './sandbox-limits.js';
import { sandboxArgs, type Sandbox } from './sandbox.js';

// Each limit hit for real in bubblewrap, with limits small enough to reach within a second or two.

const limits: SandboxLimits = { processes: 64, memoryMb: 256, fileSizeMb: 4, tmpMb: 8, diskMb: 6 };
const node = process.execPath;
let workdir: string;
let sandbox: Sandbox;
const servers: Server[] = [];
const made: string[] = [];

beforeEach(() => {
  workdir = mkdtempSync(join(tmpdir(), 'theclaw-limits-'));
  sandbox = { bwrap: BWRAP, network: true, hidden: [], binds: [{ path: workdir, writable: true }], env: ['PATH'], limits };
});

afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const path of [...made.splice(0), workdir]) rmSync(path, { recursive: true, force: true });
});

const exec = (command: string, options: { network?: boolean; timeoutSeconds?: number } = {}) =>
  bashExec({ command }, { cwd: workdir, env: { PATH: process.env.PATH }, sandbox: { ...sandbox, network: options.network ?? true }, timeoutSeconds: options.timeoutSeconds ?? 30 });

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

describe.skipIf(!BWRAP)(`a sandboxed call's limits (${NEEDS_BWRAP})`, () => {
  it('stops a call starting more processes than the limit, says which limit it was, and nothing of it is left running', async () => {
    // perl reports a refused fork at once (bash would retry for 15 s).
    const result = await exec(`perl -e 'my $n = 0; for (1..300) { my $p = fork(); die "fork: $! after $n\\n" unless defined $p; if (!$p) { sleep 30; exit } $n++ }'`);
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toMatch(/^fork: Resource temporarily unavailable after \d+$/m);
    expect(Number(/after (\d+)/.exec(result.stderr)![1])).toBeLessThan(64);
    expect(result.stderr).toContain("[bash_exec: the sandbox's process limit (64 processes and threads at once) was reached - run fewer at once, or ask the owner to raise sandbox.limits.processes");
    // The call's PID namespace ended with it: its sleepers with it.
    const sleepers = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && readOr(`/proc/${pid}/cmdline`).startsWith('perl\0-e\0my $n = 0;'));
    expect(sleepers).toEqual([]);
  });

  it("fails a write past the size of the sandbox's /tmp with no space left, and says /tmp's limit", async () => {
    const result = await exec('for i in 1 2 3; do head -c 3M /dev/zero > /tmp/f$i || exit; done');
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toContain('No space left on device');
    expect(result.stderr).toContain(
      "[bash_exec: a write found no space: the sandbox's /tmp holds at most 8 MB - if it was there, write in the working directory instead, or ask the owner to raise sandbox.limits.tmp_mb",
    );
  });

  it('stops a write past the file size limit (SIGXFSZ) and says which limit it was', async () => {
    const result = await exec('head -c 5M /dev/zero > big; echo "exit $?"; stat -c %s big');
    expect(result.stdout).toBe('exit 153\n4194304\n');
    expect(result.stderr).toContain("[bash_exec: the sandbox's file size limit (4 MB) was reached - write smaller files");
  });

  it('refuses a process more memory than its limit, and says which limit it probably was', async () => {
    const result = await exec(`${node} -e "Buffer.alloc(512 * 1024 * 1024, 1)"`);
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toContain('Array buffer allocation failed');
    expect(result.stderr).toContain("[bash_exec: the sandbox's memory limit (256 MB of data per process) was probably reached");
    // The same under it.
    expect((await exec(`${node} -e "Buffer.alloc(64 * 1024 * 1024, 1)"`)).exit_code).toBe(0);
  });

  it('fails every call while the writable directories hold more than the disk limit, until files are removed', async () => {
    const over = await exec('for i in 1 2 3 4; do head -c 2M /dev/zero > f$i; done');
    expect(over.exit_code).toBe(1);
    expect(over.stderr).toMatch(
      /\[bash_exec: the sandbox's disk limit was reached: the agent's writable directories hold \d+ MB, over 6 MB - remove files there \(every call fails until they are under it\)/,
    );
    expect((await exec('true')).exit_code).toBe(1);
    const removed = await exec('rm f1 f2');
    expect(removed).toEqual({ stdout: '', stderr: '', exit_code: 0 });
  });

  it('kills a call that goes on past the disk limit, long before its timeout', async () => {
    const started = Date.now();
    const result = await exec('for i in 1 2 3 4; do head -c 2M /dev/zero > f$i; done; sleep 30; echo survived', { timeoutSeconds: 60 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(result.stdout).toBe('');
    expect(result.exit_code).toBe(137);
    expect(result.stderr).toMatch(/disk limit was reached.*; the command and its children were killed\]/);
  });
});

describe.skipIf(!BWRAP)(`the process limit for a user other than root, RLIMIT_NPROC (${NEEDS_BWRAP})`, () => {
  // Root is exempt from RLIMIT_NPROC (its calls get a pids cgroup): as root, run bwrap as nobody.
  const asUser = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : [];
  const forks = `perl -e 'my $n = 0; for (1..300) { my $p = fork(); die "fork: $! after $n\\n" unless defined $p; if (!$p) { sleep 30; exit } $n++ }'`;

  it("counts only the sandbox's own processes: a user running more than the limit elsewhere still runs a call, which cannot start more than the limit", async () => {
    const elsewhere = spawn(asUser[0] ?? 'sh', [...asUser.slice(1), ...(asUser.length ? ['sh'] : []), '-c', 'for i in $(seq 100); do sleep 30 & done; echo started; wait'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      await new Promise((resolve) => elsewhere.stdout.once('data', resolve));
      const run = (command: string) =>
        spawnSync(asUser[0] ?? BWRAP!, [...asUser.slice(1), ...(asUser.length ? [BWRAP!] : []), ...sandboxArgs({ ...sandbox, binds: [], limits }, command, '/')], {
          encoding: 'utf8',
          timeout: 30_000,
        });
      expect(run('echo ran')).toMatchObject({ stdout: 'ran\n', status: 0 });
      const bomb = run(forks);
      expect(bomb.stderr).toMatch(/^fork: Resource temporarily unavailable after \d+$/m);
      expect(Number(/after (\d+)/.exec(bomb.stderr)![1])).toBeLessThan(64);
    } finally {
      process.kill(-elsewhere.pid!, 'SIGKILL');
    }
  });
});

describe.skipIf(!BWRAP)(`the system's Unix sockets in a sandbox without network (${NEEDS_BWRAP})`, () => {
  async function listen(path: string): Promise<void> {
    const server = createServer((socket) => socket.end('hello\n'));
    servers.push(server);
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(path, resolve));
  }
  const connect = (path: string) =>
    `${node} -e "require('net').connect(process.argv[1].replace(/^@/, '\\0')).on('data', (d) => process.stdout.write(d)).on('error', (e) => { console.log(e.code); process.exit(1); })" '${path}'`;

  it('cannot reach a socket under /run or /var/run, nor an abstract one, that it reaches with the network on', async () => {
    const dir = mkdtempSync('/run/theclaw-test-');
    made.push(dir);
    const varRun = join('/var/run', `theclaw-test-${process.pid}`);
    mkdirSync(varRun, { recursive: true });
    made.push(varRun);
    const sockets = [join(dir, 's'), join(varRun, 's'), `@theclaw-test-${process.pid}`];
    for (const path of sockets) await listen(path.replace(/^@/, '\0'));
    for (const path of sockets) {
      const shown = JSON.stringify(path);
      expect({ path: shown, result: await exec(connect(path)) }).toMatchObject({ path: shown, result: { stdout: 'hello\n', exit_code: 0 } });
      expect({ path: shown, result: await exec(connect(path), { network: false }) }).toMatchObject({
        path: shown,
        result: { stdout: expect.stringMatching(/^(ENOENT|ECONNREFUSED)\n$/), exit_code: 1 },
      });
    }
  });
});

describe.skipIf(tmpfsUnavailable)(`diskUseAtMost, on a file system of its own (${tmpfsUnavailable ?? 'needs root'})`, () => {
  it('walks the paths only when their file system filled by enough to take them past the cap, or a minute went by', async () => {
    const fs = mountTmpfs(64 * 1024 * 1024);
    try {
      const dir = join(fs.dir, 'agent');
      mkdirSync(dir);
      writeFileSync(join(dir, 'a'), Buffer.alloc(2 * 1024 * 1024, 1));
      writeFileSync(join(dir, 'b'), Buffer.alloc(2 * 1024 * 1024, 1));
      let clock = 1_000_000;
      const now = () => clock;
      const cap = 8 * 1024 * 1024;
      const walked = await diskUseAtMost([dir], cap, now);
      expect(walked).toBeGreaterThanOrEqual(4 * 1024 * 1024);
      // Removed, but not walked again: the last walk stands, a bound from above.
      rmSync(join(dir, 'b'));
      expect(await diskUseAtMost([dir], cap, now)).toBe(walked);
      // A minute later it is walked.
      clock += 61_000;
      const smaller = await diskUseAtMost([dir], cap, now);
      expect(smaller).toBeLessThan(walked);
      // Written elsewhere on the file system, enough to pass the cap: walked, and found under it.
      writeFileSync(join(fs.dir, 'elsewhere'), Buffer.alloc(8 * 1024 * 1024, 1));
      expect(await diskUseAtMost([dir], cap, now)).toBe(smaller);
      // Written in the paths: found over it.
      writeFileSync(join(dir, 'c'), Buffer.alloc(8 * 1024 * 1024, 1));
      expect(await diskUseAtMost([dir], cap, now)).toBeGreaterThan(cap);
    } finally {
      fs.unmount();
    }
  });
});

describe('limitsReached', () => {
  const outcome = { exitCode: 1, stderr: '', processesReached: false };
  it('names no limit for an ordinary failure', () => {
    expect(limitsReached(limits, { ...outcome, stderr: 'grep: x: No such file or directory\n' })).toEqual([]);
  });

  it("names the process limit when the call's cgroup refused a fork, whatever the output", () => {
    expect(limitsReached(limits, { ...outcome, processesReached: true })).toEqual([expect.stringContaining('process limit (64 ')]);
  });

  it('names the file size limit from the signal alone', () => {
    expect(limitsReached(limits, { ...outcome, exitCode: 153 })).toEqual([expect.stringContaining('file size limit (4 MB)')]);
  });
});

describe('sandboxArgs with limits', () => {
  it('sizes /tmp and runs bash under prlimit, the command unchanged', () => {
    const args = sandboxArgs({ bwrap: '/usr/bin/bwrap', network: true, hidden: [], binds: [], env: [], limits }, 'echo "$0"', '/');
    expect(args.slice(args.indexOf('/proc') + 1, args.indexOf('/proc') + 5)).toEqual(['--size', String(8 * 1024 * 1024), '--tmpfs', '/tmp']);
    expect(args.slice(args.indexOf('--'))).toEqual(['--', 'prlimit', '--nproc=64', `--data=${256 * 1024 * 1024}`, `--fsize=${4 * 1024 * 1024}`, 'bash', '-c', 'echo "$0"']);
  });
});
