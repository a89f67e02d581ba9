import { chmodSync, lstatSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, expectClawError, runTool, type TestHome } from '../testing/index.js';
import { socketPath } from './home.js';

let t: TestHome;
let longHome: string;
let fallbackDir: string;

beforeEach(() => {
  t = createTestHome();
  longHome = join(t.home, 'a-home-whose-path-is-too-long-for-a-unix-socket'.repeat(2));
  fallbackDir = dirname(socketPath(longHome, 'notifier'));
  rmSync(fallbackDir, { recursive: true, force: true });
});

afterEach(() => {
  rmSync(fallbackDir, { recursive: true, force: true });
  t.cleanup();
});

describe('socketPath', () => {
  it('is under run/ when the path is short enough', () => {
    expect(socketPath(t.home, 'notifier')).toBe(join(t.home, 'run', 'notifier.sock'));
  });

  it('falls back to a private directory of this user in the temp directory for a long home', () => {
    const path = socketPath(longHome, 'notifier');
    expect(Buffer.byteLength(path)).toBeLessThanOrEqual(100);
    const stat = lstatSync(dirname(path));
    expect(stat.isDirectory()).toBe(true);
    expect(stat.uid).toBe(process.getuid!());
    expect(stat.mode & 0o777).toBe(0o700);
    expect(socketPath(longHome, 'xgw')).toBe(join(dirname(path), 'xgw.sock'));
  });

  it('refuses a fallback directory that others may enter, or that is not a directory', () => {
    mkdirSync(fallbackDir, { mode: 0o700 });
    chmodSync(fallbackDir, 0o733);
    const error = expectClawError(() => socketPath(longHome, 'notifier'), 'conflict');
    expect(error.suggestion).toMatch(/set a shorter THECLAW_HOME/);
    rmSync(fallbackDir, { recursive: true });

    const elsewhere = join(t.home, 'elsewhere');
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(elsewhere, fallbackDir);
    expectClawError(() => socketPath(longHome, 'notifier'), 'conflict');
    rmSync(fallbackDir);

    writeFileSync(fallbackDir, '');
    expectClawError(() => socketPath(longHome, 'notifier'), 'conflict');
  });

  it('lets a push succeed while the fallback directory is unsafe, and keeps the daemon from using it', async () => {
    mkdirSync(fallbackDir, { mode: 0o700 });
    chmodSync(fallbackDir, 0o777);
    const env = { ...t.env, THECLAW_HOME: longHome };
    const thread = join(t.home, 'thread');
    expect((await runTool('thread', ['init', thread], env)).code).toBe(0);
    const push = await runTool('thread', ['push', '--thread', thread, '--source', 'self', '--type', 'message', '--content', 'x'], env);
    expect(push).toEqual({ code: 0, stdout: '1\n', stderr: '' });
    const start = await runTool('notifier', ['start', '--foreground'], env);
    expect(start.code).toBe(1);
    expect(start.stderr).toMatch(/^Error: .* is not a private directory of this user.* - set a shorter THECLAW_HOME/);
  });
});

describe('a home or path that cannot be made', () => {
  it('ends at once with what is wrong, where Node would spin for ever (/proc) or a part is a file', async () => {
    const file = join(t.home, 'a-file');
    writeFileSync(file, 'not a directory');
    const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [['theclaw', 'up'], { ...t.env, THECLAW_HOME: '/proc/theclaw-nope' }, /^Error: \/proc\/theclaw-nope cannot be made: its directory takes no new entries .* - point THECLAW_HOME/],
      [['thread', 'init', '/proc/theclaw-thread'], t.env, /^Error: \/proc\/theclaw-thread cannot be made: its directory takes no new entries/],
      [['agent', 'init', 'helper'], { ...t.env, THECLAW_HOME: file }, /^Error: .*a-file\/agents cannot be made: a part of it is a file, not a directory - point THECLAW_HOME/],
    ];
    for (const [[tool, ...args], env, message] of cases) {
      const result = await runTool(tool as 'thread', args, env);
      expect(result.code, `${tool} ${args.join(' ')}`).toBe(1);
      expect(result.stderr).toMatch(message);
    }
  });
});
