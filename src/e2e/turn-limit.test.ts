import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { sendToAgent } from '../agent/send.js';
import type { FakeStep } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, settle, startSystem, telegramThread, until, type System } from './support.js';

/**
 * The turn limit through the whole system (real notifier, warm runners, xgw; fake model and
 * Telegram): a turn stuck in `sleep 600` is ended by the agent itself, its command is killed, the
 * person is told, and the 60 messages queued behind it in the same conversation are all answered.
 */
const PEER = 7373;
const TIMEOUT_NOTICE = 'I could not answer: the answer took longer than the turn limit (2 s). The owner has been told.';
const BEHIND = 60;

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

describe('the turn limit, end to end', () => {
  it('ends a turn stuck in `sleep 600` within the limit, kills the command, tells the person, and answers the 60 messages behind it', { timeout: 120_000 }, async () => {
    let pidFile = '';
    const model: FakeStep = (request) =>
      lastUserText(request) === 'stuck'
        ? { kind: 'tool_call', name: 'bash_exec', arguments: { command: `echo $$ > ${pidFile}; exec sleep 600` } }
        : { kind: 'text', text: `answer to: ${lastUserText(request)}` };
    // `none`: the test follows the command's host pid (a sandbox has its own pids).
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model }, sandbox: 'none' });
    system = s;
    pidFile = join(s.home, 'sleep.pid');
    const config = join(s.home, 'agents', 'admin', 'config.yaml');
    writeFileSync(config, stringify({ ...(parse(readFileSync(config, 'utf8')) as object), turn: { timeout_seconds: 2, max_attempts: 3 } }));

    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'stuck' }));
    await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 'the sleep to start', 20_000);
    const sleepStarted = Date.now();
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // Behind it in the same conversation (straight into the inbox: xgw's rate limit is 60 a minute).
    const source = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: String(PEER), peerId: String(PEER) });
    for (let n = 1; n <= BEHIND; n++) await sendToAgent(s.home, 'admin', { text: `message ${n}`, source });

    await until(() => !existsSync(`/proc/${pid}`), 'the sleep to be killed', 10_000, 50);
    const killedAfter = Date.now() - sleepStarted;
    await until(() => s.telegram.sent.length >= 1 + BEHIND, 'the notice and every answer', 90_000);
    await settle(s);
    console.log(`turn limit: sleep killed ${killedAfter} ms after it started (limit 2 s); ${s.telegram.sent.length} messages sent`);
    expect(killedAfter).toBeLessThan(4_000);

    expect(s.telegram.sent.map((sent) => [sent.chat_id, sent.text])).toEqual([[PEER, TIMEOUT_NOTICE], ...Array.from({ length: BEHIND }, (_, index) => [PEER, `answer to: message ${index + 1}`])]);
    const events = s.events(telegramThread(s.home, PEER));
    const [stuck] = events.filter((event) => event.type === 'message' && event.source !== 'self');
    expect(events.filter((event) => event.subtype === 'error').map((event) => JSON.parse(event.content))).toEqual([
      { in_reply_to: stuck!.id, stage: 'turn', error: 'the answer took longer than the turn limit (2 s)', kind: 'timeout' },
    ]);
    const commands = events.filter((event) => event.subtype === 'toolcall').map((event) => JSON.parse(event.content));
    expect(commands).toEqual([expect.objectContaining({ in_reply_to: stuck!.id, exit_code: 124, output: expect.stringContaining('aborted; the command and its children were killed') })]);
    // Not retried: one model call for the stuck message, one for each of the others.
    expect(s.llm.requests.filter((request) => lastUserText(request) === 'stuck')).toHaveLength(1);
    const outcomes = events.filter((event) => event.source === 'self' && event.type === 'message').map((event) => parseMessageContent(event.content).in_reply_to);
    expect(outcomes).toEqual(events.filter((event) => event.type === 'message' && event.source !== 'self').map((event) => event.id));
  });
});
