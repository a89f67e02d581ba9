import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStep } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { lastUserText, openWebchatPage, startSystem, until, type System } from './support.js';

/**
 * The maintainer through the whole system (real notifier, xgw, agent; fake model and Telegram):
 * a Telegram peer's message that the model refuses (401) reaches the owner's web chat as one
 * report, with what to do, within one sweep; a second 401 of the same incident does not.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

// The model refuses the key for Telegram's messages; the owner's web chat is answered.
const model: FakeStep = (request) => (lastUserText(request).startsWith('from telegram') ? { kind: 'error', status: 401 } : { kind: 'text', text: `echo: ${lastUserText(request)}` });

describe('the maintainer', () => {
  it("reports an injected 401 to the owner's web chat within one sweep, once per incident", { timeout: 60_000 }, async () => {
    const s = await startSystem({ logLevel: 'info', llm: { defaultStep: model } });
    system = s;
    const { ws, received } = await openWebchatPage(s);
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'hello-1', text: 'hello' })); // the owner's direct chat with admin
      await until(() => received.some((m) => m.type === 'message' && m.message.text === 'echo: hello'), 'the echo', 20_000);

      s.telegram.queueUpdate(textUpdate({ from: 8181, text: 'from telegram, one' }));
      await until(() => s.telegram.sent.length === 1, 'the error notice to the peer', 20_000);
      expect((await s.must('theclaw', ['maintain'])).stdout).toMatch(/^read 1 error\(s\); reported 1 new incident\(s\)/);
      const report = await until(() => received.find((m) => m.type === 'message' && String(m.message.text).startsWith('maintainer:'))?.message, 'the report', 20_000);
      expect(report.notice).toBe('error');
      expect(report.text).toMatch(/^maintainer: admin could not answer a message \(conversation peer-telegram\.main\.8181\): the model refused the request \(401\)\. Check the provider key/);
      expect(report.text).toContain('theclaw doctor');

      s.telegram.queueUpdate(textUpdate({ from: 8181, text: 'from telegram, two' }));
      await until(() => s.telegram.sent.length === 2, 'the second error notice', 20_000);
      expect((await s.must('theclaw', ['maintain'])).stdout).toMatch(/^read 1 error\(s\); no new incident/);
      expect(received.filter((m) => m.type === 'message' && String(m.message.text).startsWith('maintainer:'))).toHaveLength(1);
    } finally {
      ws.close();
    }
  });
});
