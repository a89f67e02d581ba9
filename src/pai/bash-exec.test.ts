import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isAlive } from '../core/process.js';
import { createRedactor } from '../core/secrets.js';
import { findMarked, killMarked, newMark, TURN_MARK } from '../core/turn-processes.js';
import { waitFor } from '../testing/index.js';
import { bashExec, HeadTail } from './bash-exec.js';

// bash_exec runs real bash; nothing is mocked.

let dir: string;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'pai-bash-exec-')));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const plainEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME });

/** Fails fast, instead of at the test timeout, when a kill does not end the command. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not return within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('bashExec output', () => {
  it('returns stdout, stderr and the exit code of the command', async () => {
    const result = await bashExec({ command: 'echo out; echo err >&2; exit 3' }, { env: plainEnv() });
    expect(result).toEqual({ stdout: 'out\n', stderr: 'err\n', exit_code: 3 });
  });

  it('truncates 10 MB of output to its head and tail with a marker counting the dropped bytes', async () => {
    const body = 10 * 1024 * 1024;
    const started = Date.now();
    const result = await bashExec({ command: `echo START; head -c ${body} /dev/zero | tr '\\0' x; echo; echo END` }, { env: plainEnv() });
    const total = 'START\n'.length + body + '\n'.length + 'END\n'.length;

    expect(result.exit_code).toBe(0);
    expect(result.stdout.startsWith('START\nxxx')).toBe(true);
    expect(result.stdout.endsWith('xxx\nEND\n')).toBe(true);
    expect(result.stdout).toContain(`[... ${total - 32_768} bytes truncated ...]`);
    expect(Buffer.byteLength(result.stdout)).toBeLessThan(33_000);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('keeps head and tail of a small limit exactly', () => {
    const keep = new HeadTail(10);
    keep.push(Buffer.from('abcdefgh'));
    keep.push(Buffer.from('ijklmnop'));
    expect(keep.toString()).toBe('abcde\n[... 6 bytes truncated ...]\nlmnop');
    const small = new HeadTail(10);
    small.push(Buffer.from('short'));
    expect(small.toString()).toBe('short');
  });

  it('leaves no piece of a secret the truncation cut, whatever the chunks and wherever the cut falls in it', () => {
    // The secret's characters are never in the text around it: any left in the output leaked.
    const secretChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789');
    const otherText = fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ \n'), maxLength: 40 });
    fc.assert(
      fc.property(fc.string({ unit: secretChar, minLength: 8, maxLength: 40 }), otherText, otherText, fc.array(fc.nat()), fc.nat(), (secret, before, after, splits, cut) => {
        const redact = createRedactor({ THECLAW_HOME: '/nonexistent/secflake-home', MY_TOKEN: secret });
        const stream = Buffer.from(before + secret + after);
        const output = new HeadTail(2 + (cut % stream.length));
        const offsets = [0, ...splits.map((split) => split % stream.length).sort((a, b) => a - b), stream.length];
        for (const [index, offset] of offsets.slice(1).entries()) output.push(stream.subarray(offsets[index], offset));
        // As chat.ts does: redacted around the cut, then as a whole.
        const shown = redact(output.toString(redact));
        expect(shown.replaceAll('[redacted]', '').replace(/\[\.\.\. \d+ bytes truncated \.\.\.\]/, '')).not.toMatch(/[a-z0-9]/);
      }),
      { numRuns: 500 },
    );
  });

  it('redacts around the cut of a truncated output given a redactor', async () => {
    const secret = 'k3y0ff1c3r0fth3w0rld0123456789';
    const redact = createRedactor({ THECLAW_HOME: '/nonexistent/secflake-home', MY_TOKEN: secret });
    // 64 bytes kept: the head's 32 end with the secret's first 2 characters, the tail's start with its last 4.
    const result = await bashExec({ command: `printf '%s' ${'X'.repeat(30)}${secret}${'Y'.repeat(50)}${secret}${'W'.repeat(28)}` }, { env: plainEnv(), maxOutputBytes: 64, redact });
    expect(result.stdout).toBe(`${'X'.repeat(30)}[redacted]\n[... ${2 * secret.length + 108 - 64} bytes truncated ...]\n[redacted]${'W'.repeat(28)}`);
  });
});

describe('bashExec timeouts', () => {
  it('kills `sleep 100` after its timeout and returns 124 quickly', async () => {
    const started = Date.now();
    const result = await within(bashExec({ command: 'sleep 100', timeout_seconds: 1 }, { env: plainEnv() }), 5_000, 'sleep 100');
    const elapsed = Date.now() - started;
    expect(result.exit_code).toBe(124);
    expect(result.stderr).toMatch(/timed out after 1 s/);
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(3_000);
  });

  it('kills the children of the command with it', async () => {
    const pidFile = join(dir, 'grandchild.pid');
    const started = Date.now();
    const pending = bashExec({ command: `bash -c 'sleep 100 & echo $! > ${pidFile}; wait'`, timeout_seconds: 1 }, { env: plainEnv() });
    const pid = Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'the grandchild pid'));
    expect(isAlive({ pid, start: null }), 'the grandchild runs before the timeout').toBe(true);

    const result = await within(pending, 5_000, 'the command with a child');
    expect(result.exit_code).toBe(124);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(isAlive({ pid, start: null }), 'the grandchild is dead after the timeout').toBe(false);
  });

  it('kills a command that ignores SIGTERM with SIGKILL after a grace period', async () => {
    const started = Date.now();
    const result = await within(bashExec({ command: `trap '' TERM; sleep 100`, timeout_seconds: 1 }, { env: plainEnv() }), 6_000, 'the command ignoring SIGTERM');
    expect(result.exit_code).toBe(124);
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('kills the command when the signal aborts', async () => {
    const controller = new AbortController();
    const pending = bashExec({ command: 'echo started; sleep 100' }, { env: plainEnv(), signal: controller.signal });
    controller.abort();
    const result = await within(pending, 5_000, 'the aborted command');
    expect(result.exit_code).toBe(124);
    expect(result.stderr).toMatch(/aborted/);
  });
});

describe('bashExec environment and working directory', () => {
  it('removes keys, tokens and the thread store URL from the environment, including extra secret names', async () => {
    const env = {
      ...plainEnv(),
      OPENAI_API_KEY: 'sk-openai-secret-1111',
      ANTHROPIC_API_KEY: 'sk-ant-secret-2222',
      TELEGRAM_BOT_TOKEN: '999:telegram-secret-3333',
      MY_LLM_CREDENTIAL: 'custom-provider-secret-4444',
      // The thread store's URL may hold the database's password.
      THECLAW_DATABASE_URL: 'postgres://theclaw:db-secret-5555@db.example:5432/threads',
      KEEP_ME: 'visible-value',
    };
    const result = await bashExec({ command: 'env' }, { env, secretNames: ['MY_LLM_CREDENTIAL'] });
    expect(result.exit_code).toBe(0);
    expect(result.stdout).toContain('KEEP_ME=visible-value');
    const names = result.stdout.split('\n').map((line) => line.split('=')[0]!);
    expect(names.filter((name) => /(_API_KEY|_TOKEN)$/.test(name))).toEqual([]);
    for (const secret of ['sk-openai-secret-1111', 'sk-ant-secret-2222', '999:telegram-secret-3333', 'custom-provider-secret-4444', 'db-secret-5555']) {
      expect(result.stdout).not.toContain(secret);
    }
  });

  it('runs in the cwd of the call, else the default cwd', async () => {
    const sub = join(dir, 'sub dir');
    mkdirSync(sub);
    expect((await bashExec({ command: 'pwd', cwd: sub }, { env: plainEnv(), cwd: dir })).stdout).toBe(`${sub}\n`);
    expect((await bashExec({ command: 'pwd' }, { env: plainEnv(), cwd: dir })).stdout).toBe(`${dir}\n`);
  });

  it('returns exit 1 with a message when the cwd does not exist', async () => {
    const missing = join(dir, 'nope');
    const result = await bashExec({ command: 'pwd', cwd: missing }, { env: plainEnv() });
    expect(result.exit_code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(missing);
    expect(result.stderr).toMatch(/does not exist/);
  });
});

describe('bashExec: what a command leaves running', () => {
  /** A command starting `setsid sleep 600` (its own session: out of the group kill), with its pid in a file. */
  const setsidSleep = (pidFile: string, then = 'echo started') => `setsid sleep 600 & echo $! > ${pidFile}; ${then}`;
  const pidIn = async (pidFile: string) => Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'the setsid sleep pid'));
  const gone = (pid: number) => !isAlive({ pid, start: null });

  it('a call of no turn returns once bash exited, and kills its setsid child', async () => {
    const pidFile = join(dir, 'sleep.pid');
    const result = await within(bashExec({ command: setsidSleep(pidFile) }, { env: plainEnv() }), 5_000, 'the command leaving a setsid sleep');
    expect(result).toEqual({ stdout: 'started\n', stderr: '', exit_code: 0 });
    expect(gone(await pidIn(pidFile)), 'the setsid sleep is dead when the call returns').toBe(true);
  });

  it('a call of a turn leaves its setsid child to the turn, which kills it by its mark', async () => {
    const pidFile = join(dir, 'sleep.pid');
    const turnMark = newMark(TURN_MARK);
    const result = await within(bashExec({ command: setsidSleep(pidFile) }, { env: plainEnv(), turnMark }), 5_000, 'the command leaving a setsid sleep');
    expect(result.exit_code).toBe(0);
    const pid = await pidIn(pidFile);
    expect(findMarked(turnMark)).toEqual([pid]);
    await killMarked(turnMark);
    await waitFor(() => gone(pid), 'the setsid sleep to be gone', 5_000);
  });

  it('kills the setsid child of a call that times out, though the turn goes on', async () => {
    const pidFile = join(dir, 'sleep.pid');
    const turnMark = newMark(TURN_MARK);
    const result = await within(bashExec({ command: setsidSleep(pidFile, 'sleep 100'), timeout_seconds: 1 }, { env: plainEnv(), turnMark }), 5_000, 'the timed-out command');
    expect(result.exit_code).toBe(124);
    expect(gone(await pidIn(pidFile)), 'the setsid sleep is dead when the call returns').toBe(true);
    expect(findMarked(turnMark)).toEqual([]);
  });

  it('kills the setsid child of a call that is aborted (/stop)', async () => {
    const pidFile = join(dir, 'sleep.pid');
    const controller = new AbortController();
    const pending = bashExec({ command: setsidSleep(pidFile, 'sleep 100') }, { env: plainEnv(), turnMark: newMark(TURN_MARK), signal: controller.signal });
    const pid = await pidIn(pidFile);
    controller.abort();
    expect((await within(pending, 5_000, 'the aborted command')).exit_code).toBe(124);
    expect(gone(pid), 'the setsid sleep is dead when the call returns').toBe(true);
  });
});
