import Database from 'better-sqlite3';
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseAddress } from '../core/address.js';
import { INBOX_CONSUMER } from '../core/layout.js';
import { createLogger } from '../core/logger.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, startedInbox, waitFor, type TestHome } from '../testing/index.js';
import { initThread, openThread } from '../thread/index.js';
import { Gateway } from './gateway.js';
import { deliveryOf, noticeFor } from './notices.js';
import { findRoute } from './route.js';
import { GatewayState, MAX_CODES_PER_PEER, PAIRING_TTL_MS, PAIRING_TTL_WHEN_FULL_MS, type PairingRequest } from './state.js';
import type { ChannelAdapter } from './channel.js';
import { XgwConfigSchema, type InboundMessage, type OutboundMessage } from './types.js';

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

function gatewayWith(config: unknown): Gateway {
  return new Gateway({ home: t.home, config: XgwConfigSchema.parse(config), state, logger: createLogger(join(t.home, 'logs', 'xgw.log')) });
}

const openChat = { channels: [{ id: 'telegram:main', type: 'telegram', access: 'open' }], routes: [{ agent: 'admin' }] };

function message(peerId: string, messageId: string, text = 'hello'): InboundMessage {
  return { channelId: 'telegram:main', conversationType: 'dm', conversationId: peerId, peerId, messageId, text };
}

function inbox() {
  const thread = openThread(join(t.home, 'agents', 'admin', 'inbox'), { home: t.home });
  try {
    return thread.peek({ limit: 1000 });
  } finally {
    thread.close();
  }
}

/** A channel that records what it is asked to send: the gateway's logic under test, not a platform. */
function recordingChannel(id: string): ChannelAdapter & { sent: OutboundMessage[] } {
  const sent: OutboundMessage[] = [];
  return {
    id,
    type: 'telegram',
    sent,
    async start() {},
    async send(outbound) {
      sent.push(outbound);
      await new Promise((resolve) => setImmediate(resolve));
      return { messageIds: [String(sent.length)] };
    },
    status: () => ({ id, type: 'telegram', state: 'running' }),
    async stop() {},
  };
}

describe('routes', () => {
  it('prefers an exact peer over *, then an exact channel over *, then the earlier route', () => {
    const routes = XgwConfigSchema.parse({
      routes: [
        { channel: '*', peer: '*', agent: 'a' },
        { channel: 'telegram:main', peer: '*', agent: 'b' },
        { channel: '*', peer: '42', agent: 'c' },
        { channel: 'telegram:main', peer: '42', agent: 'd' },
        { channel: 'telegram:main', peer: '*', agent: 'e' },
      ],
    }).routes;
    expect(findRoute(routes, 'telegram:main', '42')?.agent).toBe('d');
    expect(findRoute(routes, 'webchat:main', '42')?.agent).toBe('c');
    expect(findRoute(routes, 'telegram:main', '7')?.agent).toBe('b');
    expect(findRoute(routes, 'webchat:main', '7')?.agent).toBe('a');
    expect(findRoute([], 'webchat:main', '7')).toBeUndefined();
  });
});

