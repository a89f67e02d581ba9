import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/logger.js';
import type { ReplyContext } from '../../core/message.js';
import { createRedactor } from '../../core/secrets.js';
import { createTestHome, listenAsXgw, type TestHome, type XgwListener } from '../../testing/index.js';
import { waitFor } from '../../testing/wait.js';
import type { XgwRequest } from '../../xgw/index.js';
import { DRAFT_AFTER_MS, replyProgress, shownCommand } from './reply-progress.js';

describe('the command a person is shown while it runs', () => {
  const redact = createRedactor({ THECLAW_HOME: '/nonexistent', OPENAI_API_KEY: 'sk-live-0123456789abcdef' });

  it('has no secret in it', () => {
    expect(shownCommand('curl -H "Authorization: Bearer sk-live-0123456789abcdef" https://api.example.com', redact)).toBe('curl -H "Authorization: Bearer [redacted]" https://api.example.com');
  });

  it('is one line, cut to 80 characters without splitting one', () => {
    expect(shownCommand('cd /tmp &&\n\tls   -la\n', redact)).toBe('cd /tmp && ls -la');
    const long = `echo ${'é'.repeat(73)}🙂🙂🙂`;
    const shown = shownCommand(long, redact);
    expect(Array.from(shown)).toHaveLength(80);
    expect(shown.endsWith('🙂…')).toBe(true);
    expect(shownCommand('x'.repeat(80), redact)).toBe('x'.repeat(80));
  });
});

describe('the draft of an answer', () => {
  let t: TestHome;
  let xgw: XgwListener;
  let told: XgwRequest[];

  beforeEach(async () => {
    t = createTestHome();
    // Stands in for xgw's control socket: it takes what the turn tells it.
    xgw = await listenAsXgw(t.home);
    told = xgw.told;
  });

  afterEach(async () => {
    await xgw.close();
    t.cleanup();
  });

  const context: ReplyContext = { kind: 'external', channel_id: 'telegram:main', peer_id: '7', conversation_type: 'dm', conversation_id: '7', message_id: '70' };
  const drafts = () => told.filter((request) => request.op === 'draft').map((request) => (request as { text: string }).text);

  it('is not shown while an earlier answer of the conversation waits for delivery, and is once it went', async () => {
    let waiting = true;
    let asked = 0;
    const earlierWaiting = async () => {
      asked++;
      return waiting;
    };
    const progress = replyProgress(t.home, context, createLogger(join(t.home, 'test.log')), (text) => text, earlierWaiting);
    progress.written('Here is the answer');
    // The draft falls due DRAFT_AFTER_MS into the turn: held back then.
    await waitFor(() => asked > 0, 'the draft due', DRAFT_AFTER_MS + 5_000);

    waiting = false;
    progress.written(' to m11.');
    await waitFor(() => drafts().length > 0, 'the draft, once the earlier answer went');
    expect(drafts()).toEqual(['Here is the answer to m11.']);
    expect(told[0]).toMatchObject({ op: 'typing' });
    progress.end(true);
  });
});
