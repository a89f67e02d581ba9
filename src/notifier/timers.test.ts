import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isClawError } from '../core/errors.js';
import { joinCommand } from '../core/command.js';
import { createTestHome, runTool, waitFor, type TestHome } from '../testing/index.js';
import { dueAt, nextRunAt, parseDuration, parseSchedule, type Timer } from './timers.js';

describe('timer schedules', () => {
  it('parses durations with units and refuses malformed or sub-second ones', () => {
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('1500ms')).toBe(1_500);
    for (const bad of ['', '10', '5 m', 'm5', '1x', '500ms', '1s;rm', '36501d', '99999999999999999999999d']) {
      expect(() => parseDuration(bad), bad).toThrow();
      try {
        parseDuration(bad);
      } catch (error) {
        expect(isClawError(error, 'usage')).toBe(true);
      }
    }
  });

  it('takes exactly one of cron, every and at, and validates cron through the cron library', () => {
    expect(parseSchedule({ cron: '*/5 * * * *' })).toEqual({ kind: 'cron', expr: '*/5 * * * *' });
    expect(() => parseSchedule({})).toThrow(/exactly one/);
    expect(() => parseSchedule({ cron: '* * * * *', every: '1m' })).toThrow(/exactly one/);
    expect(() => parseSchedule({ cron: '99 * * * *' })).toThrow(/invalid cron/);
    expect(() => parseSchedule({ at: 'tomorrow-ish' })).toThrow(/invalid time/);
  });

  it('plans the next run: cron and every from the last run, at once only', () => {
    const base: Omit<Timer, 'schedule'> = { id: 't', command: 'x', created_at: '2026-01-01T00:00:00.000Z', last_run_at: null, last_exit: null, runs: 0, done: false };
    const now = new Date('2026-01-01T00:02:30.000Z');
    expect(nextRunAt({ ...base, schedule: { kind: 'cron', expr: '*/5 * * * *' } }, now)?.toISOString()).toBe('2026-01-01T00:05:00.000Z');
    expect(nextRunAt({ ...base, schedule: { kind: 'every', ms: 60_000 }, last_run_at: '2026-01-01T00:02:00.000Z' }, now)?.toISOString()).toBe('2026-01-01T00:03:00.000Z');
    // Runs missed while down collapse into one run now.
    expect(nextRunAt({ ...base, schedule: { kind: 'every', ms: 60_000 } }, now)?.toISOString()).toBe(now.toISOString());
    const at = { ...base, schedule: { kind: 'at' as const, time: new Date('2026-01-02T00:00:00.000Z') } };
    expect(nextRunAt(at, now)?.toISOString()).toBe('2026-01-02T00:00:00.000Z');
    expect(nextRunAt({ ...at, done: true }, now)).toBeNull();
  });

  it('makes a cron timer due once its next run after the last run has passed, and collapses missed runs into one', () => {
    const base: Omit<Timer, 'schedule'> = { id: 't', command: 'x', created_at: '2026-01-01T00:00:00.000Z', last_run_at: null, last_exit: null, runs: 0, done: false };
    const cron = { ...base, schedule: { kind: 'cron' as const, expr: '*/5 * * * *' } };
    // Created at 00:00, first run at 00:05: due (now) at 00:07, although the next cron slot after 00:07 is 00:10.
    const now = new Date('2026-01-01T00:07:00.000Z');
    expect(dueAt(cron)?.toISOString()).toBe('2026-01-01T00:05:00.000Z');
    expect(nextRunAt(cron, now)?.toISOString()).toBe(now.toISOString());
    // Last run at 00:05: not due before 00:10.
    expect(nextRunAt({ ...cron, last_run_at: '2026-01-01T00:05:00.000Z' }, now)?.toISOString()).toBe('2026-01-01T00:10:00.000Z');
    // Down for a day: one run now, not 288.
    expect(nextRunAt({ ...cron, last_run_at: '2026-01-01T00:05:00.000Z' }, new Date('2026-01-02T00:07:00.000Z'))?.toISOString()).toBe('2026-01-02T00:07:00.000Z');
  });

  it('counts from now, not from a last run in the future, when the clock was stepped back', () => {
    const base: Omit<Timer, 'schedule'> = { id: 't', command: 'x', created_at: '2026-01-01T00:00:00.000Z', last_run_at: '2026-01-01T02:00:00.000Z', last_exit: null, runs: 1, done: false };
    // The last run was stamped at 02:00 by a clock an hour and a half ahead; it is 00:30 now.
    const now = new Date('2026-01-01T00:30:00.000Z');
    const every = { ...base, schedule: { kind: 'every' as const, ms: 60_000 } };
    expect(nextRunAt(every, now)?.toISOString()).toBe('2026-01-01T00:31:00.000Z');
    const cron = { ...base, schedule: { kind: 'cron' as const, expr: '*/5 * * * *' } };
    expect(nextRunAt(cron, now)?.toISOString()).toBe('2026-01-01T00:35:00.000Z');
  });
});

