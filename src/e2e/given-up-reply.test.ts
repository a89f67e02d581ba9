import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResentReply } from '../agent/delivery/resend.js';
import { parseMessageContent } from '../core/message.js';
import type { FakeStep } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { agentStatus, lastUserText, openWebchatPage, peerThread, startSystem, telegramThread, until, type System } from './support.js';

/**
 * A reply delivery gave up on (`deliver.max_attempts`: Telegram refused it three times) is told
 * to the owner by the maintainer's sweep, once, while xgw is kept down (the report waits for xgw
 * like any answer); `theclaw retry` fails to send it while xgw is down and keeps it, and sends it
 * once xgw is back — once, however often it is run.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const echo: FakeStep = (request) => ({ kind: 'text', text: `echo: ${lastUserText(request)}` });

const retry = async (s: System) => (JSON.parse((await s.must('theclaw', ['retry', '--json'])).stdout) as { resent: ResentReply[] }).resent;

describe('a reply delivery gave up on', () => {
  it('is reported to the owner once by the sweep while xgw is down, and theclaw retry sends it once xgw is back', { timeout: 180_000 }, async () => {
    // No draft: it would take one of the refusals, which are counted for the reply.
    const s = await startSystem({ llm: { defaultStep: echo }, telegramStream: false });
    system = s;
    const { ws, received, peer } = await openWebchatPage(s);
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'hello-1', text: 'hello' })); // the owner's direct chat with admin
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'echo: hello'), 'the echo', 20_000);
    } finally {
      ws.close();
    }

    for (let i = 0; i < 3; i++) s.telegram.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
    s.telegram.queueUpdate(textUpdate({ from: 902, text: 'blocked for now' }));
    const log = join(s.home, 'agents', 'admin', 'logs', 'agent.log');
    await until(() => /gave up on event/.test(readFileSync(log, 'utf8')), 'the refused reply given up', 30_000);
    const reply = s.events(telegramThread(s.home, 902)).find((e) => e.type === 'message' && e.source === 'self')!;

    // xgw is kept down from here on: the sweep reports all the same, and the report waits for it.
    await s.must('xgw', ['stop']);
    expect((await s.must('theclaw', ['maintain'])).stdout).toMatch(/^read 1 error\(s\); reported 1 new incident\(s\)/);
    expect((await s.must('theclaw', ['maintain'])).stdout).toMatch(/^read 0 error\(s\)/);
    const ownerThread = peerThread(s.home, 'webchat', peer);
    const reports = () => s.events(ownerThread).filter((e) => e.type === 'message' && e.source === 'self' && parseMessageContent(e.content).text.startsWith('maintainer:'));
    expect(reports().map((e) => [parseMessageContent(e.content).notice, parseMessageContent(e.content).text])).toEqual([
      [
        'error',
        expect.stringMatching(
          /^maintainer: admin could not deliver a reply \(conversation peer-telegram\.main\.902\): the reply was not delivered after 3 attempt\(s\) \(the channel answered 403\)\. To send it again once the channel takes it, run: theclaw retry\./,
        ),
      ],
    ]);

    // A retry while xgw is down keeps the reply for the next one.
    expect(await retry(s)).toEqual([{ agent: 'admin', thread: 'agents/admin/threads/peers/telegram.main.902', event_id: reply.id, outcome: 'failed', error: 'xgw is not running' }]);

    await s.must('xgw', ['start']);
    await until(async () => (await agentStatus(s)).undelivered === 0, 'the report delivered to the web chat', 20_000);
    expect(await retry(s)).toEqual([{ agent: 'admin', thread: 'agents/admin/threads/peers/telegram.main.902', event_id: reply.id, outcome: 'sent' }]);
    expect(await retry(s)).toEqual([]);
    expect(s.telegram.sent.filter((sent) => Number(sent.chat_id) === 902).map((sent) => sent.text)).toEqual(['echo: blocked for now']);
    expect(reports()).toHaveLength(1);
  });
});
