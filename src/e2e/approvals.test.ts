import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { LooseJson } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { BWRAP, NEEDS_BWRAP } from '../testing/index.js';
import { webchatProtocols } from '../xgw/channels/webchat-http.js';
import type { MailboxEntry } from '../xgw/state.js';
import { echoToolStep, startSystem, until, type System } from './support.js';

/**
 * An `ask` round, end to end: a Telegram peer's turn wants a command that the policy makes the
 * owner approve; the owner, in the web chat (over its WebSocket, as the page talks), gets the
 * request and answers `/approve`; the command runs and the peer gets the answer.
 */

let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

describe.skipIf(!BWRAP)(`approvals end to end (${NEEDS_BWRAP})`, () => {
  it("asks the owner in the web chat for a Telegram peer's command, runs it on /approve, and the peer gets the answer", async () => {
    const s = await startSystem({ llm: { defaultStep: echoToolStep }, policy: '{ rules: [{ channel: telegram, bash: ask }] }' });
    system = s;
    const status = await s.xgwStatus();
    const url = new URL(status.channels.find((channel) => channel.id === 'webchat:main')!.url!);
    const ws = new WebSocket(`ws://127.0.0.1:${url.port}/ws`, webchatProtocols(url.searchParams.get('token')!), { origin: `http://127.0.0.1:${url.port}` });
    const received: MailboxEntry[] = [];
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as LooseJson;
      if (message.type === 'message') received.push(message.message as MailboxEntry);
    });
    try {
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      // The owner talks to the agent in the web chat: the owner's own commands run, unasked.
      ws.send(JSON.stringify({ type: 'message', id: 'msg-1', text: 'hello' }));
      await until(() => received.some((entry) => entry.text === 'reply to: hello'), "the owner's answer", 20_000);

      s.telegram.queueUpdate(textUpdate({ from: 777, text: 'make it so' }));
      const request = await until(() => received.find((entry) => entry.notice === 'approval'), 'the approval request in the web chat', 20_000);
      const code = /\/approve ([a-z0-9]+)/.exec(request.text)![1]!;
      expect(request.text).toContain('echo handled-make it so');
      expect(s.telegram.sent).toEqual([]);

      ws.send(JSON.stringify({ type: 'message', id: 'msg-2', text: `/approve ${code}` }));
      await until(() => s.telegram.sent.some((sent) => sent.text === 'reply to: make it so'), "the peer's answer", 20_000);
      await until(() => received.some((entry) => entry.text === 'Approved: echo handled-make it so'), 'the approval confirmed to the owner', 20_000);
      const peerThread = s.events(join(s.home, 'agents', 'admin', 'threads', 'peers', 'telegram.main.777'));
      expect(peerThread.filter((event) => event.subtype === 'toolcall').map((event) => JSON.parse(event.content))).toMatchObject([
        { command: 'echo handled-make it so', exit_code: 0, output: 'handled-make it so\n' },
      ]);
    } finally {
      ws.close();
    }
  });
});