describe('notifier timer (CLI and daemon)', () => {
  let t: TestHome;
  beforeEach(() => {
    t = createTestHome();
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'config.yaml'), 'sweep_interval_seconds: 0.5\n');
  });
  afterEach(async () => {
    await runTool('notifier', ['stop'], t.env);
    t.cleanup();
  });

  // Counts whole lines only: the shell creates the file before it writes to it.
  const ticks = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').length - 1 : 0);
  const appendCommand = (file: string) => joinCommand(['bash', '-c', `echo "$THECLAW_TIMER" >> '${file}'`]);

  it('runs an interval timer, keeps it across a restart, and stops running it once removed', async () => {
    const file = join(t.home, 'ticks with space.txt');
    const add = await runTool('notifier', ['timer', 'add', '--id', 'tick', '--every', '1s', '--command', appendCommand(file), '--json'], t.env);
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({ id: 'tick', schedule: 'every 1s', runs: 0 });
    expect((await runTool('notifier', ['start'], t.env)).code).toBe(0);
    await waitFor(() => ticks(file) >= 2, 'two ticks');
    expect(readFileSync(file, 'utf8').split('\n')[0]).toBe('tick');

    await runTool('notifier', ['stop'], t.env);
    const before = ticks(file);
    expect((await runTool('notifier', ['start'], t.env)).code).toBe(0);
    await waitFor(() => ticks(file) >= before + 1, 'a tick after the restart');

    const list = JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout);
    expect(list).toHaveLength(1);
    expect(list[0].runs).toBeGreaterThanOrEqual(3);
    expect(list[0].last_exit).toBe('exited 0');

    expect((await runTool('notifier', ['timer', 'remove', '--id', 'tick'], t.env)).code).toBe(0);
    // Give a removed timer the chance to run twice more; the count must not move. The daemon was
    // poked by `remove`, so a run already planned is dropped on that reload.
    const after = ticks(file);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(ticks(file)).toBeLessThanOrEqual(after + 1);
    expect(JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout)).toEqual([]);
  });

  // One daemon for both: the cron timer's runs are what must go on once the output directory is gone.
  it('runs a cron timer with a seconds field through the daemon, and stays up and runs it when its output directory is removed under it', async () => {
    const file = join(t.home, 'cron.txt');
    expect((await runTool('notifier', ['start'], t.env)).code).toBe(0);
    rmSync(join(t.home, 'run', 'notifier-output'), { recursive: true, force: true });
    const add = await runTool('notifier', ['timer', 'add', '--id', 'every-second', '--cron', '*/1 * * * * *', '--command', appendCommand(file)], t.env);
    expect(add.code, add.stderr).toBe(0);
    await waitFor(() => ticks(file) >= 2, 'two cron runs', 10_000);
    const [timer] = JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout);
    expect(timer.runs).toBeGreaterThanOrEqual(2);
    expect(timer.last_exit).toBe('exited 0');
    const status = JSON.parse((await runTool('notifier', ['status', '--json'], t.env)).stdout);
    expect(status.running).toBe(true);
  });

  it('warns once per due time while a run outlasts its interval, and runs again once it ends', async () => {
    const file = join(t.home, 'slow.txt');
    const slow = joinCommand(['bash', '-c', `echo run >> '${file}'; sleep 2.5`]);
    expect((await runTool('notifier', ['timer', 'add', '--id', 'slow', '--every', '1s', '--command', slow], t.env)).code).toBe(0);
    expect((await runTool('notifier', ['start'], t.env)).code).toBe(0);
    await waitFor(() => ticks(file) >= 3, 'three runs', 20_000);
    const log = readFileSync(join(t.home, 'logs', 'notifier.log'), 'utf8');
    const warnings = log
      .split('\n')
      .filter((line) => line.includes('[WARN] timer slow is due'))
      .map((line) => line.replace(/^\[\S+\] /, ''));
    expect(warnings.length).toBeGreaterThanOrEqual(2);
    expect(new Set(warnings).size).toBe(warnings.length);
  });

  it("runs a one-shot timer once and then shows no next run, without passing a handler's THECLAW_THREAD and THECLAW_CONSUMER on to it", async () => {
    const file = join(t.home, 'once.txt');
    // As if the daemon had been started by a subscription handler.
    const env = { ...t.env, THECLAW_THREAD: join(t.home, 'some thread'), THECLAW_CONSUMER: 'worker' };
    expect((await runTool('notifier', ['start'], env)).code).toBe(0);
    const show = joinCommand(['bash', '-c', `echo "\${THECLAW_THREAD-unset} \${THECLAW_CONSUMER-unset} $THECLAW_TIMER" >> '${file}'`]);
    const at = new Date(Date.now() + 500).toISOString();
    expect((await runTool('notifier', ['timer', 'add', '--id', 'once', '--at', at, '--command', show], t.env)).code).toBe(0);
    await waitFor(() => ticks(file) >= 1, 'the one-shot run');
    expect(readFileSync(file, 'utf8')).toBe('unset unset once\n');
    const [timer] = JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout);
    expect(timer).toMatchObject({ id: 'once', runs: 1, next_run_at: null });
  });

  it('refuses a duplicate id, a bad cron expression and an unknown timer with the right exit codes', async () => {
    const add = ['timer', 'add', '--id', 'dup', '--cron', '0 9 * * 1-5', '--command', 'true'];
    expect((await runTool('notifier', add, t.env)).code).toBe(0);
    const again = await runTool('notifier', add, t.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('Error: timer dup exists - remove it first: notifier timer remove --id dup\n');
    const badCron = await runTool('notifier', ['timer', 'add', '--id', 'bad', '--cron', '61 * * * *', '--command', 'true'], t.env);
    expect(badCron.code).toBe(2);
    expect(badCron.stderr).toMatch(/^Error: invalid cron expression/);
    const none = await runTool('notifier', ['timer', 'add', '--id', 'none', '--command', 'true'], t.env);
    expect(none.code).toBe(2);
    const remove = await runTool('notifier', ['timer', 'remove', '--id', 'ghost', '--json'], t.env);
    expect(remove.code).toBe(1);
    expect(JSON.parse(remove.stdout)).toEqual({ error: 'no timer ghost', suggestion: 'see the timers with: notifier timer list' });
    const human = await runTool('notifier', ['timer', 'list'], t.env);
    expect(human.stdout).toMatch(/^timers:\n {2}dup: cron 0 9 \* \* 1-5, next \S+, runs 0: true\n$/);
  });

  it('refuses a duration past what a timer can wait (or a Date can hold) as a usage error naming the flag and the limit', async () => {
    for (const [flag, duration] of [
      ['--in', '99999999999d'],
      ['--in', '36501d'],
      ['--every', '99999999999d'],
    ] as const) {
      const add = await runTool('notifier', ['timer', 'add', '--id', 'far', flag, duration, '--command', 'true'], t.env);
      expect(add.code, add.stderr).toBe(2);
      expect(add.stderr).toBe(`Error: ${flag} duration ${duration} is longer than 36500d (100 years) - use 36500d or less\n`);
    }
    const json = await runTool('notifier', ['timer', 'add', '--id', 'far', '--in', '99999999999d', '--command', 'true', '--json'], t.env);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ error: '--in duration 99999999999d is longer than 36500d (100 years)', suggestion: 'use 36500d or less' });
    expect((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout.trim()).toBe('[]');
    // The limit itself is taken.
    expect((await runTool('notifier', ['timer', 'add', '--id', 'far', '--in', '36500d', '--command', 'true'], t.env)).code).toBe(0);
  });
});
