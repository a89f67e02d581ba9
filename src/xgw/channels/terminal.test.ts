import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/logger.js';
import { createTestHome, type TestHome } from '../../testing/index.js';
import { Gateway } from '../gateway.js';
import { GatewayState, type MailboxEntry } from '../state.js';
import { XgwConfigSchema, type TerminalChannelConfig } from '../types.js';
import { TerminalChannel } from './terminal.js';

// The terminal channel over a real GatewayState in a temp home; the daemon tests drive it through `xgw chat`.

let t: TestHome;
let state: GatewayState;
let channel: TerminalChannel;

const config = XgwConfigSchema.parse({ channels: [{ id: 'terminal:local', type: 'terminal', access: 'open' }] });
const gatewayWith = (gatewayState: GatewayState) => new Gateway({ home: t.home, config, state: gatewayState, logger: createLogger(join(t.home, 'logs', 'xgw.log')) });

beforeEach(async () => {
  t = createTestHome();
  state = new GatewayState(t.home);
  channel = new TerminalChannel(config.channels[0] as TerminalChannelConfig);
  await gatewayWith(state).startChannel(channel);
});

afterEach(async () => {
  await channel.stop();
  state.close();
  t.cleanup();
});

describe('terminal channel', () => {
  it('shows a reply to every attached terminal of the peer, and forgets a peer whose last terminal detached', async () => {
    const first: MailboxEntry[] = [];
    const second: MailboxEntry[] = [];
    const detachFirst = channel.attach('ann', undefined, (entry) => first.push(entry));
    const detachSecond = channel.attach('ann', undefined, (entry) => second.push(entry));
    expect(channel.status()).toMatchObject({ state: 'running', detail: '1 peer(s) attached' });
    await channel.send({ peerId: 'ann', conversationType: 'dm', conversationId: 'ann', text: 'hello' });
    expect([first.map((e) => e.text), second.map((e) => e.text)]).toEqual([['hello'], ['hello']]);
    detachFirst();
    expect(channel.status().detail).toBe('1 peer(s) attached');
    detachSecond();
    detachSecond(); // twice is harmless
    expect(channel.status().detail).toBeUndefined();
  });

  it('marks a notice of the agent as one, in the stream and in the mailbox, and leaves replies unmarked', async () => {
    const seen: MailboxEntry[] = [];
    const detach = channel.attach('ann', undefined, (entry) => seen.push(entry));
    await channel.send({ peerId: 'ann', conversationType: 'dm', conversationId: 'ann', text: 'Sorry for the wait', notice: 'delayed' });
    await channel.send({ peerId: 'ann', conversationType: 'dm', conversationId: 'ann', text: 'the answer' });
    detach();
    expect(seen.map((entry) => [entry.text, entry.notice])).toEqual([
      ['Sorry for the wait', 'delayed'],
      ['the answer', undefined],
    ]);
    expect(state.mailbox('terminal:local', 'ann').map((entry) => entry.notice ?? null)).toEqual(['delayed', null]);
    expect('notice' in state.mailbox('terminal:local', 'ann')[1]!).toBe(false);
  });

  it('reads the mailbox of a state file written before notices were marked', async () => {
    await channel.send({ peerId: 'cy', conversationType: 'dm', conversationId: 'cy', text: 'old reply' });
    state.close();
    const old = new Database(join(t.home, 'xgw', 'state.db'));
    old.exec('ALTER TABLE mailbox DROP COLUMN notice');
    old.close();
    state = new GatewayState(t.home);
    await gatewayWith(state).startChannel(channel);
    await channel.send({ peerId: 'cy', conversationType: 'dm', conversationId: 'cy', text: 'I could not answer', notice: 'error' });
    expect(state.mailbox('terminal:local', 'cy')).toEqual([
      expect.objectContaining({ role: 'agent', text: 'old reply', reply_to: null }),
      expect.objectContaining({ role: 'agent', text: 'I could not answer', notice: 'error' }),
    ]);
    expect(state.mailbox('terminal:local', 'cy')[0]).not.toHaveProperty('notice');
  });

  it("keeps the mailbox per agent: an agent's reply waits for the chat with that agent, and shows in no other", async () => {
    await channel.send({ peerId: 'dee', conversationType: 'dm', conversationId: 'dee', text: 'heartbeat of admin', agent: 'admin' });
    await channel.send({ peerId: 'dee', conversationType: 'dm', conversationId: 'dee', text: 'from the gateway' });
    const helper: string[] = [];
    const detachHelper = channel.attach('dee', 'helper', (entry) => helper.push(entry.text));
    await channel.send({ peerId: 'dee', conversationType: 'dm', conversationId: 'dee', text: 'admin again', agent: 'admin' });
    await channel.send({ peerId: 'dee', conversationType: 'dm', conversationId: 'dee', text: 'answer of helper', agent: 'helper' });
    detachHelper();
    expect(helper).toEqual(['from the gateway', 'answer of helper']);

    const admin: MailboxEntry[] = [];
    channel.attach('dee', 'admin', (entry) => admin.push(entry))();
    expect(admin.map((entry) => [entry.text, entry.agent])).toEqual([
      ['heartbeat of admin', 'admin'],
      ['admin again', 'admin'],
    ]);
  });

  it('shows a reply kept before the mailbox was per agent in the next chat of its peer, whatever the agent', async () => {
    state.close();
    const old = new Database(join(t.home, 'xgw', 'state.db'));
    old.exec('ALTER TABLE mailbox DROP COLUMN agent');
    old.exec("INSERT INTO mailbox (channel_id, peer_id, role, text, reply_to, created_at) VALUES ('terminal:local', 'eve', 'agent', 'kept before', NULL, '2026-01-01T00:00:00.000Z')");
    old.close();
    state = new GatewayState(t.home);
    await gatewayWith(state).startChannel(channel);
    const seen: MailboxEntry[] = [];
    channel.attach('eve', 'helper', (entry) => seen.push(entry))();
    expect(seen).toEqual([expect.objectContaining({ text: 'kept before' })]);
    expect(seen[0]).not.toHaveProperty('agent');
  });

  it('keeps a reply for a detached peer and shows it once at the next attach', async () => {
    await channel.send({ peerId: 'bob', conversationType: 'dm', conversationId: 'bob', text: 'while away' });
    const seen: string[] = [];
    channel.attach('bob', undefined, (entry) => seen.push(entry.text))();
    expect(seen).toEqual(['while away']);
    channel.attach('bob', undefined, (entry) => seen.push(entry.text))();
    expect(seen).toEqual(['while away']);
  });
});
