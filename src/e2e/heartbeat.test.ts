import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { parse, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { runHeartbeat } from '../agent/index.js';
import { splitCommand } from '../core/command.js';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, openWebchatPage, runArgv, settle, startSystem, until, type CliResult, type System } from './support.js';

/**
 * Heartbeats through the whole system (real notifier, xgw, agent processes; fake model and
 * Telegram): the timer's own command is run as notifier would run it, a day's worth of times,
 * instead of waiting 30 minutes for each.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const isHeartbeat = (request: { body: LooseJson }) => String(request.body?.messages?.[0]?.content ?? '').includes('\n## Heartbeat\n');

/** HEARTBEAT_OK to heartbeats, unless `finding` says otherwise; an echo to people. */
function model(finding: { text: string | null } = { text: null }): FakeStep {
  return (request) => (isHeartbeat(request) ? { kind: 'text', text: finding.text ?? 'HEARTBEAT_OK' } : { kind: 'text', text: `echo: ${lastUserText(request)}` });
}

interface Timer {
  id: string;
  schedule: string;
  command: string;
  last_exit: string | null;
}

async function timers(s: System): Promise<Timer[]> {
  return JSON.parse((await s.must('notifier', ['timer', 'list', '--json'])).stdout) as Timer[];
}

/** The heartbeat timer's command as notifier has it. */
async function timerCommand(s: System): Promise<string> {
  const timer = (await timers(s)).find((t) => t.id === 'hb-admin');
  if (!timer) throw new Error('no timer hb-admin');
  return timer.command;
}

/** Runs a timer command the way notifier runs one: its argv, the system's environment. */
function fire(s: System, command: string): Promise<CliResult> {
  const [file, ...args] = splitCommand(command);
  return runArgv(file, args, { ...s.env, THECLAW_TIMER: 'hb-admin' });
}

async function fireTimer(s: System): Promise<CliResult> {
  return fire(s, await timerCommand(s));
}

/** What reached people, as xgw has it: agent entries in the mailboxes, and sends recorded per channel. */
function delivered(s: System): { mailbox: number; deliveries: number } {
  const db = new Database(join(s.home, 'xgw', 'state.db'), { readonly: true, fileMustExist: true });
  try {
    return {
      mailbox: db.prepare("SELECT COUNT(*) FROM mailbox WHERE role = 'agent'").pluck().get() as number,
      deliveries: db.prepare('SELECT COUNT(*) FROM deliveries').pluck().get() as number,
    };
  } finally {
    db.close();
  }
}

const heartbeatThread = (s: System) => join(s.home, 'agents', 'admin', 'threads', 'heartbeat');
const modelCalls = (s: System) => s.llm.requests.filter((request) => request.path === '/v1/chat/completions').length;

