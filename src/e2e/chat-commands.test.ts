import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../core/process.js';
import { textUpdate } from '../testing/fake-telegram.js';
import type { DecisionRecord, ToolcallRecord } from '../agent/types.js';
import { echoToolStep, lastUserText, startSystem, telegramThread, until, type System } from './support.js';

/**
 * Chat commands through the whole pipeline: Telegram → xgw → inbox → notifier → agent run, and
 * the answer back out. `/stop` reaches a turn that is running `sleep 60` in bash_exec: the running
 * `agent run` sees it in the inbox, kills the tool's process group and ends the turn; notifier
 * then starts the next run, which answers the `/stop`.
 */

let s: System;

beforeAll(async () => {
  // Groups take every message, so that a group command without a mention reaches the agent too.
  // `none`: /stop's test follows the command's host pid (a sandbox has its own pids).
  s = await startSystem({ llm: { defaultStep: echoToolStep }, telegramRequireMention: false, sandbox: 'none' });
});

afterAll(async () => {
  await s?.stop();
});

describe('chat commands end to end', () => {
  it('/stop aborts a turn running `sleep 60` in under 5 s: the sleep is killed, the turn ends, and "Stopped." reaches the chat', async () => {
    const pidFile = join(s.home, 'sleep.pid');
    s.llm.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: `sleep 60 & echo $! > ${pidFile}; wait`, comment: 'the long job' } });
    const peer = 4242;
    s.telegram.queueUpdate(textUpdate({ from: peer, text: 'run the long job' }));
    const pid = Number(await until(() => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim() : ''), 'the sleep to start', 30_000));
    expect(isAlive({ pid, start: null })).toBe(true);

    const sentBefore = s.telegram.sent.length;
    const started = Date.now();
    s.telegram.queueUpdate(textUpdate({ from: peer, text: '/stop' }));
    const stopped = await until(() => s.telegram.sent.slice(sentBefore).find((sent) => Number(sent.chat_id) === peer), 'the answer to /stop', 5_000);
    const elapsed = stopped.at - started;
    console.info(`/stop: "Stopped." reached the chat ${elapsed} ms after the /stop was sent`);
    expect(stopped.text).toBe('Stopped.');
    expect(elapsed).toBeLessThan(5_000);
    // The tool's process group was killed before the turn's outcome was written.
    expect(isAlive({ pid, start: null })).toBe(false);

    const events = s.events(telegramThread(s.home, peer));
    const [job, stop] = events.filter((event) => event.type === 'message' && event.source !== 'self');
    const decisions = events.filter((event) => event.subtype === 'decision').map((event) => JSON.parse(event.content) as DecisionRecord);
    expect(decisions).toEqual([{ in_reply_to: job!.id, decision: 'stopped', stopped_by_inbox_id: expect.any(Number) }]);
    const [toolcall] = events.filter((event) => event.subtype === 'toolcall').map((event) => JSON.parse(event.content) as ToolcallRecord);
    expect(toolcall).toMatchObject({ exit_code: 124, output: expect.stringContaining('bash_exec: aborted') });
    expect(toolcall!.duration_ms).toBeLessThan(5_000);
    const replies = events.filter((event) => event.type === 'message' && event.source === 'self');
    expect(replies.map((event) => JSON.parse(event.content).in_reply_to)).toEqual([stop!.id]);
    expect(events.filter((event) => event.subtype === 'error')).toEqual([]);
    // The model was asked once (for the job); never about the /stop.
    expect(s.llm.requests.filter((request) => lastUserText(request) === '/stop')).toEqual([]);
  });

  it('takes a group command only when it is addressed to the bot; a plain group /status goes to the model', async () => {
    const group = -100800;
    const peer = 5151;
    const inGroup = () => s.telegram.sent.filter((sent) => Number(sent.chat_id) === group);
    s.telegram.queueUpdate(textUpdate({ from: peer, chat: group, chatType: 'group', text: '/status' }));
    await until(() => inGroup().length === 1, 'the answer to the plain group /status', 20_000);
    expect(inGroup()[0]!.text).toBe('reply to: /status');

    const text = `/status@${s.telegram.bot.username}`;
    s.telegram.queueUpdate(textUpdate({ from: peer, chat: group, chatType: 'group', text, entities: [{ type: 'bot_command', offset: 0, length: text.length }] }));
    await until(() => inGroup().length === 2, 'the answer to the addressed group /status', 20_000);
    // The peer is not the owner: /status shows them the agent and their own conversation only.
    expect(inGroup()[1]!.text).toMatch(/^Agent: admin\nToday \(/);
    expect(inGroup()[1]!.text).not.toContain('Model:');
    expect(s.llm.requests.filter((request) => lastUserText(request) === '/status')).toHaveLength(2); // the plain one's tool round
  });
});
