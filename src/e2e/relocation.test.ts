import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent/lifecycle.js';
import { joinCommand } from '../core/command.js';
import { registryDir } from '../core/layout.js';
import { cliPath } from '../core/package.js';
import { openThread } from '../thread/thread.js';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, runCli, startSystem, telegramThread, until, type System, type SystemTool } from './support.js';

/**
 * A home moved (`mv`) or copied (`cp -a`) to another path works there: nothing stored in it names
 * where it was. The system runs, is stopped with work under way (a reply not delivered, a reminder
 * due, a message waiting in the inbox, another at Telegram), moved, and started from the new path;
 * then its copy is started too. The fake model and Telegram stay up throughout.
 */
const ANN = 8181;
const BOB = 8282;

let system: System | undefined;
let parent: string | undefined;
/** Environments of the homes started after the move, stopped after each test. */
const started: NodeJS.ProcessEnv[] = [];

afterEach(async () => {
  for (const env of started.splice(0)) await runCli('theclaw', ['down'], env);
  await system?.stop();
  system = undefined;
  if (parent) rmSync(parent, { recursive: true, force: true });
  parent = undefined;
});

/** The answer to "remind me" waits for this, so that the system can be stopped while that turn runs. */
let release: () => void = () => {};
const answerHeld = () => new Promise<void>((resolve) => (release = resolve));

function reminderModel(held: Promise<void>): FakeStep {
  return async (request) => {
    const messages: LooseJson[] = request.body?.messages ?? [];
    const text = lastUserText(request);
    if (messages.at(-1)?.role === 'tool') {
      await held;
      return { kind: 'text', text: 'I will remind you.' };
    }
    if (text.startsWith('[A reminder I set on')) return { kind: 'text', text: `Reminder: ${text.slice(text.indexOf('] ') + 2)}` };
    if (text.startsWith('remind me')) return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'notifier timer add --id stretch --in 1s --message "time to stretch"' } };
    return { kind: 'text', text: `echo: ${text}` };
  };
}

/** The environment of the system's processes for its home at `home`. */
function envAt(s: System, home: string): NodeJS.ProcessEnv {
  return { ...s.env, THECLAW_HOME: home, PATH: `${join(home, '.bin')}:${process.env.PATH}` };
}

