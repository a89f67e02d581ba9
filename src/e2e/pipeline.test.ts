import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { NotifierStatus } from '../notifier/types.js';
import { parseMessageContent } from '../core/message.js';
import type { FakeStep, LooseJson, RecordedRequest } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { openThread } from '../thread/thread.js';
import type { MailboxEntry } from '../xgw/state.js';
import { agentStatus, contentText, echoToolStep, lastUserText, openWebchatPage, settle, startSystem, telegramThread, until, untilAnswered, type System, type SystemOptions } from './support.js';

/**
 * The whole system end to end, as a user runs it: `agent init/start admin`, `notifier start` and
 * `xgw start` as real processes in a temp THECLAW_HOME; a fake OpenAI server as the model (one
 * bash_exec round per message, see echoToolStep) and a fake Telegram Bot API as the platform.
 * Every hop is the real one: xgw → inbox → notifier → agent run → pai → bash → thread →
 * notifier → agent deliver → xgw → platform.
 */

let system: System | undefined;
/**
 * The system of the tests that need no option of their own: started by the first of them and
 * shared by the others (a start is most of a short test's time). Each leaves it settled and
 * running, with its own peers; what the fakes recorded is cleared before the next.
 */
let shared: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

afterAll(async () => {
  await shared?.stop();
});

async function up(options?: SystemOptions): Promise<System> {
  if (options) {
    system = await startSystem({ llm: { defaultStep: echoToolStep }, ...options });
    return system;
  }
  shared ??= await startSystem({ llm: { defaultStep: echoToolStep } });
  for (const recorded of [shared.telegram.sent, shared.telegram.calls, shared.llm.requests]) recorded.splice(0);
  return shared;
}

function inboxCount(s: System): number {
  const inbox = openThread(join(s.home, 'agents', 'admin', 'inbox'), { home: s.home });
  try {
    return inbox.info().events;
  } finally {
    inbox.close();
  }
}

/** The records and messages of a peer's thread, checked for what one bash_exec round per message leaves. */
function expectThreadOfRounds(s: System, peer: number, texts: string[]): void {
  const events = s.events(telegramThread(s.home, peer));
  const inbound = events.filter((e) => e.type === 'message' && e.source !== 'self');
  const replies = events.filter((e) => e.type === 'message' && e.source === 'self');
  expect(inbound.map((e) => parseMessageContent(e.content).text)).toEqual(texts);
  expect(inbound.every((e) => e.source === `external:telegram:main:dm:${peer}:${peer}`)).toBe(true);
  expect(replies.map((e) => parseMessageContent(e.content).text)).toEqual(texts.map((text) => `reply to: ${text}`));
  expect(replies.map((e) => parseMessageContent(e.content).in_reply_to)).toEqual(inbound.map((e) => e.id));
  const toolcalls = events.filter((e) => e.subtype === 'toolcall').map((e) => JSON.parse(e.content) as { command: string; exit_code: number; output: string; in_reply_to: number });
  expect(toolcalls).toEqual(texts.map((text, i) => expect.objectContaining({ command: `echo handled-${text}`, exit_code: 0, output: `handled-${text}\n`, in_reply_to: inbound[i]!.id })));
  expect(events.filter((e) => e.subtype === 'error')).toEqual([]);
}

/** What the model got back from bash_exec, over every request. */
function toolResults(requests: RecordedRequest[]): string[] {
  return requests.flatMap((request) => {
    const last: LooseJson = request.body?.messages?.at(-1);
    return last?.role === 'tool' ? [JSON.parse(contentText(last.content)).stdout as string] : [];
  });
}

