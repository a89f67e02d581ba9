import { afterAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, startSystem, until, untilAnswered, type System } from './support.js';

/**
 * A reminder the agent sets from its sandboxed shell with `notifier timer add --message`,
 * through the whole system (real bwrap, notifier, xgw; fake model and Telegram): when it fires,
 * the agent is told in the name of the conversation that asked, and the answer goes there only.
 */
const ANN = 7171;
const BOB = 7272;

let system: System | undefined;

afterAll(async () => {
  await system?.stop();
});

const model: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const text = lastUserText(request);
  if (messages.at(-1)?.role === 'tool') return { kind: 'text', text: 'I will remind you.' };
  if (text.startsWith('[A reminder I set on')) return { kind: 'text', text: `Reminder: ${text.slice(text.indexOf('] ') + 2)}` };
  // Long enough that the timer is still there to list once the answer is out on a loaded machine.
  if (text.startsWith('remind me')) return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'notifier timer add --id stretch --in 6s --message "time to stretch"' } };
  return { kind: 'text', text: `echo: ${text}` };
};

/** One system for the tests (a start is most of a test's time), started by the first. */
async function up(): Promise<System> {
  system ??= await startSystem({ logLevel: 'info', llm: { defaultStep: model } });
  return system;
}

describe('reminders an agent sets', () => {
  // First: the system has no timer yet.
  it('refuses a command timer in a turn, where it would run outside the sandbox', async () => {
    const s = await up();
    const turn = { ...s.env, THECLAW_AGENT: 'admin', THECLAW_CONVERSATION: 'peer-telegram.main.7171' };
    const result = await s.run('notifier', ['timer', 'add', '--id', 'x', '--in', '1m', '--command', 'touch /tmp/owned'], undefined, turn);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^Error: in an agent's turn a timer sends a message, not a command/);
    expect(JSON.parse((await s.must('notifier', ['timer', 'list', '--json'])).stdout)).toEqual([]);
  });

  it('sets a timer from its sandboxed shell that, when it fires, tells the agent in the asking conversation, which alone gets the answer', { timeout: 60_000 }, async () => {
    const s = await up();
    s.telegram.queueUpdate(textUpdate({ from: ANN, text: 'remind me in 6 seconds to stretch' }));
    await until(() => s.telegram.sent.some((sent) => sent.text === 'I will remind you.'), 'the agent to say it will', 30_000);
    // The turn's request for the timer is carried out as its run goes on: the answer can be out first.
    const timers = await until(async () => {
      const listed = JSON.parse((await s.must('notifier', ['timer', 'list', '--json'])).stdout) as { id: string; command: string }[];
      return listed.length > 0 && listed;
    }, 'the timer set');
    const ann = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: String(ANN), peerId: String(ANN) });
    expect(timers).toEqual([expect.objectContaining({ id: expect.stringMatching(/^r-admin-[0-9a-f]{8}-stretch$/), command: expect.stringContaining(`--source ${ann}`) })]);

    s.telegram.queueUpdate(textUpdate({ from: BOB, text: 'hello' }));
    await until(() => s.telegram.sent.some((sent) => sent.text === 'Reminder: time to stretch'), 'the reminder', 30_000);
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === BOB), "Bob's answer", 30_000);
    await untilAnswered(s); // Bob's answer sent may still be its draft
    expect(s.telegram.sent.filter((sent) => sent.text === 'Reminder: time to stretch').map((sent) => sent.chat_id)).toEqual([ANN]);
    expect(s.telegram.sent.filter((sent) => sent.chat_id === BOB).map((sent) => sent.text)).toEqual(['echo: hello']);
  });
});