describe('inbound', () => {
  it('pushes an admitted message into the routed inbox with its source address and reply context, once per platform id', async () => {
    const gateway = gatewayWith(openChat);
    const first = await gateway.receive(message('12345', '678'));
    const again = await gateway.receive(message('12345', '678'));
    expect(first).toMatchObject({ kind: 'accepted', agent: 'admin', duplicate: false });
    expect(again).toMatchObject({ kind: 'accepted', eventId: (first as { eventId: number }).eventId, duplicate: true });
    const events = inbox();
    expect(events).toHaveLength(1);
    expect(events[0]!.source).toBe('external:telegram:main:dm:12345:12345');
    expect(parseMessageContent(events[0]!.content)).toEqual({
      text: 'hello',
      attachments: [],
      reply_context: { kind: 'external', channel_id: 'telegram:main', conversation_type: 'dm', conversation_id: '12345', peer_id: '12345', message_id: '678' },
    });
  });

  it('gives an unknown peer one code under pairing, at most 3 pending per channel, and admits it on approval', async () => {
    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram' }], routes: [{ agent: 'admin' }] });
    const first = await gateway.receive(message('1', 'a'));
    expect(first).toMatchObject({ kind: 'pairing', code: expect.stringMatching(/^[A-HJ-NP-Z2-9]{8}$/) });
    expect(await gateway.receive(message('1', 'b'))).toEqual(first); // the same code while it is valid
    await gateway.receive(message('2', 'c'));
    await gateway.receive(message('3', 'd'));
    expect(await gateway.receive(message('4', 'e'))).toMatchObject({ kind: 'denied' });
    expect(inbox()).toEqual([]);
    expect(state.approvePairing((first as { code: string }).code)).toMatchObject({ peer_id: '1' });
    expect(await gateway.receive(message('1', 'f'))).toMatchObject({ kind: 'accepted' });
    expect(inbox()).toHaveLength(1);
    expect(state.approvePairing((first as { code: string }).code)).toBeNull(); // one-time
  });

  it('lets a pairing code expire after an hour, and frees its slot', () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const codes = ['1', '2', '3'].map((peer) => state.requestPairing('telegram:main', peer, undefined, t0) as PairingRequest);
    expect(codes[0]!.expires_at).toBe(new Date(t0 + PAIRING_TTL_MS).toISOString());
    expect(state.requestPairing('telegram:main', '4', undefined, t0 + PAIRING_TTL_WHEN_FULL_MS - 1)).toBe('full'); // 3 pending
    expect(state.pendingPairings(t0 + PAIRING_TTL_MS - 1)).toHaveLength(3);
    expect(state.pendingPairings(t0 + PAIRING_TTL_MS)).toEqual([]);
    expect(state.approvePairing(codes[0]!.code, t0 + PAIRING_TTL_MS)).toBeNull();
    expect(state.approvePairing(codes[1]!.code, t0 + PAIRING_TTL_MS - 1)).toMatchObject({ peer_id: '2' });
    const later = state.requestPairing('telegram:main', '4', undefined, t0 + PAIRING_TTL_MS);
    expect(later).toMatchObject({ peer_id: '4' });
    const again = state.requestPairing('telegram:main', '1', undefined, t0 + PAIRING_TTL_MS) as PairingRequest;
    expect(again.code).not.toBe(codes[0]!.code); // a new code once the old one expired
    expect(state.isAdmitted('telegram:main', '1')).toBe(false);
    expect(state.isAdmitted('telegram:main', '2')).toBe(true);
  });

  it('keeps a stranger from holding the slots: full slots give way after minutes, a peer gets few codes a day, and the owner is told', async () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    for (const peer of ['s1', 's2', 's3']) expect(state.requestPairing('telegram:main', peer, undefined, t0)).toMatchObject({ peer_id: peer });
    expect(state.requestPairing('telegram:main', 'friend', undefined, t0 + PAIRING_TTL_WHEN_FULL_MS - 1)).toBe('full');
    expect(state.requestPairing('telegram:main', 'friend', undefined, t0 + PAIRING_TTL_WHEN_FULL_MS)).toMatchObject({ peer_id: 'friend' });
    expect(state.pendingPairings(t0 + PAIRING_TTL_WHEN_FULL_MS).map((p) => p.peer_id)).toEqual(['friend']);
    // One stranger asking again and again once its code is gone: a few codes a day, then nothing.
    let at = t0 + PAIRING_TTL_WHEN_FULL_MS;
    const given: unknown[] = [];
    for (let i = 0; i < MAX_CODES_PER_PEER + 1; i++) {
      at += PAIRING_TTL_MS;
      given.push(state.requestPairing('telegram:main', 'pest', undefined, at));
    }
    expect(given.slice(0, MAX_CODES_PER_PEER).every((g) => typeof g === 'object')).toBe(true);
    expect(given.at(-1)).toBe('peer_limit');
    expect(state.requestPairing('telegram:main', 'pest', undefined, at + 24 * 60 * 60 * 1000)).toMatchObject({ peer_id: 'pest' }); // the next day

    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram' }], routes: [{ agent: 'admin' }] });
    for (const peer of ['a', 'b', 'c']) await gateway.receive(message(peer, `m-${peer}`));
    expect(await gateway.receive(message('d', 'm-d'))).toEqual({ kind: 'denied', reason: 'too many pending pairing requests' });
    const log = readFileSync(join(t.home, 'logs', 'xgw.log'), 'utf8');
    expect(log).toContain('all 3 pairing slots are taken');
  });

  it('tells an approved peer so and passes on the message it first wrote, once', async () => {
    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram' }], routes: [{ agent: 'admin' }] });
    const channel = recordingChannel('telegram:main');
    await gateway.startChannel(channel);
    const pairing = await gateway.receive(message('77', 'first', 'Hi, it is Ann. Can you help me?'));
    await gateway.receive(message('77', 'second', 'hello?')); // waits with the same code; only the first is kept
    expect(inbox()).toEqual([]);
    state.approvePairing((pairing as { code: string }).code);
    await gateway.welcomeApproved();
    await gateway.welcomeApproved();
    expect(channel.sent.map((m) => [m.peerId, m.text])).toEqual([['77', 'You are approved: you can write to me now. Your first message has been passed on.']]);
    expect(inbox().map((event) => parseMessageContent(event.content).text)).toEqual(['Hi, it is Ann. Can you help me?']);
    expect(state.pendingWelcomes()).toEqual([]);
  });

  it('refuses peers off the allowlist and admits the listed ones, even a peer approved by pairing before', async () => {
    state.admit('telegram:main', '8', 'pairing');
    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'allowlist', allow: ['9'] }], routes: [{ agent: 'admin' }] });
    expect(await gateway.receive(message('8', 'a'))).toMatchObject({ kind: 'denied' });
    const empty = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'allowlist', allow: [] }], routes: [{ agent: 'admin' }] });
    expect(await empty.receive(message('8', 'a2'))).toMatchObject({ kind: 'denied' });
    expect(await gateway.receive(message('9', 'b'))).toMatchObject({ kind: 'accepted' });
    expect(inbox().map((event) => parseAddress(event.source))).toEqual([expect.objectContaining({ peerId: '9' })]);
  });

  it('answers a route to a missing agent and a missing route without touching any inbox', async () => {
    const missing = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'open' }], routes: [{ agent: 'ghost' }] });
    expect(await missing.receive(message('1', 'a'))).toEqual({ kind: 'missing_agent', agent: 'ghost' });
    const unrouted = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'open' }], routes: [] });
    expect(await unrouted.receive(message('1', 'a'))).toEqual({ kind: 'no_route' });
    expect(inbox()).toEqual([]);
  });

  it('keeps the messages to a stopped agent in its inbox and tells each conversation once that they wait for agent start', async () => {
    // Every group message goes to the agent here (no mention required), so the chatter below reaches its inbox.
    const gateway = gatewayWith({ ...openChat, channels: [{ ...openChat.channels[0], groups: { require_mention: false } }] });
    const thread = openThread(join(t.home, 'agents', 'admin', 'inbox'), { home: t.home });
    thread.unsubscribe(INBOX_CONSUMER);
    thread.close();
    const outcome = await gateway.receive(message('1', 'a'));
    expect(outcome).toMatchObject({ kind: 'accepted', agent: 'admin', duplicate: false, agentStopped: true, notify: true });
    expect(deliveryOf(outcome)).toBe('waiting');
    expect(noticeFor(outcome)).toContain('agent start admin');
    expect(noticeFor(await gateway.receive(message('1', 'a')))).toBeNull(); // the platform delivered it twice
    const second = await gateway.receive(message('1', 'b'));
    expect([deliveryOf(second), noticeFor(second)]).toEqual(['waiting', null]); // told already
    expect(noticeFor(await gateway.receive(message('2', 'c')))).toContain('agent start admin'); // another conversation
    // A group's chatter that did not mention the bot is kept for the context, without a notice.
    const chatter = await gateway.receive({ ...message('3', 'd'), conversationType: 'group', conversationId: '-100', addressed: false });
    expect(chatter).toMatchObject({ kind: 'accepted', agentStopped: true, notify: false });
    expect(inbox().map((event) => parseMessageContent(event.content).text)).toEqual(['hello', 'hello', 'hello', 'hello']);

    const restarted = openThread(join(t.home, 'agents', 'admin', 'inbox'), { home: t.home });
    restarted.subscribe({ consumer: INBOX_CONSUMER, handler: 'true' }); // agent start
    const started = await gateway.receive(message('1', 'e'));
    expect(started).toMatchObject({ kind: 'accepted', agentStopped: false, notify: false });
    expect([deliveryOf(started), noticeFor(started)]).toEqual(['answering', null]);
    restarted.unsubscribe(INBOX_CONSUMER); // stopped again: told again
    restarted.close();
    expect(noticeFor(await gateway.receive(message('1', 'f')))).toContain('agent start admin');
  });

  it('refuses a peer past its rate limit with one notice per burst, lets other peers through, and takes the peer again once its window moved on', async () => {
    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram', access: 'open', rate_limit: { messages: 3, per_seconds: 0.5 } }], routes: [{ agent: 'admin' }] });
    const outcomes = [];
    for (let i = 1; i <= 5; i++) outcomes.push(await gateway.receive(message('7', `m${i}`)));
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted', 'accepted', 'rate_limited', 'rate_limited']);
    expect(outcomes.slice(3).map((outcome) => outcome.kind === 'rate_limited' && outcome.notify)).toEqual([true, false]);
    expect(noticeFor(outcomes[3]!)).toMatch(/faster than I can take them \(at most 3 in 0.5 s\)/);
    expect(noticeFor(outcomes[4]!)).toBeNull();
    expect((await gateway.receive(message('8', 'other'))).kind).toBe('accepted');
    expect(inbox()).toHaveLength(4);
    await waitFor(async () => (await gateway.receive(message('7', `later-${Date.now()}`))).kind === 'accepted', 'the window to move on', 5_000);
  });

  it('tells apart messages whose conversation and message ids only differ in where a colon is', async () => {
    const gateway = gatewayWith(openChat);
    const first = await gateway.receive({ ...message('1', 'c'), conversationId: 'a:b' });
    const second = await gateway.receive({ ...message('1', 'b:c'), conversationId: 'a' });
    expect([first, second]).toMatchObject([
      { kind: 'accepted', duplicate: false },
      { kind: 'accepted', duplicate: false },
    ]);
    expect(inbox()).toHaveLength(2);
  });

  it('never gives a pairing code in a group, so strangers there neither see one nor use up the slots', async () => {
    const gateway = gatewayWith({ channels: [{ id: 'telegram:main', type: 'telegram' }], routes: [{ agent: 'admin' }] });
    for (const peer of ['1', '2', '3', '4']) {
      expect(await gateway.receive({ ...message(peer, `g${peer}`), conversationType: 'group', conversationId: '-100', addressed: true })).toMatchObject({ kind: 'denied' });
    }
    expect(state.pendingPairings()).toEqual([]);
    expect(await gateway.receive(message('5', 'd'))).toMatchObject({ kind: 'pairing' });
    expect(inbox()).toEqual([]);
  });

  it('refuses an explicit agent that is not an agent id, before any path is built', async () => {
    initThread(join(t.home, 'outside', 'inbox'), { home: t.home }).close();
    const gateway = gatewayWith(openChat);
    for (const agent of ['../outside', '..', 'a/b', 'Admin', '']) {
      await expect(gateway.receive(message('1', `x-${agent}`), agent)).rejects.toMatchObject({ kind: 'usage', message: expect.stringContaining('is not an agent id') });
    }
    const outside = openThread(join(t.home, 'outside', 'inbox'), { home: t.home });
    expect(outside.peek()).toEqual([]);
    outside.close();
    expect(inbox()).toEqual([]);
  });

  it('keeps hostile peer ids inside their address segment and out of every path', async () => {
    const gateway = gatewayWith(openChat);
    const hostile = ['../x', 'a:b', '../../etc/passwd', 'a/b', 'x\u0000y', '\u0001:\u0002', '%2e%2e', ':', 'x'.repeat(300)];
    const before = filesUnder(t.home);
    for (const [index, peer] of hostile.entries()) await gateway.receive(message(peer, `m${index}`));
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).filter((s) => s.isWellFormed()),
        async (peer) => {
          await gateway.receive(message(peer, `p-${Buffer.from(peer).toString('hex')}`));
        },
      ),
      { numRuns: 100 },
    );
    for (const event of inbox()) {
      const address = parseAddress(event.source);
      expect(event.source.split(':')).toHaveLength(6);
      expect(address).toMatchObject({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm' });
      // Every segment is percent-encoded: no `/`, `:` or control character survives in it.
      for (const segment of event.source.split(':').slice(1)) expect(segment).toMatch(/^[A-Za-z0-9._~%-]+$/);
    }
    expect(
      inbox()
        .slice(0, hostile.length)
        .map((event) => (parseAddress(event.source) as { peerId: string }).peerId),
    ).toEqual(hostile);
    // Only the inbox's own files changed: no peer id became a file or directory.
    const after = filesUnder(t.home).filter((file) => !before.includes(file));
    expect(after.every((file) => file.startsWith('agents/admin/inbox/') || file.startsWith('logs/') || file.startsWith('xgw/'))).toBe(true);
  });
});