describe('the whole pipeline, end to end', () => {
  it('answers 10 interleaved Telegram messages of 3 peers: each peer gets its own replies, in order, quoting its messages, once', async () => {
    const s = await up();
    const order: [number, string][] = [
      [111, 'p111-m1'],
      [222, 'p222-m1'],
      [333, 'p333-m1'],
      [111, 'p111-m2'],
      [222, 'p222-m2'],
      [111, 'p111-m3'],
      [333, 'p333-m2'],
      [222, 'p222-m3'],
      [111, 'p111-m4'],
      [333, 'p333-m3'],
    ];
    const queued = order.map(([from, text]) => ({ from, text, messageId: s.telegram.queueUpdate(textUpdate({ from, text })).message.message_id as number }));

    await until(() => s.telegram.sent.length >= 10, '10 replies', 30_000);
    await settle(s);

    expect(s.telegram.sent).toHaveLength(10);
    expect(s.telegram.calls.filter((call) => call.method === 'sendMessage')).toHaveLength(10);
    for (const peer of [111, 222, 333]) {
      const mine = queued.filter((q) => q.from === peer);
      const got = s.telegram.sent.filter((sent) => Number(sent.chat_id) === peer);
      expect(got.map((sent) => sent.text)).toEqual(mine.map((q) => `reply to: ${q.text}`));
      expect(got.map((sent) => sent.reply_parameters?.message_id)).toEqual(mine.map((q) => q.messageId));
      expectThreadOfRounds(
        s,
        peer,
        mine.map((q) => q.text),
      );
    }
    // One bash_exec round per message: 20 model calls, and the model saw each command's output.
    expect(s.llm.requests).toHaveLength(20);
    expect(toolResults(s.llm.requests).sort()).toEqual(order.map(([, text]) => `handled-${text}\n`).sort());
    const status = await agentStatus(s);
    expect(status).toMatchObject({ started: true, pending: 0, running: false, threads: 3, undelivered: 0 });
  });

  it('answers a web chat message over the WebSocket, as the page talks to it', async () => {
    const s = await up();
    // The page's way in: it offers the URL's token and its own peer id in the handshake.
    const { ws, received, base, peer } = await openWebchatPage(s);
    expect((await fetch(`${base}/`)).status).toBe(200);
    try {
      await until(() => received.length > 0, 'the history');
      ws.send(JSON.stringify({ type: 'message', id: 'msg-1', text: 'hello web' }));
      await until(() => received.some((m) => m.type === 'message' && m.message.role === 'agent'), 'the reply', 20_000);
      await settle(s);

      // A turn that takes over a second (a busy machine) also shows the answer as it is written,
      // before it comes: a draft of it, for this message.
      const drafts = received.filter((m) => m.type === 'draft');
      for (const draft of drafts) {
        expect(draft).toMatchObject({ type: 'draft', reply_to: 'msg-1' });
        expect(draft.text).not.toBe('');
        expect('reply to: hello web'.startsWith(draft.text as string)).toBe(true);
      }
      const shown = received.filter((m) => m.type !== 'draft');
      // The run told the page that the agent works on it (the dots, also after a reload) and the
      // command it ran (the owner's web chat shows tool progress) before the answer came.
      expect(shown.map((m) => m.type)).toEqual(['history', 'ack', 'typing', 'tool_progress', 'message']);
      expect(received.at(-1)?.type).toBe('message');
      expect(shown[0]).toEqual({ type: 'history', messages: [] });
      expect(shown[1]).toEqual({ type: 'ack', id: 'msg-1', delivery: 'answering' });
      expect(shown[3]).toEqual({ type: 'tool_progress', command: 'echo handled-hello web' });
      const reply = shown[4].message as MailboxEntry;
      expect(reply).toMatchObject({ role: 'agent', text: 'reply to: hello web', reply_to: 'msg-1' });
      const thread = s.events(join(s.home, 'agents', 'admin', 'threads', 'peers', `webchat.main.${peer}`));
      expect(thread.filter((e) => e.subtype === 'toolcall').map((e) => JSON.parse(e.content).output)).toEqual(['handled-hello web\n']);
      expect(s.telegram.sent).toEqual([]);
    } finally {
      ws.close();
    }
  });

  it('pairs a new Telegram peer: a code, the approval told to the peer, and its first message answered', async () => {
    const s = await up({ telegramAccess: 'pairing' });
    const first = s.telegram.queueUpdate(textUpdate({ from: 777, text: 'hi, it is Ann' })).message.message_id as number;
    await until(() => s.telegram.sent.length >= 1, 'the pairing code');
    const code = /code: ([A-HJ-NP-Z2-9]{8})/.exec(s.telegram.sent[0]!.text)![1]!;
    expect(inboxCount(s)).toBe(0);

    const approved = await s.must('xgw', ['pair', 'approve', code]);
    expect(approved.stdout).toBe('approved 777 on telegram:main; they were told, and their first message passed on\n');
    await until(() => s.telegram.sent.length >= 3, 'the welcome and the answer', 30_000);
    await untilAnswered(s); // the answer sent may still be its draft
    expect(s.telegram.sent.slice(1).map((sent) => [sent.text, sent.reply_parameters?.message_id])).toEqual([
      ['You are approved: you can write to me now. Your first message has been passed on.', undefined],
      ['reply to: hi, it is Ann', first],
    ]);
    expect((await s.must('xgw', ['peer', 'list'])).stdout).toMatch(/^telegram:main {2}peer 777 {2}admitted \S+ via pairing\n$/);
  });

  it('keeps messages that arrive while the agent is stopped and answers each of them once after agent start', async () => {
    const s = await up();
    expect((await s.must('agent', ['stop', 'admin'])).stdout).toBe('stopped admin (its messages wait until: agent start admin)\n');
    const sentIn: [number, string][] = [
      [444, 'w1'],
      [555, 'w2'],
      [444, 'w3'],
      [444, 'w4'],
      [555, 'w5'],
    ];
    const inboxBefore = inboxCount(s);
    const queued = sentIn.map(([from, text]) => ({ from, text, messageId: s.telegram.queueUpdate(textUpdate({ from, text })).message.message_id as number }));

    await until(() => inboxCount(s) === inboxBefore + 5, 'the 5 messages in the inbox');
    // Each chat is told once that the agent is stopped; two sweeps later, still nobody has run it.
    await until(() => s.telegram.sent.length === 2, 'a notice in each chat');
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(s.llm.requests).toHaveLength(0);
    expect(s.telegram.sent.map((sent) => [sent.chat_id, sent.text])).toEqual(
      [444, 555].map((chat) => [chat, 'The agent "admin" is stopped: your message waits, and is answered once the owner starts it again (agent start admin).']),
    );
    s.telegram.sent.splice(0);
    expect(await agentStatus(s)).toMatchObject({ started: false, pending: 5 });

    await s.must('agent', ['start', 'admin']);
    await until(() => s.telegram.sent.length >= 5, '5 replies', 30_000);
    await settle(s);

    expect(s.telegram.sent).toHaveLength(5);
    for (const peer of [444, 555]) {
      const mine = queued.filter((q) => q.from === peer);
      const got = s.telegram.sent.filter((sent) => Number(sent.chat_id) === peer);
      expect(got.map((sent) => [sent.text, sent.reply_parameters?.message_id])).toEqual(mine.map((q) => [`reply to: ${q.text}`, q.messageId]));
      expectThreadOfRounds(
        s,
        peer,
        mine.map((q) => q.text),
      );
    }
    expect(s.llm.requests).toHaveLength(10);
  });

  it('delivers a reply once xgw is back, after more tries while xgw was down than deliver.max_attempts', async () => {
    // An xgw that is down is not an attempt (deliver.max_attempts is 3): the reply waits through
    // four tries (backoff 0.2 s up to 1 s) and goes out once xgw is back.
    const s = await up();
    const { update, waits, log } = await replyWhileXgwIsDown(s, 777, 4);
    expect(s.telegram.sent).toHaveLength(0);

    await s.must('xgw', ['start']);
    await until(() => s.telegram.sent.length >= 1, 'the delivery', 15_000);
    await settle(s);

    expect(s.telegram.sent).toHaveLength(1);
    expect(s.telegram.sent[0]).toMatchObject({ chat_id: 777, text: 'reply to: while-down', reply_parameters: { message_id: update.message.message_id } });
    // Each try waited without counting; a try may also meet xgw while it starts again.
    const reasons = new Set(waits().map((line) => line.replace(/^.* waits: /, '')));
    expect(reasons).toContain('xgw is not running (not counted as an attempt)');
    for (const reason of reasons) expect(reason).toMatch(/^xgw is (not running|starting or not answering) \(not counted as an attempt\)$/);
    expect(readFileSync(log, 'utf8')).not.toMatch(/failed \(attempt|gave up/);
    expectThreadOfRounds(s, 777, ['while-down']);
  });

  it('sends a reply held back by a long backoff as soon as xgw is back: xgw wakes notifier', async () => {
    // One try while xgw is down holds the reply for the whole first backoff: long, so that a slow
    // machine's xgw start still ends well before it.
    const s = await up({ backoff: { initial_seconds: 30, max_seconds: 60 } });
    await replyWhileXgwIsDown(s, 778, 1);
    const outbound = await until(async () => {
      const status = JSON.parse((await s.must('notifier', ['status', '--json'])).stdout) as NotifierStatus;
      return status.subscriptions.find((sub) => sub.consumer === 'outbound' && sub.failures > 0 && sub.retry_at);
    }, 'the failed try recorded with its backoff');
    const retryAt = Date.parse(outbound.retry_at!);
    expect(retryAt - Date.now()).toBeGreaterThan(20_000); // its backoff would hold it this long

    await s.must('xgw', ['start']);
    await until(() => s.telegram.sent.length >= 1, 'the delivery, before the backoff ends', retryAt - Date.now() - 1_000);
    expect(Date.now()).toBeLessThan(retryAt);
    await settle(s);
    expect(s.telegram.sent.map((sent) => [sent.chat_id, sent.text])).toEqual([[778, 'reply to: while-down']]);
  });
});

describe('delivery when Telegram fails', () => {
  it('waits out an outage (502s, more than deliver.max_attempts) and sends the reply once; gives up on a refusal (403) after max_attempts', async () => {
    const s = await up({ telegramStream: false });
    const log = join(s.home, 'agents', 'admin', 'logs', 'agent.log');
    const outage = { error_code: 502, description: 'Bad Gateway' };
    for (let i = 0; i < 5; i++) s.telegram.failNext('sendMessage', outage);
    s.telegram.queueUpdate(textUpdate({ from: 901, text: 'during the outage' }));
    await until(() => s.telegram.sent.length >= 1, 'the reply once Telegram is back', 30_000);
    const text = readFileSync(log, 'utf8');
    expect(text.match(/waits: Telegram refused sendMessage \(502: Bad Gateway\)/g)?.length).toBeGreaterThanOrEqual(4);
    expect(text).not.toMatch(/failed \(attempt|gave up/);

    for (let i = 0; i < 3; i++) s.telegram.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
    s.telegram.queueUpdate(textUpdate({ from: 902, text: 'from someone who blocked the bot' }));
    await until(() => /gave up on event/.test(readFileSync(log, 'utf8')), 'the refused reply given up', 30_000);
    await settle(s);
    expect(s.telegram.sent.map((sent) => [sent.chat_id, sent.text])).toEqual([[901, 'reply to: during the outage']]);
    const errors = s.events(telegramThread(s.home, 902)).filter((e) => e.subtype === 'error');
    expect(errors.map((e) => JSON.parse(e.content).error)).toEqual([
      expect.stringMatching(/^not delivered after 3 attempt\(s\): Telegram refused sendMessage \(403: Forbidden: bot was blocked by the user\)/),
    ]);
  });
});

/**
 * A Telegram message from `peer` whose reply is produced while xgw is stopped; returns once
 * `agent deliver` found xgw down `tries` times. The reply's model call waits for xgw to stop.
 */
async function replyWhileXgwIsDown(s: System, peer: number, tries: number) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const gated: FakeStep = async (request) => {
    if (request.body?.messages?.at(-1)?.role === 'tool') await gate; // the reply waits for the test
    return echoToolStep;
  };
  s.llm.enqueue(gated, gated);
  const update = s.telegram.queueUpdate(textUpdate({ from: peer, text: 'while-down' }));
  await until(() => s.llm.requests.length === 2, 'the reply call');
  expect(lastUserText(s.llm.requests[1]!)).toBe('while-down');

  await s.must('xgw', ['stop']);
  release();
  const log = join(s.home, 'agents', 'admin', 'logs', 'agent.log');
  const waits = () => readFileSync(log, 'utf8').match(/deliver: event \d+ of \S+ waits: [^\n]*/g) ?? [];
  await until(() => waits().length >= tries, `${tries} tries while xgw is down`, 20_000);
  return { update, waits, log };
}
