import { afterAll, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../core/message.js';
import { echoToolStep, lastUserText, peerThread, settle, startSystem, until, type System } from './support.js';

/**
 * The Slack channel end to end: a direct message on the fake Slack's Socket Mode goes through the
 * real xgw, notifier, agent run and pai (the fake model), and the agent's answer comes back
 * through the Web API into the message's thread: "is thinking…" while the turn runs, the answer
 * streamed into one message edited at a bounded rate, once.
 */
const PERSON = 'U0E2E00001';
/** Written word by word, 250 ms apart: about 4 s, two draft intervals. */
const STREAMED = 'Here is what I found: the report is due on Friday, and the slides are ready.';

let system: System | undefined;

afterAll(async () => {
  await system?.stop();
  system = undefined;
});

describe('slack end to end', () => {
  it("answers a Slack direct message in its thread, streamed into one message edited at most every 2 s, once; the tokens stay out of the model's commands", { timeout: 90_000 }, async () => {
    system = await startSystem({
      slack: true,
      logLevel: 'info',
      llm: { defaultStep: (request) => (lastUserText(request) === 'what is new?' ? { kind: 'text', text: STREAMED, streamMs: 250 } : echoToolStep) },
    });
    const slack = system.slack!;
    expect((await system.xgwStatus()).channels).toContainEqual(expect.objectContaining({ id: 'slack:main', state: 'running' }));

    const message = slack.queueMessage({ from: PERSON, text: 'what is new?' });
    const finalText = (index: number) => slack.posted[index]?.edits.at(-1)?.text ?? slack.posted[index]?.text;
    await until(() => finalText(0) === STREAMED, 'the whole answer on Slack', 60_000);
    await settle(system);
    const [answer, ...more] = slack.posted;
    expect(more).toEqual([]); // the draft became the answer
    expect(answer).toMatchObject({ channel: slack.dmChannel(PERSON), thread_ts: message.ts });
    expect(answer!.deleted).toBeUndefined();
    // It showed the answer growing, each edit a longer start of it, at a bounded rate (the answer's own may follow sooner).
    const texts = [answer!.text, ...answer!.edits.map((edit) => edit.text)];
    console.log(`slack streaming: ${answer!.edits.length} edits at ${answer!.edits.map((edit) => edit.at - answer!.at).join(', ')} ms`);
    expect(texts.length).toBeGreaterThanOrEqual(2);
    expect(answer!.text.length).toBeLessThan(STREAMED.length);
    for (const text of texts) expect(STREAMED.startsWith(text)).toBe(true);
    const times = [answer!.at, ...answer!.edits.slice(0, -1).map((edit) => edit.at)];
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1_900);
    // While the turn ran, the thread showed the agent at work.
    expect(slack.calls.filter((call) => call.method === 'assistant.threads.setStatus').map((call) => call.args.thread_ts)).toContain(message.ts);

    const events = system.events(peerThread(system.home, 'slack', PERSON));
    const inbound = events.filter((e) => e.type === 'message' && e.source !== 'self');
    expect(inbound.map((e) => [e.source, parseMessageContent(e.content).text])).toEqual([[`external:slack:main:dm:${PERSON}:${PERSON}`, 'what is new?']]);

    // The tokens are secrets: the model's commands run without them.
    const second = slack.queueMessage({ from: PERSON, text: '$E2E_SLACK_BOT_TOKEN$E2E_SLACK_APP_TOKEN' });
    await until(() => slack.posted.some((posted) => posted.thread_ts === second.ts && posted.text === 'reply to: $E2E_SLACK_BOT_TOKEN$E2E_SLACK_APP_TOKEN'), 'the second reply', 60_000);
    const toolcalls = system.events(peerThread(system.home, 'slack', PERSON)).filter((e) => e.subtype === 'toolcall');
    expect(toolcalls.map((e) => (JSON.parse(e.content) as { output: string }).output)).toEqual(['handled-\n']);
  });
});
