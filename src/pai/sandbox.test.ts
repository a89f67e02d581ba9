import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bashExec } from './bash-exec.js';
import { SANDBOX_MISSING, sandboxArgs, sandboxEnv, type Sandbox } from './sandbox.js';

// The argv builder alone; what bwrap makes of it is tested with the real one in
// agent/sandbox-profile.test.ts.

const base: Sandbox = { bwrap: '/usr/bin/bwrap', network: true, hidden: [], binds: [], env: [] };

/** bwrap's options as [option, ...its operands], split at the known arities. */
function options(args: string[]): string[][] {
  const arity: Record<string, number> = {
    '--die-with-parent': 0,
    '--unshare-pid': 0,
    '--new-session': 0,
    '--unshare-net': 0,
    '--ro-bind': 2,
    '--ro-bind-try': 2,
    '--bind': 2,
    '--bind-try': 2,
    '--dev': 1,
    '--proc': 1,
    '--tmpfs': 1,
    '--remount-ro': 1,
    '--chdir': 1,
  };
  const out: string[][] = [];
  for (let i = 0; i < args.length; ) {
    if (args[i] === '--') {
      out.push(args.slice(i));
      break;
    }
    const n = arity[args[i]!];
    if (n === undefined) throw new Error(`unknown option ${args[i]}`);
    out.push(args.slice(i, i + 1 + n));
    i += 1 + n;
  }
  return out;
}

describe('sandboxArgs', () => {
  it('runs bash -c in its own PID namespace and session, on a read-only root with its own /dev, /proc and /tmp, in the working directory', () => {
    expect(options(sandboxArgs(base, 'echo hi', '/work'))).toEqual([
      ['--die-with-parent'],
      ['--unshare-pid'],
      ['--new-session'],
      ['--ro-bind', '/', '/'],
      ['--dev', '/dev'],
      ['--proc', '/proc'],
      ['--tmpfs', '/tmp'],
      ['--chdir', '/work'],
      ['--', 'bash', '-c', 'echo hi'],
    ]);
  });

  it('hides a directory behind a tmpfs, puts the binds back over it in order, optional ones with -try, then makes the tmpfs read-only', () => {
    const sandbox: Sandbox = {
      ...base,
      hidden: ['/h'],
      binds: [
        { path: '/h/agents/a', writable: true },
        { path: '/h/agents/a/config.yaml', writable: false },
        { path: '/h/agents/b/inbox', writable: true, optional: true },
        { path: '/h/skills', writable: false, optional: true },
      ],
    };
    expect(options(sandboxArgs(sandbox, 'true', '/h/agents/a/workdir')).slice(7, -2)).toEqual([
      ['--tmpfs', '/h'],
      ['--bind', '/h/agents/a', '/h/agents/a'],
      ['--ro-bind', '/h/agents/a/config.yaml', '/h/agents/a/config.yaml'],
      ['--bind-try', '/h/agents/b/inbox', '/h/agents/b/inbox'],
      ['--ro-bind-try', '/h/skills', '/h/skills'],
      ['--remount-ro', '/h'],
    ]);
  });

  it('cuts the network off only when asked', () => {
    expect(sandboxArgs(base, 'true', '/')).not.toContain('--unshare-net');
    expect(sandboxArgs({ ...base, network: false }, 'true', '/')).toContain('--unshare-net');
  });

  it('mounts each hidden directory before what it contains and before every bind, and the command comes last, unchanged', () => {
    const path = fc.array(fc.constantFrom('a', 'b', 'tmp'), { minLength: 1, maxLength: 3 }).map((parts) => `/${parts.join('/')}`);
    fc.assert(
      fc.property(fc.uniqueArray(path, { maxLength: 4 }), fc.array(fc.record({ path, writable: fc.boolean(), optional: fc.boolean() }), { maxLength: 5 }), fc.string(), (hidden, binds, command) => {
        const mounts = options(sandboxArgs({ ...base, hidden, binds }, command, '/'));
        const tmpfs = mounts.filter((m) => m[0] === '--tmpfs').map((m) => m[1]!);
        // A hidden directory inside another is mounted after it, else the outer tmpfs would cover it.
        for (const [i, outer] of tmpfs.entries()) for (const inner of tmpfs.slice(0, i)) expect(inner.startsWith(`${outer}/`)).toBe(false);
        const firstBind = mounts.findIndex((m) => m[0]!.includes('bind') && m[1] !== '/');
        const lastTmpfs = mounts.map((m) => m[0]).lastIndexOf('--tmpfs');
        if (firstBind >= 0) expect(lastTmpfs).toBeLessThan(firstBind);
        expect(mounts.filter((m) => m[0] === '--remount-ro').map((m) => m[1])).toEqual(hidden);
        expect(mounts.filter((m) => m[0]!.includes('bind') && m[1] !== '/').map((m) => m[1])).toEqual(binds.map((b) => b.path));
        expect(mounts.at(-1)).toEqual(['--', 'bash', '-c', command]);
      }),
    );
  });
});

describe('sandboxEnv', () => {
  it('keeps only the listed variables that are set', () => {
    expect(sandboxEnv({ PATH: '/bin', HOME: '/root', SECRET_SOCKET: '/run/x', THECLAW_THREAD: '/t' }, ['PATH', 'HOME', 'LANG'])).toEqual({ PATH: '/bin', HOME: '/root' });
  });
});

describe('bashExec without bubblewrap', () => {
  it('refuses the call with exit 126 and says how to install it or turn the sandbox off, running nothing', async () => {
    const result = await bashExec({ command: 'echo ran' }, { env: { PATH: process.env.PATH }, sandbox: { ...base, bwrap: null } });
    expect(result).toEqual({ stdout: '', stderr: `bash_exec: ${SANDBOX_MISSING}`, exit_code: 126 });
    expect(SANDBOX_MISSING).toMatch(/apt-get install bubblewrap.*sandbox\.profile: none/);
  });
});