describe('heartbeats', () => {
  it('an idle heartbeat day sends nothing: 48 beats at 30 m answered HEARTBEAT_OK reach no channel, and cost what their usage records say', { timeout: 240_000 }, async () => {
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model() } });
    system = s;
    const { ws, received } = await openWebchatPage(s);
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'hello-1', text: 'hello' })); // the owner's direct chat with admin
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'echo: hello'), 'the echo', 20_000);
      s.telegram.queueUpdate(textUpdate({ from: 4242, text: 'hi from telegram' }));
      await until(() => s.telegram.sent.length === 1, "the Telegram peer's answer", 20_000);
      await s.must('agent', ['heartbeat', 'admin', '--every', '30m', '--prompt', 'Anything due today in ~/todo.txt?']);
      await settle(s);
      const before = { web: received.filter((m) => m.type === 'message').length, telegram: s.telegram.sent.length, xgw: delivered(s) };

      // The first beat as the timer runs it; the other 47 call what that command calls, in-process,
      // which spares a Node start each (the command's own path is the same function).
      const result = await fireTimer(s);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/^nothing to report \(\d+ tokens\)\n$/);
      for (let beat = 1; beat < 48; beat++) {
        expect(await runHeartbeat('admin', { home: s.home, env: { ...s.env, THECLAW_TIMER: 'hb-admin' } })).toEqual({ outcome: 'ok', tokens: expect.any(Number) });
      }
      await settle(s);

      expect(received.filter((m) => m.type === 'message').length).toBe(before.web);
      expect(s.telegram.sent.length).toBe(before.telegram);
      expect(delivered(s)).toEqual(before.xgw);
      const records = s.events(heartbeatThread(s)).filter((event) => event.type === 'record');
      expect(records.filter((event) => event.subtype === 'decision').map((event) => JSON.parse(event.content).decision)).toEqual(Array(48).fill('no_reply'));
      expect(s.events(heartbeatThread(s)).filter((event) => event.type === 'message')).toEqual([]);
      const usage = records.filter((event) => event.subtype === 'usage').map((event) => JSON.parse(event.content) as { input_tokens: number; output_tokens: number });
      expect(usage).toHaveLength(48);
      const input = usage.reduce((sum, u) => sum + u.input_tokens, 0);
      const output = usage.reduce((sum, u) => sum + u.output_tokens, 0);
      console.log(
        `an idle heartbeat day (48 beats at 30 m, HEARTBEAT_OK): ${input + output} tokens (${input} input + ${output} output), ${Math.round((input + output) / 48)} per beat, bash_exec offered (the owner's policy)`,
      );
      expect((input + output) / 48).toBeLessThan(600);
    } finally {
      ws.close();
    }
  });

  it("makes no model call while the agent is stopped or over its budget, and a finding reaches the owner's web chat only", { timeout: 120_000 }, async () => {
    const finding: { text: string | null } = { text: null };
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model(finding) } });
    system = s;
    const { ws, received } = await openWebchatPage(s);
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'hello-1', text: 'hello' }));
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'echo: hello'), 'the echo', 20_000);
      s.telegram.queueUpdate(textUpdate({ from: 4242, text: 'hi from telegram' }));
      await until(() => s.telegram.sent.length === 1, "the Telegram peer's answer", 20_000);
      await s.must('agent', ['heartbeat', 'admin', '--every', '30m']);

      await s.must('agent', ['stop', 'admin']);
      let calls = modelCalls(s);
      expect((await fireTimer(s)).stdout).toBe('skipped: agent admin is stopped (agent start admin)\n');
      expect(modelCalls(s)).toBe(calls);
      await s.must('agent', ['start', 'admin']);

      finding.text = 'The backup of last night failed: /backup is full.';
      expect((await fireTimer(s)).stdout).toMatch(/^told the owner \(\d+ tokens\): The backup of last night failed/);
      const told = await until(() => received.find((m) => m.type === 'message' && m.message.text === finding.text)?.message, "the finding in the owner's web chat", 20_000);
      expect(told.notice).toBeUndefined();
      await settle(s);
      expect(s.telegram.sent.map((sent) => sent.text)).toEqual(['echo: hi from telegram']);

      // Fired by notifier itself (in a warm runner): the same command on a timer, once, in a second.
      finding.text = null;
      const decisions = () => s.events(heartbeatThread(s)).filter((event) => event.subtype === 'decision').length;
      const done = decisions();
      await s.must('notifier', ['timer', 'add', '--id', 'hb-fast', '--in', '1s', '--command', await timerCommand(s)]);
      await until(() => decisions() > done, 'a beat notifier started', 20_000);
      await until(async () => (await timers(s)).find((t) => t.id === 'hb-fast')?.last_exit === 'exited 0', 'the beat to exit 0', 20_000);
      await s.must('notifier', ['timer', 'remove', '--id', 'hb-fast']);
      expect(
        s
          .events(heartbeatThread(s))
          .filter((event) => event.subtype === 'decision')
          .map((event) => JSON.parse(event.content).decision),
      ).toEqual(expect.arrayContaining(['told_owner', 'no_reply']));

      // A cap the beat's reservation (its prompt and the model's largest answer, 4,096) fits in,
      // until a message of the day spends most of it.
      appendFileSync(join(s.home, 'agents', 'admin', 'config.yaml'), 'budget: { daily_tokens: 9000 }\n');
      expect((await fireTimer(s)).stdout).toMatch(/^nothing to report/);
      s.llm.enqueue({ kind: 'text', text: 'that was a long one', usage: { input: 5000, output: 10 } });
      ws.send(JSON.stringify({ type: 'message', id: 'long-1', text: 'a long question' }));
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'that was a long one'), 'the long answer', 20_000);
      calls = modelCalls(s);
      expect((await fireTimer(s)).stdout).toBe("skipped: over its budget: today's budget of 9,000 tokens is used up\n");
      expect(modelCalls(s)).toBe(calls);
    } finally {
      ws.close();
    }
  });

  it('agent heartbeat sets, shows and removes it with its timer, refuses bad input without storing it, and the timer comes back after agent start, a notifier restart and theclaw up, which also removes one whose heartbeat left the config', {
    timeout: 120_000,
  }, async () => {
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model() } });
    system = s;
    const agent = (args: string[], env?: NodeJS.ProcessEnv) => s.run('agent', ['heartbeat', 'admin', ...args], undefined, env);
    const configPath = join(s.home, 'agents', 'admin', 'config.yaml');
    const config = () => parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;

    expect((await agent([])).stdout).toBe('admin has no heartbeat (agent heartbeat admin --every 30m sets one)\n');
    for (const [args, error] of [
      [['--every', '10'], /^Error: invalid heartbeat: every: must be a duration of at least 1m, like 30m, 1h or 2h30m - give --every like 30m/],
      [['--every', '30s'], /^Error: invalid heartbeat: every: must be a duration of at least 1m/],
      [['--prompt', 'check'], /^Error: agent admin has no heartbeat yet, so --every is needed - e\.g\. agent heartbeat admin --every 30m\n$/],
      [['--every', '30m', '--active-hours', '8-22'], /^Error: invalid heartbeat: active_hours: must be HH:MM-HH:MM, e\.g\. 08:00-22:00 - /],
      [['--every', '30m', '--model', 'nope/m'], /^Error: --model nope\/m: unknown provider nope - /],
      [['--every', '30m', '--off'], /^Error: --off, --now and the settings .* go one at a time - /],
    ] as const) {
      const result = await agent([...args]);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(error);
    }
    const turn = { ...s.env, THECLAW_AGENT: 'admin', THECLAW_CONVERSATION: 'peer-webchat.main.x' };
    const inTurn = await agent(['--every', '30m'], turn);
    expect(inTurn.code).toBe(2);
    expect(inTurn.stderr).toMatch(/^Error: an agent's turn cannot set or run heartbeats/);
    expect(config().heartbeat).toBeUndefined();
    expect((await timers(s)).map((t) => t.id)).toEqual([]);

    const set = JSON.parse((await s.must('agent', ['heartbeat', 'admin', '--every', '30m', '--prompt', 'check the mail', '--json'])).stdout);
    expect(set).toMatchObject({
      agent: 'admin',
      heartbeat: { every: '30m', prompt: 'check the mail' },
      timer: { id: 'hb-admin', schedule: 'every 1800s', runs: 0 },
      started: true,
      owner_chat: false,
      last: null,
    });
    expect(config().heartbeat).toEqual({ every: '30m', prompt: 'check the mail' });
    await s.must('agent', ['heartbeat', 'admin', '--active-hours', '08:00-22:00']); // changes that only
    expect(config().heartbeat).toEqual({ every: '30m', prompt: 'check the mail', active_hours: '08:00-22:00' });
    const shown = (await agent([])).stdout;
    expect(shown).toMatch(
      /^admin: a heartbeat every 30m, on the agent's model, within 08:00-22:00 \(local time\)\n {2}prompt: check the mail\n {2}timer hb-admin: every 1800s, next \S+, runs 0\n {2}last beat: none yet\n {2}skipped until the owner writes to admin/,
    );
    const [timer] = await timers(s);
    expect(timer!.command).toMatch(/ \S+\/dist\/agent\/cli\.js heartbeat admin --now$/);

    // The config is what counts: agent start, notifier's restart and theclaw up keep or set the timer again.
    await s.must('notifier', ['timer', 'remove', '--id', 'hb-admin']);
    await s.must('agent', ['start', 'admin']);
    expect(await timers(s)).toEqual([expect.objectContaining({ id: 'hb-admin', schedule: 'every 1800s', command: timer!.command })]);
    await s.must('notifier', ['stop']);
    await s.must('notifier', ['start']);
    expect((await timers(s)).map((t) => t.id)).toEqual(['hb-admin']);
    expect((await fireTimer(s)).stdout).toMatch(/^skipped: (the owner has no direct chat|outside its active hours)/);
    await s.must('notifier', ['timer', 'remove', '--id', 'hb-admin']);
    const up = JSON.parse((await s.must('theclaw', ['up', '--json'])).stdout);
    expect(up.heartbeats).toEqual({ set: ['hb-admin'], removed: [], problems: [] });
    expect((await timers(s)).map((t) => t.id)).toEqual(['evolver-daily', 'hb-admin', 'maintainer-sweep', 'warden-sweep']);
    expect(JSON.parse((await s.must('theclaw', ['up', '--json'])).stdout).heartbeats).toEqual({ set: [], removed: [], problems: [] });

    expect((await agent(['--off'])).stdout).toBe('removed the heartbeat of admin and its timer\n');
    expect(config().heartbeat).toBeUndefined();
    expect((await timers(s)).map((t) => t.id)).toEqual(['evolver-daily', 'maintainer-sweep', 'warden-sweep']);
    expect((await agent(['--off'])).stdout).toBe('admin had no heartbeat\n');

    // Taken out of the config by hand: theclaw up removes its timer.
    await s.must('agent', ['heartbeat', 'admin', '--every', '1h']);
    writeFileSync(configPath, stringify({ ...config(), heartbeat: undefined }));
    expect(JSON.parse((await s.must('theclaw', ['up', '--json'])).stdout).heartbeats).toEqual({ set: [], removed: ['hb-admin'], problems: [] });
    expect((await timers(s)).map((t) => t.id)).toEqual(['evolver-daily', 'maintainer-sweep', 'warden-sweep']);
  });
});
