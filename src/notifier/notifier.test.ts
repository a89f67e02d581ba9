import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync, mkdirSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { cliPath } from '../core/package.js';
import { isAlive } from '../core/process.js';
import { createTestHome, fixture, run, runTool, waitFor, type TestHome } from '../testing/index.js';
import { initThread, openThread, type Thread } from '../thread/index.js';
import type { NotifierStatus } from './types.js';

// These tests run the real daemon (`notifier start`) and real handler processes in a temp
// THECLAW_HOME; nothing is mocked. The thread side is done in-process where the test is not about
// the thread CLI, which has tests of its own (src/thread/cli.test.ts).

let t: TestHome;
let threadDir: string;
let seen: string;

beforeEach(async () => {
  t = createTestHome();
  mkdirSync(join(t.home, 'notifier'), { recursive: true });
  writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\nhandler_timeout_seconds: 20\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\n');
  threadDir = join(t.home, 'work thread');
  seen = join(t.home, 'seen.txt');
  initThread(threadDir, { home: t.home }).close(); // in-process: these tests are about the daemon, not `thread init`
});

afterEach(async () => {
  await runTool('notifier', ['stop'], t.env);
  t.cleanup();
});

const startNotifier = async () => {
  const result = await runTool('notifier', ['start'], t.env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
};

/** The thread's side in-process, as `thread subscribe` and `thread push` do it (poke included): the daemon is under test here. */
const withThread = <T>(use: (thread: Thread) => T): T => {
  const thread = openThread(threadDir, { home: t.home });
  try {
    return use(thread);
  } finally {
    thread.close();
  }
};

const subscribe = (handlerArgs: string[]) => withThread((thread) => thread.subscribe({ consumer: 'worker', handler: joinCommand([process.execPath, fixture('handler.mjs'), seen, ...handlerArgs]) }));

const push = (content: string) => withThread((thread) => thread.push({ source: 'self', type: 'message', content }));

const seenIds = () => (existsSync(seen) ? readFileSync(seen, 'utf8').trim().split('\n').filter(Boolean).map(Number) : []);
const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const status = async () => JSON.parse((await runTool('notifier', ['status', '--json'], t.env)).stdout) as NotifierStatus;

describe('notifier dispatch', () => {
  it('delivers 20 spaced pushes to the handler exactly once each, in order', async () => {
    await startNotifier();
    subscribe([]);
    // In-process (a push pokes the daemon as `thread push` does): the daemon is under test here, and
    // a Node start per push was most of this test's time.
    const thread = openThread(threadDir, { home: t.home });
    for (let i = 1; i <= 20; i++) {
      thread.push({ source: 'self', type: 'message', content: `event ${i}` });
      await new Promise((resolve) => setTimeout(resolve, 30)); // the pause between pushes the issue asks for
    }
    thread.close();
    await waitFor(() => seenIds().length >= 20, '20 events handled');
    expect(seenIds()).toEqual(range(20));
  });

  it('delivers a burst of 200 pushes exactly once each, in order, several per handler run', async () => {
    await startNotifier();
    subscribe(['--limit', '50']);
    const thread = openThread(threadDir, { home: t.home });
    for (let i = 1; i <= 200; i++) thread.push({ source: 'self', type: 'message', content: `burst ${i}` });
    thread.close();
    await waitFor(() => seenIds().length >= 200, '200 events handled', 30_000);
    expect(seenIds()).toEqual(range(200));
    const runs = readFileSync(join(t.home, 'logs', 'notifier.log'), 'utf8').match(/worker on .* exited 0/g) ?? [];
    expect(runs.length).toBeLessThan(200);
  });

  it('delivers the unacknowledged events of a handler killed mid-batch again, losing none', async () => {
    await startNotifier();
    subscribe(['--delay-ms', '150', '--ack', 'batch']);
    const thread = openThread(threadDir, { home: t.home });
    thread.pushBatch(range(6).map((i) => ({ source: 'self', type: 'message', content: `m${i}` })));
    // Wait until the handler is inside the batch, then kill it.
    const lease = await waitFor(() => (seenIds().length >= 2 && thread.consumer('worker')?.lease) || undefined, 'a handler mid-batch');
    process.kill(lease.pid, 'SIGKILL');
    await waitFor(() => thread.consumer('worker')?.progress === 6, 'all events acknowledged', 30_000);
    const ids = seenIds();
    expect(new Set(ids)).toEqual(new Set(range(6)));
    expect(ids.slice(0, 2)).toEqual([1, 2]);
    expect(ids.length).toBeGreaterThan(6); // the killed batch was delivered again
    thread.close();
  });

  it('dispatches events pushed while the daemon was down once it starts', async () => {
    subscribe([]);
    for (let i = 1; i <= 5; i++) push(`offline ${i}`);
    expect(seenIds()).toEqual([]);
    await startNotifier();
    await waitFor(() => seenIds().length >= 5, 'offline events handled');
    expect(seenIds()).toEqual(range(5));
  });

  it('dispatches a thread that subscribed after the daemon read its registry on its poke, without waiting for a sweep', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 600\n');
    await startNotifier();
    // Pokes for a thread nobody subscribed to: the registry is read again at most once a second.
    for (let i = 0; i < 5; i++) push(`unsubscribed ${i}`);
    subscribe([]);
    await waitFor(() => seenIds().length >= 5, 'the events handled', 5_000);
  });

  it('finds an event whose poke was lost on the next sweep', async () => {
    await startNotifier();
    subscribe([]);
    // A writer that stored its event but died before poking: a raw insert, no poke at all.
    const db = new Database(join(threadDir, 'events.db'));
    db.prepare("INSERT INTO events (created_at, source, type, content) VALUES (?, 'self', 'message', 'unpoked')").run(new Date().toISOString());
    db.close();
    await waitFor(() => seenIds().length >= 1, 'the sweep to dispatch the unpoked event', 5_000);
    expect(seenIds()).toEqual([1]);
  });

  it('reclaims a lease whose holder died and dispatches the waiting events', async () => {
    subscribe([]);
    const thread = openThread(threadDir, { home: t.home });
    const dead = spawn(process.execPath, ['-e', '']);
    const deadPid = dead.pid!;
    expect(thread.dispatch.takeLease('worker', { pid: deadPid, start: null })).toBe(true);
    await new Promise((resolve) => dead.on('exit', resolve));
    expect(isAlive({ pid: deadPid, start: null })).toBe(false);
    push('after a crash');
    await startNotifier();
    await waitFor(() => seenIds().length >= 1, 'event handled after the lease was reclaimed');
    expect(seenIds()).toEqual([1]);
    thread.close();
  });

  it('does not start a second handler while a live process holds the lease', async () => {
    subscribe([]);
    const thread = openThread(threadDir, { home: t.home });
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      expect(thread.dispatch.takeLease('worker', { pid: holder.pid!, start: null })).toBe(true);
      push('held');
      await startNotifier();
      const dispatch = await runTool('thread', ['dispatch', '--thread', threadDir, '--json'], t.env);
      expect(JSON.parse(dispatch.stdout)).toEqual({ started: [] });
      // Two sweeps later the event still waits for the live holder.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(seenIds()).toEqual([]);
      holder.kill('SIGKILL');
      await waitFor(() => seenIds().length >= 1, 'event handled once the holder died');
    } finally {
      holder.kill('SIGKILL');
      thread.close();
    }
  });

  it('reclaims the pid file of a daemon killed with SIGKILL', async () => {
    await startNotifier();
    const { pid } = await status();
    process.kill(pid!, 'SIGKILL');
    await waitFor(() => !isAlive({ pid: pid!, start: null }), 'the daemon to die');
    await startNotifier();
    const after = await status();
    expect(after.running).toBe(true);
    expect(after.pid).not.toBe(pid);
  });

  it('never signals an unrelated process that now has the pid a stale pid file names', async () => {
    // A process alive now under the pid, but not the one that wrote the file (another start time).
    const stranger = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      mkdirSync(join(t.home, 'run'), { recursive: true });
      writeFileSync(join(t.home, 'run', 'notifier.pid'), JSON.stringify({ pid: stranger.pid, start: 1, acquired_at: new Date(0).toISOString(), nonce: 'old' }));
      const stop = await runTool('notifier', ['stop'], t.env);
      expect(stop.code, stop.stderr).toBe(0);
      expect(stop.stdout).toMatch(/not running/);
      expect((await status()).running).toBe(false);
      expect(isAlive({ pid: stranger.pid!, start: null })).toBe(true);
      await startNotifier(); // the stale file is reclaimed
      expect((await status()).running).toBe(true);
      expect(isAlive({ pid: stranger.pid!, start: null })).toBe(true);
    } finally {
      stranger.kill('SIGKILL');
    }
  });

  it('runs a handler argument holding ; $(...) and quotes literally, in a thread path with spaces', async () => {
    const marker = join(t.home, 'pwned');
    const argsFile = join(t.home, 'args.json');
    const hostile = [`a; touch ${marker}`, `$(touch ${marker})`, `"double" 'single' \`touch ${marker}\``];
    const script = `require('fs').writeFileSync(${JSON.stringify(argsFile)}, JSON.stringify(process.argv.slice(1))); require('child_process').execFileSync(process.execPath, [${JSON.stringify(fixture('handler.mjs'))}, ${JSON.stringify(seen)}])`;
    const handler = joinCommand([process.execPath, '-e', script, ...hostile]);
    expect((await runTool('thread', ['subscribe', '--thread', threadDir, '--consumer', 'worker', '--handler', handler], t.env)).code).toBe(0);
    await startNotifier();
    push('x');
    await waitFor(() => seenIds().length >= 1, 'the hostile handler to run');
    expect(JSON.parse(readFileSync(argsFile, 'utf8'))).toEqual(hostile);
    expect(existsSync(marker)).toBe(false);
  });

  it('retries a failing handler with backoff and shows the failures in status', async () => {
    const failFile = join(t.home, 'fail');
    writeFileSync(failFile, '');
    subscribe(['--fail-file', failFile]);
    push('doomed for now');
    await startNotifier();
    const failing = await waitFor(async () => {
      const s = (await status()).subscriptions[0];
      return s && s.failures >= 3 ? s : undefined;
    }, 'three failures');
    expect(failing.last_error).toMatch(/exited 1: failing on purpose/);
    expect(failing.retry_at).not.toBeNull();
    // A second status read comes later: the retry (at most 1 s away) may be running by then, which
    // status shows as running with the last error. Between two runs it says failing.
    await waitFor(async () => /worker: failing \(\d+x, retry at .*\)/.test((await runTool('notifier', ['status'], t.env)).stdout), 'the human status to show the failures');
    const log = readFileSync(join(t.home, 'logs', 'notifier.log'), 'utf8');
    // Backoff: the delay each failure sets grows (0.2 s, 0.4 s, 0.8 s, with ±20% jitter). Read from
    // what the daemon decided, not from when handlers ended, which a loaded machine shifts.
    const delays = [...log.matchAll(/\[(\S+)\] \[ERROR\] worker on [^\n]* exited 1[\s\S]*?failure \d+; retrying at (\S+)/g)].map((m) => Date.parse(m[2]!) - Date.parse(m[1]!));
    expect(delays.length).toBeGreaterThanOrEqual(3);
    expect(delays[0]).toBeGreaterThanOrEqual(150);
    expect(delays[1]).toBeGreaterThan(delays[0]!);
    expect(delays[2]).toBeGreaterThan(delays[1]!);
    rmSync(failFile);
    await waitFor(() => seenIds().length >= 1, 'the handler to recover');
    const recovered = await waitFor(async () => {
      const s = (await status()).subscriptions[0];
      return s && s.failures === 0 ? s : undefined;
    }, 'failures to reset');
    expect(recovered.last_error).toBeNull();
  });

  it('dispatches a failing consumer at once when it is subscribed again with a new handler, despite a long backoff', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\nbackoff: { initial_seconds: 30, max_seconds: 60 }\n');
    const failFile = join(t.home, 'fail');
    writeFileSync(failFile, '');
    subscribe(['--fail-file', failFile]);
    push('waits for a working handler');
    await startNotifier();
    await waitFor(async () => (await status()).subscriptions[0]?.failures === 1, 'the first failure');
    subscribe([]); // the fixed handler
    await waitFor(() => seenIds().length >= 1, 'the new handler to run', 5_000);
    expect(seenIds()).toEqual([1]);
  });

  it('kills a handler past its timeout together with its children', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\nhandler_timeout_seconds: 0.5\nbackoff: { initial_seconds: 30 }\n');
    const pidFile = join(t.home, 'grandchild.pid');
    const handler = joinCommand(['bash', '-c', `sleep 100 & echo $! > ${JSON.stringify(pidFile).slice(1, -1)}; wait`]);
    expect((await runTool('thread', ['subscribe', '--thread', threadDir, '--consumer', 'worker', '--handler', handler], t.env)).code).toBe(0);
    push('slow');
    await startNotifier();
    const grandchild = Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'the grandchild'));
    await waitFor(() => !isAlive({ pid: grandchild, start: null }), 'the grandchild to be killed', 10_000);
    const s = await waitFor(async () => (await status()).subscriptions.find((x) => x.failures > 0), 'the timeout to be recorded');
    expect(s.last_error).toMatch(/timed out/);
  });

  it('captures handler output into its log, bounded', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\noutput_limit_bytes: 1000\n');
    const script = `process.stdout.write('HEAD' + 'x'.repeat(100000) + 'TAIL\\n'); require('child_process').execFileSync(process.execPath, [${JSON.stringify(fixture('handler.mjs'))}, ${JSON.stringify(seen)}])`;
    expect((await runTool('thread', ['subscribe', '--thread', threadDir, '--consumer', 'worker', '--handler', joinCommand([process.execPath, '-e', script])], t.env)).code).toBe(0);
    await startNotifier();
    push('noisy');
    await waitFor(() => seenIds().length >= 1, 'the noisy handler');
    const logPath = join(t.home, 'logs', 'notifier.log');
    const log = await waitFor(() => {
      const text = readFileSync(logPath, 'utf8');
      return text.includes('TAIL') && text;
    }, 'the output in the log');
    expect(log).toContain('HEAD');
    expect(log).toMatch(/bytes left out/);
    expect(statSync(logPath).size).toBeLessThan(5000);
  });

  it('stops with running handlers left to finish, and a stop when stopped says so', async () => {
    await startNotifier();
    const stop = await runTool('notifier', ['stop', '--json'], t.env);
    expect(JSON.parse(stop.stdout)).toEqual({ running: false, was_running: true });
    const again = await runTool('notifier', ['stop'], t.env);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('notifier is not running\n');
    expect((await status()).running).toBe(false);
  });

  it('refuses an invalid config with the field at fault', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: soon\n');
    const result = await runTool('notifier', ['start'], t.env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/sweep_interval_seconds/);
  });

  it('shows a damaged thread in status without hiding the others, running or not', async () => {
    subscribe([]);
    const damaged = join(t.home, 'damaged');
    expect((await runTool('thread', ['init', damaged], t.env)).code).toBe(0);
    expect((await runTool('thread', ['subscribe', '--thread', damaged, '--consumer', 'other', '--handler', 'true'], t.env)).code).toBe(0);
    for (const suffix of ['-wal', '-shm']) rmSync(join(damaged, `events.db${suffix}`), { force: true });
    writeFileSync(join(damaged, 'events.db'), 'this is not a database, but it is long enough to be read as a header'.repeat(100));
    const check = async () => {
      const result = await runTool('notifier', ['status', '--json'], t.env);
      expect(result.code, result.stderr).toBe(0);
      const subscriptions = (JSON.parse(result.stdout) as NotifierStatus).subscriptions;
      expect(subscriptions.find((s) => s.thread === threadDir)).toMatchObject({ consumer: 'worker', last_error: null });
      expect(subscriptions.find((s) => s.thread === damaged)?.last_error).toMatch(/^cannot read the thread: /);
      const human = await runTool('notifier', ['status'], t.env);
      expect(human.code, human.stderr).toBe(0);
      expect(human.stdout).toContain(`${damaged} *: unreadable`);
    };
    await check();
    await startNotifier();
    await check();
  });

  it('runs at most max_concurrent_runs handlers at once across threads, and every thread gets its turn', async () => {
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\nmax_concurrent_runs: 2\nbackoff: { initial_seconds: 0.2, max_seconds: 1 }\n');
    const spans = join(t.home, 'spans.txt');
    const threads = range(6).map((i) => join(t.home, `agents`, `agent${i}`, 'inbox'));
    for (const dir of threads) {
      const thread = openThread(dir, { home: t.home, create: true });
      thread.subscribe({ consumer: 'worker', handler: joinCommand([process.execPath, fixture('handler.mjs'), seen, '--delay-ms', '300', '--span-file', spans]) });
      thread.push({ source: 'self', type: 'message', content: 'work' });
      thread.close();
    }
    await startNotifier();
    await waitFor(() => existsSync(spans) && readFileSync(spans, 'utf8').trim().split('\n').length >= 6, 'six handler runs', 30_000);
    const runs = readFileSync(spans, 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number) as [number, number]);
    // The most runs alive at one moment: at any run's start, count the runs started and not ended.
    const overlap = Math.max(...runs.map(([start]) => runs.filter(([s, e]) => s <= start && start < e).length));
    expect(overlap).toBeGreaterThanOrEqual(1);
    expect(overlap).toBeLessThanOrEqual(2);
    expect(seenIds()).toHaveLength(6);
    expect((await status()).runs).toMatchObject({ limit: 2 });
  });

  it('keeps its open files bounded however many threads it serves', async () => {
    const count = 24;
    for (let i = 0; i < count; i++) {
      const thread = openThread(join(t.home, 'many', `t${i}`), { home: t.home, create: true });
      thread.subscribe({ consumer: 'worker', handler: joinCommand([process.execPath, fixture('handler.mjs'), seen]) });
      thread.push({ source: 'self', type: 'message', content: `work ${i}` });
      thread.close();
    }
    await startNotifier();
    await waitFor(() => seenIds().length >= count, `${count} threads handled`, 60_000);
    const pid = (await status()).pid!;
    const databases = readdirSync(`/proc/${pid}/fd`).filter((fd) => {
      try {
        return /events\.db/.test(readlinkSync(`/proc/${pid}/fd/${fd}`));
      } catch {
        return false; // closed meanwhile
      }
    });
    // Three descriptors (database, WAL, shared memory) for each thread kept open: 16 at most, not 24.
    expect(databases.length, databases.map((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`)).join('\n')).toBeLessThanOrEqual(16 * 3);
  });

  it('exits with the error when its socket cannot be opened, instead of running on without one', async () => {
    mkdirSync(join(t.home, 'run', 'notifier.sock', 'in the way'), { recursive: true });
    const child = spawn(process.execPath, [cliPath('notifier'), 'start', '--foreground'], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => {
      // Only a daemon that runs on is killed: a loaded machine may take over 10 s to start one.
      const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
      child.on('close', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(code, 'exited by itself').toBe(1);
    expect(stderr).toMatch(/^Error: .*notifier\.sock/);
    expect((await status()).running).toBe(false);
  });

  // What a start does, on one start.
  it('removes run output files older than a day when it starts, keeps its control socket private to its owner, and refuses to start a second daemon while one runs', async () => {
    const outputDir = join(t.home, 'run', 'notifier-output');
    mkdirSync(outputDir, { recursive: true });
    const old = join(outputDir, 'handler.1.1.abc.out');
    const fresh = join(outputDir, 'handler.2.2.def.out');
    writeFileSync(old, 'left by a killed daemon');
    writeFileSync(fresh, 'a run that may still go on');
    const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
    utimesSync(old, twoDaysAgo, twoDaysAgo);
    await startNotifier();
    expect(existsSync(old)).toBe(false);
    expect(existsSync(fresh)).toBe(true);

    const mode = statSync(join(t.home, 'run', 'notifier.sock')).mode & 0o777;
    expect(mode).toBe(0o600);

    const second = await runTool('notifier', ['start'], t.env);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/^Error: notifier is already running \(pid \d+\) - stop it first with: notifier stop\n$/);
    const foreground = await runTool('notifier', ['start', '--foreground', '--json'], t.env);
    expect(foreground.code).toBe(1);
    expect(JSON.parse(foreground.stdout).error).toMatch(/already running/);
  });
});

describe('push without a daemon', () => {
  it('succeeds and returns promptly when notifier is down', async () => {
    subscribe([]);
    const started = Date.now();
    const result = await run(process.execPath, [join(t.home, '.bin', 'thread'), 'push', '--thread', threadDir, '--source', 'self', '--type', 'message', '--content', 'x'], { env: t.env });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('1\n');
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
