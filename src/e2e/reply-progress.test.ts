import { afterAll, describe, expect, it } from 'vitest';
import { TYPING_EVERY_MS } from '../agent/delivery/reply-progress.js';
import type { FakeStep } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { TYPING_INTERVAL_MS } from '../xgw/delivery.js';
import { lastUserText, startSystem, until, type System } from './support.js';

/**
 * What a person sees on Telegram while a turn runs, through the whole system (real notifier,
 * runners and xgw; fake model and Telegram): "typing…" (the agent's run tells xgw every few
 * seconds, xgw sends the chat action, Telegram shows it for 5 s each time), and the answer as
 * the model writes it, in one message edited in place that the answer then becomes.
 */
const PEER = 4242;
const OTHER = 4343;
/** Typing actions a slow turn shows before its model answers: the first and two renewals. */
const RENEWED = 3;

let system: System | undefined;

afterAll(async () => {
  await system?.stop();
});

const STREAMED = 'Here is what I found: the report is due on Friday, the slides are ready, and the budget still needs your approval before noon.';

/** The model's answer to a question that gets neither the slow turn nor the streamed answer. */
const quick: FakeStep = { kind: 'text', text: 'quick' };

/**
 * One system for the tests (a start is most of a test's time), started by the first, its model
 * answering each test's questions; what the fakes recorded is cleared before each.
 */
async function up(step: (text: string) => FakeStep | Promise<FakeStep> | undefined): Promise<System> {
  steps.push(step);
  system ??= await startSystem({ logLevel: 'info', llm: { defaultStep: (request) => steps.map((answer) => answer(lastUserText(request))).find(Boolean) ?? quick } });
  for (const recorded of [system.telegram.sent, system.telegram.calls, system.llm.requests]) recorded.splice(0);
  return system;
}
const steps: Array<(text: string) => FakeStep | Promise<FakeStep> | undefined> = [];

describe('what the person sees while the agent works', () => {
  it('shows typing in the chat from the start of a turn to its answer, renewed while it runs, and only in that chat', { timeout: 90_000 }, async () => {
    let s: System | undefined;
    const typing = (chat: number) => s!.telegram.calls.filter((call) => call.method === 'sendChatAction' && Number(call.params.chat_id) === chat);
    // The slow turn's model answers only once the chat has shown typing RENEWED times: counted at
    // the fake Telegram, not timed, so a loaded machine cannot fail it. A turn that showed it once
    // would wait out the bound and answer with fewer.
    let shownWhileThinking = 0;
    const think = async (): Promise<FakeStep> => {
      await until(() => typing(PEER).length >= RENEWED, `${RENEWED} typing actions in one turn`, 40_000).catch(() => {});
      shownWhileThinking = typing(PEER).length;
      return { kind: 'text', text: 'thought' };
    };
    s = await up((text) => (text === 'think hard' ? think() : undefined));

    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'think hard' }));
    await until(() => s.telegram.sent.some((sent) => sent.text === 'thought'), 'the slow answer', 60_000);
    expect(shownWhileThinking).toBeGreaterThanOrEqual(RENEWED);
    const shown = typing(PEER);
    expect(shown.every((call) => call.params.action === 'typing')).toBe(true);
    console.log(`typing: ${shown.length} chat actions in the turn, ${shownWhileThinking} of them while the model was asked`);
    // The cadence: the run renews typing more often than Telegram lets it expire (5 s), and never
    // more often than xgw passes it on, so each renewal is an action (the count above).
    expect(TYPING_EVERY_MS).toBeLessThan(5_000);
    expect(TYPING_EVERY_MS).toBeGreaterThanOrEqual(TYPING_INTERVAL_MS);

    s.telegram.queueUpdate(textUpdate({ from: OTHER, text: 'hello' }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === OTHER), 'the other answer', 20_000);
    expect(typing(OTHER).length).toBeLessThanOrEqual(1); // a quick turn: at most the first action
    expect(typing(PEER)).toHaveLength(shown.length); // and nothing more in the first chat once it was answered
  });

  it('streams a slow answer into one message edited in place at most every 1.5 s, which the answer becomes: no second message', { timeout: 60_000 }, async () => {
    const s = await up((text) => (text === 'what is new?' ? { kind: 'text', text: STREAMED, streamMs: 250 } : undefined));
    const asked = s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'what is new?' })).message.message_id as number;
    await until(() => s.telegram.sent.some((sent) => sent.text === STREAMED), 'the whole answer', 40_000);

    const [message, ...more] = s.telegram.sent;
    expect(more).toEqual([]); // the draft became the answer
    expect(message).toMatchObject({ chat_id: PEER, text: STREAMED, reply_parameters: { message_id: asked } });
    expect(message!.deleted).toBeUndefined();
    // It showed the answer growing: each edit a longer start of it, the last the answer itself.
    const texts = (message!.edits ?? []).map((edit) => edit.text);
    console.log(`streaming: first draft ${JSON.stringify(firstDraft(s))}; ${texts.length} edits at ${(message!.edits ?? []).map((edit) => edit.at - message!.at).join(', ')} ms`);
    expect(texts.length).toBeGreaterThanOrEqual(2);
    expect(texts.at(-1)).toBe(STREAMED);
    for (const text of [firstDraft(s), ...texts]) expect(STREAMED.startsWith(text)).toBe(true);
    expect(firstDraft(s).length).toBeLessThan(STREAMED.length);
    // A bounded rate: the edits while it was written are at least 1.5 s apart (the answer's own may follow sooner).
    const times = [message!.at, ...(message!.edits ?? []).slice(0, -1).map((edit) => edit.at)];
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1_400);
  });
});

/** The text the streamed message was first sent with (before any edit). */
function firstDraft(s: System): string {
  const call = s.telegram.calls.find((c) => c.method === 'sendMessage');
  return String(call?.params.text ?? '');
}
