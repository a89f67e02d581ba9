import fc from 'fast-check';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClawError } from '../../core/errors.js';
import { parseMessageContent, type ReplyContext } from '../../core/message.js';
import { classify, ModelCallError } from '../../pai/index.js';
import { createTestHome, storedThread, type TestHome } from '../../testing/index.js';
import { openThread, type Thread, type ThreadEvent } from '../../thread/index.js';
import { answerFailure, classifyFailure, isNotice, ModelOutage, noticeText, type FailedMessage } from './failure.js';
import { AgentConfigSchema, type AgentConfig } from '../types.js';

// The failure policy: which failures the person is told of at once and which wait for the model,
// what the notices say, and what answerFailure stores in a real thread.

/** A ModelCallError as pai throws it, from what the HTTP request saw. */
function modelCallError(observed: { status?: number; networkCode?: string; timedOut?: boolean; aborted?: boolean }, message = 'provider text'): ModelCallError {
  const modelError = classify({
    observation: { status: observed.status ?? null, networkCode: observed.networkCode ?? null, retryAfterMs: null, errorBody: null },
    aborted: observed.aborted ?? false,
    timedOut: observed.timedOut ?? false,
    message,
  });
  return new ModelCallError(modelError, { provider: 'fake', baseUrl: 'http://127.0.0.1:1/v1', apiKeyEnv: 'FAKE_KEY', attempts: 3 });
}

describe('classifyFailure', () => {
  it('tells the person at once of what waiting cannot fix, and lets outages wait', () => {
    const cases: [Parameters<typeof modelCallError>[0], string, string][] = [
      [{ status: 401 }, 'unrecoverable', 'the model refused the request (401)'],
      [{ status: 403 }, 'unrecoverable', 'the model refused the request (403)'],
      [{ status: 400 }, 'unrecoverable', 'the model refused the request (400)'],
      [{ status: 404 }, 'unrecoverable', 'the model was not found (404)'],
      [{}, 'unrecoverable', 'the model is not set up correctly'], // failed before any request
      [{ networkCode: 'ECONNREFUSED' }, 'outage', 'the model cannot be reached'],
      [{ status: 500 }, 'outage', 'the model is failing (500)'],
      [{ status: 503 }, 'outage', 'the model is failing (503)'],
      [{ status: 429 }, 'outage', 'the model is busy (429)'],
      [{ timedOut: true }, 'outage', 'the model did not answer in time'],
      [{ status: 408 }, 'outage', 'the model did not answer in time'],
      [{ aborted: true }, 'outage', 'the answer was interrupted'],
    ];
    for (const [observed, expectedClass, reason] of cases) {
      expect(classifyFailure(modelCallError(observed)), JSON.stringify(observed)).toMatchObject({ class: expectedClass, reason });
    }
  });

  it('treats a model that does not resolve as a broken setup and anything else as our fault, both unrecoverable', () => {
    expect(classifyFailure(new ClawError('not_found', 'unknown provider nosuch'))).toEqual({ class: 'unrecoverable', kind: 'internal', status: null, reason: 'the model is not set up correctly' });
    expect(classifyFailure(new TypeError('x is undefined'))).toEqual({ class: 'unrecoverable', kind: 'internal', status: null, reason: 'something went wrong on my side' });
    expect(classifyFailure('a string')).toMatchObject({ class: 'unrecoverable', reason: 'something went wrong on my side' });
  });

  it('never lets the provider text into the notice: the reason depends on the structure only', () => {
    const observed = fc.oneof(
      fc.record({ status: fc.integer({ min: 400, max: 599 }) }),
      fc.record({ networkCode: fc.constantFrom('ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET') }),
      fc.record({ timedOut: fc.constant(true) }),
    );
    fc.assert(
      fc.property(observed, fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (o, a, b) => {
        const first = classifyFailure(modelCallError(o, `PROVIDER-${a}`));
        expect(classifyFailure(modelCallError(o, `PROVIDER-${b}`))).toEqual(first);
        const config = AgentConfigSchema.parse({ agent_id: 'x' });
        for (const template of [config.notices.error, config.notices.delayed]) expect(noticeText(template, first)).not.toContain('PROVIDER-');
      }),
    );
  });
});

describe('noticeText', () => {
  const failure = classifyFailure(modelCallError({ status: 401 }));

  it('fills in every {reason} and {status} of the wording, and nothing else', () => {
    expect(noticeText('Sorry ({status}): {reason}. Again: {reason}. {other}', failure)).toBe('Sorry (401): the model refused the request (401). Again: the model refused the request (401). {other}');
    expect(noticeText('[{status}]', classifyFailure(modelCallError({ networkCode: 'ECONNREFUSED' })))).toBe('[]');
  });

  it('gives the defaults the issue asks for', () => {
    const config = AgentConfigSchema.parse({ agent_id: 'x' });
    expect(noticeText(config.notices.error, failure)).toBe('I could not answer: the model refused the request (401). The owner has been told.');
    expect(config.notices.delayed_after_seconds).toBe(20);
    expect(noticeText(config.notices.delayed, classifyFailure(modelCallError({ status: 503 })))).toBe('The model is not answering right now; I will answer as soon as it is back.');
  });
});

