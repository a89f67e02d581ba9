import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent/lifecycle.js';
import type { Check } from '../theclaw/doctor.js';
import type { SystemStatus } from '../theclaw/status.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, startSystem, telegramThread, until, untilAnswered, type System } from './support.js';

/**
 * One damaged conversation thread (its events.db written over) stops only that conversation, through
 * the whole system: its messages are let go with the damage in the agent log, every other person
 * is answered (before, a run failing on it kept the inbox from moving past it, so the agent fell
 * silent for everyone after one batch), and status and doctor name the file and how to fix it.
 */

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const DAMAGED = 201;
const OTHERS = [202, 203, 204, 205];
const sentTo = (s: System, chat: number) => s.telegram.sent.filter((sent) => Number(sent.chat_id) === chat);

describe('a damaged conversation thread', () => {
  it('stops only its own conversation: 60 messages later every other person is answered, and status and doctor name the file', async () => {
    const s = await startSystem({ llm: { defaultStep: (request) => ({ kind: 'text', text: `reply to: ${lastUserText(request)}` }) } });
    system = s;
    s.telegram.queueUpdate(textUpdate({ from: DAMAGED, text: 'hello before the damage' }));
    await until(() => sentTo(s, DAMAGED).length === 1, 'the first answer to the person whose thread gets damaged');
    await untilAnswered(s); // delivered and written down before the file is damaged

    const thread = telegramThread(s.home, DAMAGED);
    const file = join(thread, 'events.db');
    for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    writeFileSync(file, 'this is not a database any more, a disk wrote garbage over it. '.repeat(200));

    const peers = [DAMAGED, ...OTHERS];
    for (let n = 0; n < 60; n++) s.telegram.queueUpdate(textUpdate({ from: peers[n % peers.length]!, text: `message ${n}` }));
    const answersTo = (peer: number) => Array.from({ length: 12 }, (_, k) => `reply to: message ${peers.indexOf(peer) + 5 * k}`);
    // A message sent may be its answer's draft until the answer edits it; a draft waits for the
    // conversation's earlier answers to be out, so once the twelfth is whole, all are.
    await until(() => OTHERS.every((peer) => sentTo(s, peer).length === 12 && sentTo(s, peer)[11]!.text === answersTo(peer)[11]), 'every other person answered 12 times', 60_000);
    for (const peer of OTHERS) {
      expect(sentTo(s, peer).map((sent) => sent.text)).toEqual(answersTo(peer));
    }
    expect(sentTo(s, DAMAGED)).toHaveLength(1);
    // Let go, not waiting: nothing of the inbox stays pending.
    await until(async () => (JSON.parse((await s.must('agent', ['status', 'admin', '--json'])).stdout) as AgentStatus).pending === 0, 'the inbox handled');

    const log = readFileSync(join(s.home, 'agents', 'admin', 'logs', 'agent.log'), 'utf8');
    // A log in the home names the home `$THECLAW_HOME` (it can be moved); status below gives the path.
    const logged = file.replace(s.home, '$THECLAW_HOME');
    expect(log).toContain(`is not answered: thread threads/peers/telegram.main.${DAMAGED} is damaged: ${logged} (file is not a database) - move it away`);
    expect(log).not.toMatch(/rm -rf/);

    const status = JSON.parse((await s.must('theclaw', ['status', '--json'])).stdout) as SystemStatus;
    expect(status.components.map((c) => [c.name, c.running, c.answering])).toEqual([
      ['notifier', true, true],
      ['xgw', true, true],
    ]);
    const admin = status.agents.find((a) => a.id === 'admin') as AgentStatus;
    expect(admin.damaged).toEqual([
      { thread: `threads/peers/telegram.main.${DAMAGED}`, file, error: 'file is not a database', fix: expect.stringMatching(/^move it away to start the conversation afresh: mv /) },
    ]);
    const text = (await s.must('theclaw', ['status'])).stdout;
    expect(text).toContain(`DAMAGED thread threads/peers/telegram.main.${DAMAGED} is damaged: ${file}`);

    const doctor = await s.run('theclaw', ['doctor', '--offline', '--json']);
    expect(doctor.code).toBe(1);
    const threads = (JSON.parse(doctor.stdout) as { checks: Check[] }).checks.find((check) => check.name === 'threads');
    expect(threads).toMatchObject({ status: 'fail', detail: expect.stringContaining(file) as string, fix: admin.damaged[0]!.fix });

    // The fix works: moved away, the conversation starts afresh.
    const [, from, to] = /^move it away to start the conversation afresh: mv (".*") (".*")$/.exec(admin.damaged[0]!.fix)!;
    renameSync(JSON.parse(from!) as string, JSON.parse(to!) as string);
    s.telegram.queueUpdate(textUpdate({ from: DAMAGED, text: 'hello again' }));
    await until(() => sentTo(s, DAMAGED)[1]?.text === 'reply to: hello again', 'the answer in the fresh conversation, whole (not its draft)');
    expect(sentTo(s, DAMAGED)[1]!.text).toBe('reply to: hello again');
  }, 120_000);
});