describe('outbound', () => {
  it('sends once per idempotency key, also for concurrent retries, and remembers keys across gateways', async () => {
    const gateway = gatewayWith(openChat);
    const channel = recordingChannel('telegram:main');
    await gateway.startChannel(channel);
    const request = { channel: 'telegram:main', peer: '1', idempotencyKey: 'thread#7', text: 'hi' };
    const [a, b] = await Promise.all([gateway.send(request), gateway.send(request)]);
    expect([a.status, b.status].sort()).toEqual(['delivered', 'duplicate']);
    expect(await gateway.send(request)).toEqual({ status: 'duplicate', message_ids: ['1'] });
    const restarted = gatewayWith(openChat);
    const channelAfterRestart = recordingChannel('telegram:main');
    await restarted.startChannel(channelAfterRestart);
    expect((await restarted.send(request)).status).toBe('duplicate');
    expect(channel.sent).toHaveLength(1);
    expect(channelAfterRestart.sent).toHaveLength(0);
    expect(channel.sent[0]).toEqual({ peerId: '1', conversationType: 'dm', conversationId: '1', replyTo: undefined, text: 'hi' });
  });

  it('never lets a key delivered on one channel or to one peer suppress a delivery elsewhere', async () => {
    const gateway = gatewayWith({
      channels: [
        { id: 'telegram:main', type: 'telegram', access: 'open' },
        { id: 'telegram:other', type: 'telegram', access: 'open' },
      ],
    });
    const main = recordingChannel('telegram:main');
    const other = recordingChannel('telegram:other');
    await gateway.startChannel(main);
    await gateway.startChannel(other);
    const request = { channel: 'telegram:main', peer: '1', idempotencyKey: 'thread#7', text: 'hi' };
    const results = await Promise.all([
      gateway.send(request),
      gateway.send({ ...request, channel: 'telegram:other' }),
      gateway.send({ ...request, peer: '2' }),
      gateway.send({ ...request, conversationType: 'group', conversation: '-100' }),
    ]);
    expect(results.map((result) => result.status)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect(main.sent.map((sent) => [sent.peerId, sent.conversationId])).toEqual([
      ['1', '1'],
      ['2', '2'],
      ['1', '-100'],
    ]);
    expect(other.sent).toHaveLength(1);
    expect((await gateway.send({ ...request, channel: 'telegram:other' })).status).toBe('duplicate');
  });

  it('keeps honouring keys recorded before deliveries were keyed per channel, on their own channel only', async () => {
    state.close();
    rmSync(join(t.home, 'xgw'), { recursive: true });
    mkdirSync(join(t.home, 'xgw'));
    const old = new Database(join(t.home, 'xgw', 'state.db'));
    old.exec('CREATE TABLE delivered (key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_ids TEXT NOT NULL, delivered_at TEXT NOT NULL)');
    old.prepare('INSERT INTO delivered VALUES (?, ?, ?, ?)').run('thread#7', 'telegram:main', '["55"]', new Date().toISOString());
    old.close();
    state = new GatewayState(t.home);
    const gateway = gatewayWith({ channels: [openChat.channels[0], { id: 'telegram:other', type: 'telegram', access: 'open' }] });
    const main = recordingChannel('telegram:main');
    const other = recordingChannel('telegram:other');
    await gateway.startChannel(main);
    await gateway.startChannel(other);
    const request = { channel: 'telegram:main', peer: '1', idempotencyKey: 'thread#7', text: 'hi' };
    expect(await gateway.send(request)).toEqual({ status: 'duplicate', message_ids: ['55'] });
    expect((await gateway.send({ ...request, channel: 'telegram:other' })).status).toBe('delivered');
    expect(main.sent).toHaveLength(0);
    // Opening the migrated file again changes nothing.
    state.close();
    state = new GatewayState(t.home);
    expect(state.deliveryProgress({ channelId: 'telegram:main', target: 'dm:9:9', key: 'thread#7' })).toEqual({ messageIds: ['55'], complete: true });
  });

  it('on stop, lets deliveries under way finish and write their keys down before the channels stop, and refuses new ones as unavailable', async () => {
    // A part handed to the platform must be written down: cut off, it is sent again on the retry.
    const gateway = gatewayWith(openChat);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const events: string[] = [];
    const channel: ChannelAdapter = {
      ...recordingChannel('telegram:main'),
      async send() {
        events.push('send');
        await gate;
        events.push('platform answered');
        return { messageIds: ['77'] };
      },
      async stop() {
        events.push('channel stopped');
      },
    };
    await gateway.startChannel(channel);
    const delivery = gateway.send({ channel: 'telegram:main', peer: '5', idempotencyKey: 'thread#9', text: 'hi' });
    await new Promise((resolve) => setImmediate(resolve));
    const stopped = gateway.stopChannels();
    await expect(gateway.send({ channel: 'telegram:main', peer: '6', text: 'later' })).rejects.toMatchObject({ kind: 'io', message: 'xgw is stopping' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual(['send']);

    release();
    await stopped;
    expect(events).toEqual(['send', 'platform answered', 'channel stopped']);
    expect(await delivery).toEqual({ status: 'delivered', message_ids: ['77'] });
    expect(state.deliveryProgress({ channelId: 'telegram:main', target: 'dm:5:5', key: 'thread#9' })).toEqual({ messageIds: ['77'], complete: true });
  });

  it('refuses a channel that is not configured and an empty text as usage errors, and says when a configured one is not running', async () => {
    const gateway = gatewayWith(openChat);
    await expect(gateway.send({ channel: 'nope:x', peer: '1', text: 'hi' })).rejects.toMatchObject({
      kind: 'usage',
      message: 'no channel nope:x is configured',
      suggestion: 'pass one of the configured channels (telegram:main) to --channel',
    });
    await expect(gateway.send({ channel: 'telegram:main', peer: '1', text: 'hi' })).rejects.toMatchObject({ kind: 'io', message: 'telegram:main is not running' });
    await expect(gateway.send({ channel: 'telegram:main', peer: '1', text: '  ' })).rejects.toMatchObject({ kind: 'usage' });
  });
});

function filesUnder(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === '.bin') continue; // the test's own links to the CLIs
      if (lstatSync(path).isDirectory()) walk(path);
      else out.push(relative(root, path));
    }
  };
  walk(root);
  return out;
}
