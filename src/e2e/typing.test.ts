import { afterEach, describe, expect, it } from 'vitest';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, startSystem, until, type System } from './support.js';

/**
 * "typing…" on Telegram while a turn runs, through the whole system (real notifier, runners and
 * xgw; fake model and Telegram): the agent's run tells xgw every few seconds, xgw sends the chat
 * action, Telegram shows it for 5 s each time, so the person sees it for the whole turn.
 */
const PEER = 4242;
const OTHER = 4343;
const SLOW_MS = 9_000;

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

describe('typing while the agent works', () => {
  it('shows typing in the chat every at most 5 s from the start of a 9 s turn to its answer, and only in that chat', { timeout: 60_000 }, async () => {
    const s = await startSystem({
      logLevel: 'info',
      llm: { defaultStep: (request) => (lastUserText(request) === 'think hard' ? { kind: 'text', text: 'thought', delayMs: SLOW_MS } : { kind: 'text', text: 'quick' }) },
    });
    system = s;
    const typing = (chat: number) => s.telegram.calls.filter((call) => call.method === 'sendChatAction' && Number(call.params.chat_id) === chat);

    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'think hard' }));
    const asked = Date.now();
    await until(() => s.telegram.sent.some((sent) => sent.text === 'thought'), 'the slow answer', 40_000);
    const answered = s.telegram.sent.find((sent) => sent.text === 'thought')!.at;
    const shown = typing(PEER);
    expect(shown.every((call) => call.params.action === 'typing')).toBe(true);
    const times = [asked, ...shown.map((call) => call.at), answered];
    const gaps = times.slice(1).map((at, index) => at - times[index]!);
    console.log(`typing: ${shown.length} chat actions in a ${answered - asked} ms turn; gaps ${gaps.join(', ')} ms`);
    expect(shown.length).toBeGreaterThanOrEqual(2);
    // The person never goes 5 s (Telegram's own expiry of the action) without it until the answer comes.
    expect(Math.max(...gaps.slice(1))).toBeLessThanOrEqual(5_000);
    expect(gaps[0]).toBeLessThan(3_000); // from the message to the first action: the run starting

    s.telegram.queueUpdate(textUpdate({ from: OTHER, text: 'hello' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === OTHER), 'the other answer', 20_000);
    expect(typing(OTHER).length).toBeLessThanOrEqual(1); // a quick turn: at most the first action
    expect(typing(PEER)).toHaveLength(shown.length); // and nothing more in the first chat
  });
});