describe('answerFailure', () => {
  let t: TestHome;
  let thread: Thread;
  let inbox: Thread;
  const person: ReplyContext = { kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: '42', peer_id: '42', message_id: '7' };
  const agent: ReplyContext = { kind: 'internal', conversation_type: 'dm', conversation_id: 'c1', agent_id: 'other' };

  beforeEach(async () => {
    t = createTestHome();
    thread = openThread(join(t.home, 'conversation'), { home: t.home, create: true });
    inbox = openThread(join(t.home, 'inbox'), { home: t.home, create: true });
  });

  afterEach(async () => {
    thread.close();
    inbox.close();
    t.cleanup();
  });

  /** An inbox event and its copy in the conversation, as run.ts has them when the model fails. */
  function failedMessage(options: { replyContext?: ReplyContext | null; waitedSeconds?: number; config?: Partial<AgentConfig['notices']> } = {}): FailedMessage {
    const eventId = inbox.push({ source: 'external:telegram:main:dm:42:42', type: 'message', content: '{"text":"hi"}' });
    const event = inbox.peek({ afterId: eventId - 1, limit: 1 })[0]!;
    const inboundId = thread.push({ source: event.source, type: 'message', content: event.content });
    const config = AgentConfigSchema.parse({ agent_id: 'x', notices: options.config ?? {} });
    return {
      thread: storedThread(thread),
      config,
      event,
      inboundId,
      outcomeKey: `reply:${inboundId}`,
      replyContext: options.replyContext === undefined ? person : options.replyContext,
      redact: (text) => text.replaceAll('sk-secret', '[redacted]'),
      now: Date.parse(event.created_at) + (options.waitedSeconds ?? 0) * 1000,
    };
  }

  const selfEvents = () => thread.peek({ filter: "source = 'self'", limit: 1000 });
  const contentOf = (event: ThreadEvent) => JSON.parse(event.content) as Record<string, unknown>;

  it('stores one error notice to the person and one error record as the outcome, however often it is called', async () => {
    const message = failedMessage({ config: { error: 'No answer ({status}): {reason}.' } });
    const error = modelCallError({ status: 401 }, 'Incorrect API key provided: sk-secret');
    for (let i = 0; i < 2; i++) expect(await answerFailure(message, error)).toMatchObject({ class: 'unrecoverable', kind: 'auth' });

    const [notice, record, ...rest] = selfEvents();
    expect(rest).toEqual([]);
    expect(notice!.type).toBe('message');
    expect(parseMessageContent(notice!.content)).toEqual({
      text: 'No answer (401): the model refused the request (401).',
      attachments: [],
      reply_context: person,
      in_reply_to: message.inboundId,
      notice: 'error',
    });
    expect(isNotice(notice!)).toBe(true);
    expect(record).toMatchObject({ type: 'record', subtype: 'error' });
    expect(thread.findByKey(message.outcomeKey)).toBe(record!.id);
    expect(contentOf(record!)).toEqual({ in_reply_to: message.inboundId, stage: 'llm', error: expect.stringContaining('[redacted]'), kind: 'auth', status: 401 });
    expect(record!.content).not.toContain('sk-secret');
  });

  it('records without a notice when nobody waits for an answer', async () => {
    const message = failedMessage({ replyContext: null });
    await answerFailure(message, new ClawError('not_found', 'unknown provider nosuch'));
    expect(selfEvents().map((event) => [event.type, event.subtype])).toEqual([['record', 'error']]);
    expect(contentOf(selfEvents()[0]!)).toEqual({ in_reply_to: message.inboundId, stage: 'llm', error: 'unknown provider nosuch', kind: 'internal' });
  });

  it('leaves an outage without an outcome, and tells the person once that the answer is delayed once it has waited long enough', async () => {
    const outage = modelCallError({ status: 503 });
    const early = failedMessage({ waitedSeconds: 19 });
    await expect(answerFailure(early, outage)).rejects.toThrow(ModelOutage);
    expect(selfEvents()).toEqual([]);

    const late = { ...early, now: early.now! + 1_000 };
    for (let i = 0; i < 3; i++)
      await expect(answerFailure(late, outage)).rejects.toThrow(expect.objectContaining({ kind: 'upstream', failure: expect.objectContaining({ class: 'outage', status: 503 }) }));
    const [notice, ...rest] = selfEvents();
    expect(rest).toEqual([]);
    expect(parseMessageContent(notice!.content)).toEqual({
      text: 'The model is not answering right now; I will answer as soon as it is back.',
      attachments: [],
      reply_context: person,
      in_reply_to: early.inboundId,
      notice: 'delayed',
    });
    expect(thread.findByKey(early.outcomeKey)).toBeUndefined();
  });

  it('honours the configured delay, and sends no delayed notice to an agent (it gets the answer later anyway)', async () => {
    const quick = failedMessage({ waitedSeconds: 2, config: { delayed_after_seconds: 2, delayed: 'Later: {reason}' } });
    await expect(answerFailure(quick, modelCallError({ networkCode: 'ECONNREFUSED' }))).rejects.toThrow(ModelOutage);
    expect(selfEvents().map((event) => parseMessageContent(event.content).text)).toEqual(['Later: the model cannot be reached']);

    const asked = failedMessage({ waitedSeconds: 500, replyContext: agent });
    await expect(answerFailure(asked, modelCallError({ status: 500 }))).rejects.toThrow(ModelOutage);
    expect(selfEvents()).toHaveLength(1);
  });

  it('tells a notice from an answer', async () => {
    const message = failedMessage();
    await answerFailure(message, modelCallError({ status: 400 }));
    const answer = thread.push({ source: 'self', type: 'message', content: JSON.stringify({ text: 'an answer', attachments: [] }) });
    expect(selfEvents().map((event) => [event.id === answer, isNotice(event)])).toEqual([
      [false, true],
      [false, false], // the record
      [true, false],
    ]);
    expect(isNotice({ ...selfEvents()[0]!, source: 'external:telegram:main:dm:42:42' })).toBe(false);
  });
});