async function must(args: string[], env: NodeJS.ProcessEnv, tool: SystemTool = 'theclaw'): Promise<string> {
  const result = await runCli(tool, args, env);
  if (result.code !== 0) throw new Error(`${tool} ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return result.stdout;
}

async function adminStatus(env: NodeJS.ProcessEnv): Promise<AgentStatus> {
  return JSON.parse(await must(['status', 'admin', '--json'], env, 'agent')) as AgentStatus;
}

/** Every file under `root` (SQLite databases, their WAL, logs, JSON...) whose bytes hold `text`. */
function filesHolding(root: string, text: string): string[] {
  const needle = Buffer.from(text);
  const found: string[] = [];
  const visit = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else if (stat.isFile() && readFileSync(path).includes(needle)) found.push(path);
  };
  visit(root);
  return found;
}

const sentTo = (s: System, chat: number) => s.telegram.sent.filter((sent) => sent.chat_id === chat).map((sent) => sent.text);

describe('a home moved or copied', () => {
  it('answers new and pending messages and fires a due timer from its new path, and no file in it names the old one', { timeout: 120_000 }, async () => {
    const held = answerHeld();
    const s = await startSystem({ llm: { defaultStep: reminderModel(held) } });
    system = s;
    const before = s.home;
    await s.must('theclaw', ['up']);
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'hello' }));
    await until(() => sentTo(s, ANN).includes('echo: hello'), 'the first answer', 30_000);

    // Stopped while the reminder's turn runs: its answer and the reminder are left for later.
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'remind me in a second to stretch' }));
    await until(() => s.llm.requests.some((request) => request.body?.messages?.at(-1)?.role === 'tool'), 'the turn to ask for its answer', 30_000);
    await s.must('theclaw', ['down']);
    release();
    await until(async () => !(await adminStatus(s.env)).running, 'the turn to end', 30_000);
    const timers = JSON.parse(await must(['timer', 'list', '--json'], s.env, 'notifier')) as { id: string; runs: number }[];
    expect(timers).toContainEqual(expect.objectContaining({ id: expect.stringMatching(/-stretch$/), runs: 0 }));
    expect(sentTo(s, ANN)).toEqual(['echo: hello']);
    // Waiting while it is down: a message in the inbox, and one at Telegram.
    await s.must('agent', ['send', 'admin', '--text', 'are you still there']);
    s.telegram.queueUpdate(textUpdate({ from: BOB, text: 'hi from bob' }));

    parent = mkdtempSync(join(tmpdir(), 'theclaw-moved-'));
    const moved = join(parent, 'home');
    renameSync(before, moved);
    const env = envAt(s, moved);
    started.push(env);
    await must(['up'], env);

    await until(() => sentTo(s, ANN).includes('I will remind you.'), 'the answer left undelivered', 30_000);
    await until(() => sentTo(s, ANN).includes('Reminder: time to stretch'), 'the reminder', 30_000);
    await until(() => sentTo(s, BOB).includes('echo: hi from bob'), 'the message that waited at Telegram', 30_000);
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'hello again' }));
    await until(() => sentTo(s, ANN).includes('echo: hello again'), 'a new answer', 30_000);
    const terminal = join(moved, 'agents', 'admin', 'threads', 'peers', `terminal.local.${userInfo().username}`);
    await until(() => s.events(terminal).some((event) => event.source === 'self' && event.content.includes('echo: are you still there')), 'the message that waited in the inbox', 30_000);
    await until(
      async () => {
        const status = await adminStatus(env);
        return status.pending === 0 && status.undelivered === 0;
      },
      'the moved home to be idle',
      30_000,
    );
    const [timer] = (JSON.parse(await must(['timer', 'list', '--json'], env, 'notifier')) as { id: string; runs: number }[]).filter((t) => t.id.endsWith('-stretch'));
    expect(timer?.runs).toBe(1);
    expect(s.events(telegramThread(moved, ANN)).some((event) => event.content.includes('[A reminder I set on'))).toBe(true);

    await must(['down'], env);
    await until(async () => !(await adminStatus(env)).running, 'the moved home to stop', 30_000);
    expect(filesHolding(moved, before)).toEqual([]);

    // A copy of the moved home is a system of its own: it answers from its own files.
    const copy = join(parent, 'copy');
    execFileSync('cp', ['-a', moved, copy]);
    const movedAnn = s.events(telegramThread(moved, ANN)).length;
    const copyEnv = envAt(s, copy);
    started.push(copyEnv);
    await must(['up'], copyEnv);
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'hello from the copy' }));
    await until(() => sentTo(s, ANN).includes('echo: hello from the copy'), 'the copy to answer', 30_000);
    await must(['down'], copyEnv);
    expect(s.events(telegramThread(copy, ANN)).some((event) => event.content.includes('echo: hello from the copy'))).toBe(true);
    expect(s.events(telegramThread(moved, ANN))).toHaveLength(movedAnn);
    expect(filesHolding(copy, before)).toEqual([]);
    expect(filesHolding(copy, moved)).toEqual([]);
  });
  it('runs a home an older version wrote (absolute paths in the registry and the handlers) after it was moved, and writes its registry again', { timeout: 120_000 }, async () => {
    const s = await startSystem({ llm: { defaultStep: reminderModel(Promise.resolve()) } });
    system = s;
    const before = s.home;
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'hello' }));
    await until(() => sentTo(s, ANN).includes('echo: hello'), 'the first answer', 30_000);
    await until(async () => (await adminStatus(s.env)).undelivered === 0, 'the answer to be delivered', 30_000);
    await s.must('theclaw', ['down']);

    // As an older version left it: registry entries and the outbound handler with absolute paths,
    // and a reply that waits for delivery.
    const annThread = telegramThread(before, ANN);
    for (const name of readdirSync(registryDir(before))) {
      const entry = JSON.parse(readFileSync(join(registryDir(before), name), 'utf8')) as { path: string; registered_at: string };
      const path = join(before, entry.path);
      unlinkSync(join(registryDir(before), name));
      writeFileSync(join(registryDir(before), `${createHash('sha256').update(path).digest('hex').slice(0, 24)}.json`), JSON.stringify({ path, registered_at: entry.registered_at }));
    }
    const db = new Database(join(annThread, 'events.db'));
    db.prepare("UPDATE consumers SET handler = ? WHERE consumer = 'outbound'").run(joinCommand([process.execPath, cliPath('agent'), 'deliver', '--thread', annThread, '--consumer', 'outbound']));
    db.close();
    const thread = openThread(annThread, { home: before });
    const answered = JSON.parse(thread.peek({ filter: "type = 'message' AND source = 'self'" }).at(-1)!.content) as object;
    thread.push({ source: 'self', type: 'message', content: JSON.stringify({ ...answered, text: 'waited through the move' }) });
    thread.close();

    parent = mkdtempSync(join(tmpdir(), 'theclaw-moved-'));
    const moved = join(parent, 'home');
    renameSync(before, moved);
    const env = envAt(s, moved);
    started.push(env);
    // The daemons alone, without theclaw up, which would store admin's handlers anew.
    await must(['start'], env, 'notifier');
    await must(['start'], env, 'xgw');
    await until(() => sentTo(s, ANN).includes('waited through the move'), 'the reply to be delivered by the old handler', 30_000);
    expect(
      readdirSync(registryDir(moved))
        .map((name) => (JSON.parse(readFileSync(join(registryDir(moved), name), 'utf8')) as { path: string }).path)
        .filter(isAbsolute),
    ).toEqual([]);
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'hello again' }));
    await until(() => sentTo(s, ANN).includes('echo: hello again'), 'a new answer', 30_000);
  });
});
