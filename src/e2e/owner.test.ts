import { afterEach, describe, expect, it } from 'vitest';
import type { LooseJson, RecordedRequest } from '../testing/fake-llm.js';
import { openWebchatPage, startSystem, until, type System } from './support.js';

/**
 * The owner is a person, not a channel type, through the whole system: the owner's web chat
 * (`webchat:main`, open, as `theclaw up` writes it) and a guest web chat beside it (the README's
 * `webchat:guests`, under pairing), both routed to admin under the default policy.
 */
let system: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

const offered = (request: RecordedRequest) => Array.isArray(request.body.tools) && request.body.tools.length > 0;

describe('who is the owner, end to end', () => {
  it("answers a guest of the README's guest web chat, once paired, without commands, and the owner's web chat with them", async () => {
    const s = await startSystem({ policy: '{ rules: [] }', extraChannels: ['{ id: webchat:guests, type: webchat, host: 127.0.0.1, port: 0, access: pairing }'] });
    system = s;
    const owner = await openWebchatPage(s);
    const guest = await openWebchatPage(s, 'webchat:guests');
    try {
      const asked = (text: string) => s.llm.requests.find((request) => request.path === '/v1/chat/completions' && JSON.stringify(request.body.messages).includes(text));
      const agentSaid = (page: { received: LooseJson[] }) => page.received.some((m) => m.type === 'message' && m.message.role === 'agent');

      guest.ws.send(JSON.stringify({ type: 'message', id: 'g-1', text: 'hello from a guest' }));
      const notice = await until(() => guest.received.find((m) => m.type === 'message' && m.message.role === 'system')?.message.text as string | undefined, 'the pairing code', 20_000);
      const code = /xgw pair approve ([A-Z0-9]+)/.exec(notice)![1]!;
      await s.must('xgw', ['pair', 'approve', code]);
      owner.ws.send(JSON.stringify({ type: 'message', id: 'o-1', text: 'hello from the owner' }));

      const fromGuest = await until(() => asked('hello from a guest'), "the guest's turn", 30_000);
      const fromOwner = await until(() => asked('hello from the owner'), "the owner's turn", 30_000);
      await until(() => agentSaid(guest) && agentSaid(owner), 'both answers', 30_000);
      expect(offered(fromOwner)).toBe(true);
      expect(offered(fromGuest)).toBe(false);
      expect(JSON.stringify(fromGuest.body.messages)).toContain("- commands: none in this conversation (the owner's policy)");
    } finally {
      owner.ws.close();
      guest.ws.close();
    }
  });
});
