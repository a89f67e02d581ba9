import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatAddress } from '../../core/address.js';
import { parseMessageContent } from '../../core/message.js';
import { createLogger } from '../../core/logger.js';
import { createTestHome, runTool, startFakeOpenAI, threadEvents, writeFakePaiConfig, type FakeLlmServer, type LooseJson, type TestHome } from '../../testing/index.js';
import { lastUserText } from '../../e2e/support.js';
import { openThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { ModelOutage } from './failure.js';
import { initAgent } from '../lifecycle.js';
import { noteOutage, readOutage } from './outage.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';

// `agent run` when the model fails, against a loopback server speaking the OpenAI wire protocol:
// what waits, what is told, what the run reports (see failure.ts and outage.ts).

let t: TestHome;
let dir: AgentDir;
let server: FakeLlmServer;
/** What the model answers with an HTTP error: messages, or every message of a sender (`alice`). */
const failing = new Map<string, number>();

const telegram = (peer: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: peer, peerId: peer });
const send = (text: string, peer: string) => sendToAgent(t.home, 'helper', { text, source: telegram(peer) });
const run = () => runAgent('helper', { home: t.home, env: t.env });
const selfMessages = (peer: string) =>
  threadEvents(t.home, routeMessage(dir, 'per-peer', telegram(peer)).path, "type = 'message' AND source = 'self'").map((event) => parseMessageContent(event.content));
function inboxConsumer() {
  const inbox = openThread(dir.inbox, { home: t.home });
  try {
    return inbox.consumer('inbox');
  } finally {
    inbox.close();
  }
}

function setNotices(notices: Record<string, unknown>): void {
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, unknown>;
  writeFileSync(dir.config, stringify({ ...config, notices }));
}

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  failing.clear();
  // Messages are named after their sender (`alice-1`), so the model can fail for one sender only.
  server = await startFakeOpenAI({
    defaultStep: (request) => {
      const text = lastUserText(request);
      const status = failing.get(text) ?? failing.get(text.split('-')[0]!);
      return status ? { kind: 'error', status } : { kind: 'text', text: `answer to ${text}` };
    },
  });
  writeFakePaiConfig(t.home, server);
});

afterEach(async () => {
  await server.close();
  t.cleanup();
});

describe('agent run when the model is unavailable', () => {
  it('leaves the message and the later ones of its conversation waiting, answers the other conversations, fails, and answers once the model is back', async () => {
    failing.set('alice', 503);
    await send('alice-1', 'alice');
    await send('bob-1', 'bob');
    await send('alice-2', 'alice');

    // The real process: notifier sees exit 1 and retries with backoff.
    const failed = await runTool('agent', ['run', 'helper'], t.env);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(
      /^Error: the model is unavailable: http:\/\/127\.0\.0\.1:\d+\/v1 failed \(HTTP 503\) after 3 attempts: .* - the message waits and is answered once the model is back \(notifier retries with backoff\); theclaw retry tries now\n$/,
    );
    expect(selfMessages('bob').map((m) => m.text)).toEqual(['answer to bob-1']);
    expect(selfMessages('alice')).toEqual([]); // no outcome, no notice before the delay
    expect(threadEvents(t.home, routeMessage(dir, 'per-peer', telegram('alice')).path, "subtype = 'error'")).toEqual([]);
    expect(lastUserTexts()).toEqual(['alice-1', 'alice-1', 'alice-1', 'bob-1']); // retried as the agent config says; alice-2 waits behind alice-1
    expect(inboxConsumer()).toMatchObject({ progress: 0, pending: 3 });
    expect(readOutage(dir)).toMatchObject({ kind: 'server', status: 503, error: expect.stringContaining('HTTP 503') });
    expect(readFileSync(dir.log, 'utf8')).toMatch(/\[ERROR\] run: inbox event 1 waits, with the later messages of its conversation: the model is unavailable: /);
    const since = readOutage(dir)!.since;

    await expect(run()).rejects.toBeInstanceOf(ModelOutage);
    expect(readOutage(dir)!.since).toBe(since); // the same outage, noted again

    failing.clear();
    await run();
    expect(selfMessages('alice').map((m) => m.text)).toEqual(['answer to alice-1', 'answer to alice-2']);
    expect(selfMessages('bob').map((m) => m.text)).toEqual(['answer to bob-1']); // not answered twice
    expect(existsSync(dir.outage)).toBe(false);
    expect(readFileSync(dir.log, 'utf8')).toContain('run: the model answers again');
    expect(await run()).toEqual({ handled: 0, replied: 0, errors: 0 });
  });

  it('tells the person once that the answer is delayed, and keeps notices out of what the model sees', async () => {
    setNotices({ delayed_after_seconds: 0, delayed: 'Delayed: {reason}.', error: 'Failed: {reason}.' });
    failing.set('alice', 503);
    await send('alice-1', 'alice');
    for (let i = 0; i < 2; i++) await expect(run()).rejects.toBeInstanceOf(ModelOutage);
    expect(selfMessages('alice')).toEqual([
      { text: 'Delayed: the model is failing (503).', attachments: [], reply_context: expect.objectContaining({ peer_id: 'alice' }), in_reply_to: 1, notice: 'delayed' },
    ]);

    failing.clear();
    failing.set('alice-2', 401);
    await send('alice-2', 'alice');
    await send('alice-3', 'alice');
    expect(await run()).toEqual({ handled: 3, replied: 2, errors: 1 });
    expect(selfMessages('alice').map((m) => [m.notice ?? 'answer', m.text])).toEqual([
      ['delayed', 'Delayed: the model is failing (503).'],
      ['answer', 'answer to alice-1'],
      ['error', 'Failed: the model refused the request (401).'],
      ['answer', 'answer to alice-3'],
    ]);
    // The last request had the whole conversation but the notices.
    const seen = (server.requests.at(-1)!.body.messages as LooseJson[]).map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');
    expect(seen).toContain('answer to alice-1');
    expect(seen).not.toContain('Delayed:');
    expect(seen).not.toContain('Failed:');
  });
});

describe('noteOutage', () => {
  it('keeps the first time of an outage, and forgets it only after a run that did not fail', () => {
    const logger = createLogger(dir.log);
    const outage = new ModelOutage({ class: 'outage', kind: 'network', status: null, reason: 'the model cannot be reached' }, 'cannot reach http://x');
    noteOutage(dir, { outage, failed: true }, logger, new Date('2026-01-01T00:00:00Z'));
    noteOutage(dir, { outage, failed: true }, logger, new Date('2026-01-01T00:05:00Z'));
    expect(readOutage(dir)).toEqual({
      since: '2026-01-01T00:00:00.000Z',
      last_at: '2026-01-01T00:05:00.000Z',
      kind: 'network',
      status: null,
      error: 'the model is unavailable: cannot reach http://x',
    });
    noteOutage(dir, { failed: true }, logger); // a full disk says nothing of the model
    expect(readOutage(dir)).not.toBeNull();
    noteOutage(dir, { failed: false }, logger);
    expect(readOutage(dir)).toBeNull();
  });
});

function lastUserTexts(): string[] {
  return server.requests.map((request) => lastUserText(request)).sort();
}
