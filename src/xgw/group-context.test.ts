import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../core/logger.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, startedInbox, threadEvents, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import { agentInboxPath } from '../core/layout.js';
import { Gateway } from './gateway.js';
import { GatewayState } from './state.js';
import { XgwConfigSchema, type InboundMessage } from './types.js';

// A group's pending context (group-context.ts) through the gateway, with xgw's real state.db and a
// real inbox: what is said in a group without addressing the bot is kept, never pushed, and goes
// once into the inbox event of the next message that addresses the bot there — across a crash at
// any point between the claim, the push and the removal.

let t: TestHome;
let state: GatewayState;

beforeEach(() => {
  t = createTestHome();
  state = new GatewayState(t.home);
  startedInbox(t.home);
});

afterEach(() => {
  state.close();
  t.cleanup();
});

function gatewayWith(groups?: unknown): Gateway {
  const config = XgwConfigSchema.parse({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'open', ...(groups ? { groups } : {}) }], routes: [{ agent: 'admin' }] });
  return new Gateway({ home: t.home, config, state, logger: createLogger(join(t.home, 'logs', 'xgw.log')) });
}

let nextId = 0;
function said(text: string, { group = '-100', peer = '7', addressed = false } = {}): InboundMessage {
  nextId += 1;
  const where = group === 'dm' ? { conversationType: 'dm', conversationId: peer } : { conversationType: 'group', conversationId: group, addressed };
  return { channelId: 'telegram:main', ...where, peerId: peer, peerName: `P${peer}`, messageId: String(nextId), text };
}

/** The texts of the group context each inbox message came with. */
function contexts(): Array<[string, string[]]> {
  return threadEvents(t.home, agentInboxPath(t.home, 'admin')).map((event) => {
    const content = parseMessageContent(event.content);
    return [content.text, (content.group_context ?? []).map((entry) => `${entry.name}: ${entry.text}`)];
  });
}

describe('a group’s pending context', () => {
  it('keeps what is said without addressing the bot and hands it once to the next message that does, in its group only', async () => {
    const gateway = gatewayWith();
    expect(await gateway.receive(said('lunch at noon?', { peer: '7' }))).toEqual({ kind: 'kept' });
    expect(await gateway.receive(said('noon works', { peer: '8' }))).toEqual({ kind: 'kept' });
    await gateway.receive(said('in the other group', { group: '-200' }));
    expect(contexts()).toEqual([]);

    await gateway.receive(said('a direct message', { group: 'dm' }));
    await gateway.receive(said('what did we decide?', { addressed: true }));
    await gateway.receive(said('and now?', { addressed: true }));
    await gateway.receive(said('here?', { group: '-200', addressed: true }));
    expect(contexts()).toEqual([
      ['a direct message', []],
      ['what did we decide?', ['P7: lunch at noon?', 'P8: noon works']],
      ['and now?', []],
      ['here?', ['P7: in the other group']],
    ]);
  });

  it('keeps the last `messages` within `minutes`, none with messages: 0, and answers every message where no mention is required', async () => {
    const bounded = gatewayWith({ context: { messages: 2, minutes: 60 } });
    state.groupContext.keep(said('long ago'), { messages: 2, minutes: 60 }, Date.now() - 61 * 60_000);
    await bounded.receive(said('lately'));
    await bounded.receive(said('@bot?', { addressed: true }));
    for (const text of ['one', 'two', 'three']) await bounded.receive(said(text));
    await bounded.receive(said('@bot, again?', { addressed: true }));
    expect(contexts()).toEqual([
      ['@bot?', ['P7: lately']],
      ['@bot, again?', ['P7: two', 'P7: three']],
    ]);

    const off = gatewayWith({ context: { messages: 0 } });
    expect(await off.receive(said('not kept'))).toEqual({ kind: 'kept' });
    await off.receive(said('anything?', { addressed: true }));
    expect(contexts().at(-1)).toEqual(['anything?', []]);

    const every = gatewayWith({ require_mention: false });
    expect(await every.receive(said('to everyone'))).toMatchObject({ kind: 'accepted' });
    expect(contexts().at(-1)).toEqual(['to everyone', []]);
  });

  it('hands the context over exactly once when xgw dies between the claim, the push and the removal', async () => {
    const gateway = gatewayWith();
    const inbox = () => openThread(agentInboxPath(t.home, 'admin'), { home: t.home });
    const bounds = { messages: 20, minutes: 60 };
    const pushed = () => false;

    // Died after the claim, before the push (a platform that does not deliver again): the next mention gets the rows.
    await gateway.receive(said('before the first crash'));
    state.groupContext.claim('telegram:main', '-100', { agent: 'admin', key: 'telegram:main:-100:lost' }, bounds, pushed);
    await gateway.receive(said('first mention', { addressed: true }));

    // Died after the push, before the removal: the pushed event holds the rows, so the next mention does not.
    await gateway.receive(said('before the second crash'));
    const key = 'telegram:main:-100:pushed';
    const rows = state.groupContext.claim('telegram:main', '-100', { agent: 'admin', key }, bounds, pushed);
    const thread = inbox();
    thread.push({ source: 'external:telegram:main:group:-100:7', type: 'message', content: JSON.stringify({ text: 'pushed before dying', group_context: rows }), idempotency_key: key });
    thread.close();
    await gateway.receive(said('after it'));
    await gateway.receive(said('second mention', { addressed: true }));

    // The platform delivers a pushed message again (Telegram after a restart): a duplicate, with no rows of its own.
    const again = said('third mention', { addressed: true });
    await gateway.receive(again);
    await gateway.receive(said('between'));
    expect(await gateway.receive(again)).toMatchObject({ kind: 'accepted', duplicate: true });
    await gateway.receive(said('fourth mention', { addressed: true }));

    expect(contexts()).toEqual([
      ['first mention', ['P7: before the first crash']],
      ['pushed before dying', ['P7: before the second crash']],
      ['second mention', ['P7: after it']],
      ['third mention', []],
      ['fourth mention', ['P7: between']],
    ]);
  });
});
