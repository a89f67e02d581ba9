import { createServer, type AddressInfo, type Socket } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ClawError, formatError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { packageRoot } from '../../core/package.js';
import { createTestHome, expectExitAfterDone, rejection, startedInbox, startFakeTelegram, textUpdate, waitFor, type FakeTelegram, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import type { SupervisorOptions } from '../supervisor.js';
import type { ChannelAdapter } from '../channel.js';
import { XgwConfigSchema, type TelegramChannelConfig } from '../types.js';
import { createTelegramChannel } from './telegram.js';

/**
 * The Telegram channel with real grammY against the fake Bot API on loopback, a real Gateway and
 * GatewayState, and a real agent inbox thread in a temp home. Every test ends by scanning the
 * xgw log for the bot token.
 */
interface Harness {
  testHome: TestHome;
  home: string;
  fake: FakeTelegram;
  state: GatewayState;
  gateway: Gateway;
  config: TelegramChannelConfig;
  channel: ChannelAdapter;
  logPath: string;
}

let harness: Harness | undefined;
const tokens: string[] = [];

async function setup(options: { start?: boolean; groups?: { require_mention: boolean } } = {}): Promise<Harness> {
  const testHome = createTestHome();
  const { home } = testHome;
  const fake = await startFakeTelegram();
  tokens.push(fake.token);
  startedInbox(home);
  const config = XgwConfigSchema.parse({
    channels: [
      {
        id: 'telegram:main',
        type: 'telegram',
        token_env: 'TEST_TG_TOKEN',
        api_root: fake.apiRoot,
        access: 'pairing',
        allow: ['111'],
        ...(options.groups && { groups: options.groups }),
      },
    ],
    routes: [{ channel: '*', peer: '*', agent: 'admin' }],
  });
  const state = new GatewayState(home);
  const logPath = join(home, 'logs', 'xgw.log');
  // No env: the logger's own redaction must not hide a leak of the channel's.
  const logger = createLogger(logPath, { level: 'debug', env: {} });
  const gateway = new Gateway({ home, config, state, logger });
  const channelConfig = config.channels[0] as TelegramChannelConfig;
  const channel = createTelegramChannel(channelConfig, { TEST_TG_TOKEN: fake.token });
  harness = { testHome, home, fake, state, gateway, config: channelConfig, channel, logPath };
  if (options.start !== false) await gateway.startChannel(channel);
  return harness;
}

afterEach(async () => {
  if (!harness) return;
  const { channel, fake, state, logPath, testHome } = harness;
  harness = undefined;
  await channel.stop();
  await fake.close();
  state.close();
  const log = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
  for (const token of tokens) {
    expect(log).not.toContain(token);
    expect(log).not.toContain(encodeURIComponent(token));
  }
  tokens.length = 0;
  testHome.cleanup();
});

/** A gateway over the harness's state that launches channels the way the daemon does. */
function supervisedGateway(h: Harness, supervisor: SupervisorOptions): Gateway {
  const config = XgwConfigSchema.parse({ channels: [h.config], routes: [{ agent: 'admin' }] });
  return new Gateway({ home: h.home, config, state: h.state, logger: createLogger(h.logPath, { level: 'debug', env: {} }), supervisor });
}

function inbox(h: Harness) {
  const thread = openThread(join(h.home, 'agents', 'admin', 'inbox'), { home: h.home });
  try {
    return thread.peek();
  } finally {
    thread.close();
  }
}

describe('telegram channel: inbound', () => {
  it('puts a message from an allowed peer into the inbox once, even when Telegram delivers the update twice', async () => {
    const h = await setup();
    const update = h.fake.deliverTwice(textUpdate({ from: 111, text: 'hello claw', username: 'ann' }));
    await waitFor(() => h.fake.consumed(update.update_id), 'both deliveries handled');

    const events = inbox(h);
    expect(events).toHaveLength(1);
    expect(events[0]!.source).toBe('external:telegram:main:dm:111:111');
    expect(events[0]!.type).toBe('message');
    const content = parseMessageContent(events[0]!.content);
    expect(content.text).toBe('hello claw');
    expect(content.reply_context).toEqual({
      kind: 'external',
      channel_id: 'telegram:main',
      conversation_type: 'dm',
      conversation_id: '111',
      peer_id: '111',
      message_id: String(update.message.message_id),
    });
    expect(h.fake.sent).toHaveLength(0); // an accepted message is not answered by the channel
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/duplicate of event/);
  });

  it('answers an unknown peer with a pairing code, keeps its message out, and admits it once the code is approved', async () => {
    const h = await setup();
    const first = h.fake.queueUpdate(textUpdate({ from: 222, text: 'hi, who are you?', username: 'bob' }));
    const notice = await waitFor(() => h.fake.sent.find((sent) => sent.chat_id === 222), 'the pairing notice');
    const code = /code: ([A-Z0-9]{8})\b/.exec(notice.text)?.[1];
    expect(code, notice.text).toBeDefined();
    expect(notice.reply_parameters).toEqual({ message_id: first.message.message_id, allow_sending_without_reply: true });
    await waitFor(() => h.fake.consumed(first.update_id), 'the first message handled');
    expect(inbox(h)).toHaveLength(0);

    expect(h.state.approvePairing(code!)?.peer_id).toBe('222');
    h.fake.queueUpdate(textUpdate({ from: 222, text: 'approved now?' }));
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the message in the inbox');
    expect(event!.source).toBe('external:telegram:main:dm:222:222');
    expect(parseMessageContent(event!.content).text).toBe('approved now?');
    expect(h.fake.sent).toHaveLength(1); // no second notice
  });

  it('ignores group messages without a mention and takes mentioned ones, and replies to the bot, without the mention', async () => {
    const h = await setup();
    const group = -100500;
    const plain = h.fake.queueUpdate(textUpdate({ from: 111, chat: group, text: 'hello everyone' }));
    await waitFor(() => h.fake.consumed(plain.update_id), 'the plain group message handled');
    expect(inbox(h)).toHaveLength(0);

    const text = 'hey @theclaw_test_bot what is up';
    h.fake.queueUpdate(textUpdate({ from: 111, chat: group, text, entities: [{ type: 'mention', offset: 4, length: 17 }] }));
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the mention in the inbox');
    expect(event!.source).toBe('external:telegram:main:group:-100500:111');
    const content = parseMessageContent(event!.content);
    expect(content.text).toBe('hey what is up');
    expect(content.reply_context).toMatchObject({ conversation_type: 'group', conversation_id: '-100500', peer_id: '111' });
    expect(content.addressed).toBe(true);

    // A reply to something the bot said counts as addressing it.
    await h.gateway.send({ channel: 'telegram:main', peer: '111', conversationType: 'group', conversation: String(group), text: 'I am here' });
    const botMessage = h.fake.sent.at(-1)!.message;
    h.fake.queueUpdate(textUpdate({ from: 111, chat: group, text: 'thanks', replyTo: botMessage }));
    await waitFor(() => inbox(h).length === 2, 'the reply in the inbox');
    expect(parseMessageContent(inbox(h)[1]!.content).text).toBe('thanks');
  });

  it('gives an unknown peer in a group no pairing code and nothing to the agent', async () => {
    const h = await setup();
    const text = '@theclaw_test_bot let me in';
    for (const from of [301, 302, 303, 304]) {
      const update = h.fake.queueUpdate(textUpdate({ from, chat: -100700, text, entities: [{ type: 'mention', offset: 0, length: 17 }] }));
      await waitFor(() => h.fake.consumed(update.update_id), 'the group message handled');
    }
    expect(h.fake.sent).toEqual([]);
    expect(h.state.pendingPairings()).toEqual([]);
    expect(inbox(h)).toEqual([]);
    // The slots are still free for a direct chat.
    h.fake.queueUpdate(textUpdate({ from: 301, text: 'hi' }));
    const notice = await waitFor(() => h.fake.sent.find((sent) => sent.chat_id === 301), 'the pairing notice in the DM');
    expect(notice.text).toMatch(/code: [A-Z0-9]{8}/);
  });

  it('takes every group message when the config does not require a mention, and tells the agent which addressed it', async () => {
    const h = await setup({ groups: { require_mention: false } });
    h.fake.queueUpdate(textUpdate({ from: 111, chat: -100600, chatType: 'group', text: 'no mention here' }));
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the group message in the inbox');
    expect(event!.source).toBe('external:telegram:main:group:-100600:111');
    expect(parseMessageContent(event!.content).addressed).toBe(false);
    // In a direct chat there is no one else to address: no flag.
    h.fake.queueUpdate(textUpdate({ from: 111, text: '/status' }));
    await waitFor(() => inbox(h).length === 2, 'the direct message in the inbox');
    expect(JSON.parse(inbox(h)[1]!.content)).not.toHaveProperty('addressed');
  });
});

describe('telegram channel: outbound', () => {
  it('sends a reply that quotes the message it answers', async () => {
    const h = await setup();
    const result = await h.gateway.send({ channel: 'telegram:main', peer: '111', conversation: '111', replyTo: '42', text: 'Hello back' });
    expect(result.status).toBe('delivered');
    expect(h.fake.sent).toHaveLength(1);
    const [sent] = h.fake.sent;
    expect(sent).toMatchObject({ chat_id: 111, text: 'Hello back', reply_parameters: { message_id: 42, allow_sending_without_reply: true } });
    expect(result.message_ids).toEqual([String(sent!.message.message_id)]);
  });

  it('waits out a full disk however many tries it takes, then stores the message once (giving up would lose it)', async () => {
    const h = await setup({ start: false });
    h.channel = createTelegramChannel(h.config, { TEST_TG_TOKEN: h.fake.token }, { receiveRetryDelayMs: 5 });
    const context = h.gateway.context();
    let refused = 0;
    await h.channel.start({
      ...context,
      receive: async (message) => {
        if (refused < 6) {
          refused++;
          throw new ClawError('disk_full', 'the disk is full (writing events.db)', { suggestion: 'free space' });
        }
        return context.receive(message);
      },
    });
    h.fake.queueUpdate(textUpdate({ from: 111, text: 'through a full disk' }));
    await waitFor(() => inbox(h).length === 1, 'the message in the inbox once the disk has room');
    expect(refused).toBe(6);
    expect(parseMessageContent(inbox(h)[0]!.content).text).toBe('through a full disk');
    const log = readFileSync(h.logPath, 'utf8');
    expect(log.match(/failed \(the disk is full \(writing events\.db\)\); retrying/g)).toHaveLength(6);
    expect(log).not.toContain('dropped message');
  });

  it('sends a 5,000-character reply as two messages, quoting with the first', async () => {
    const h = await setup();
    const result = await h.gateway.send({ channel: 'telegram:main', peer: '111', replyTo: '42', text: 'x'.repeat(5000) });
    expect(h.fake.sent.map((sent) => sent.text.length)).toEqual([4096, 904]);
    expect(h.fake.sent[0]!.reply_parameters?.message_id).toBe(42);
    expect(h.fake.sent[1]!.reply_parameters).toBeUndefined();
    expect(result.message_ids).toEqual(h.fake.sent.map((sent) => String(sent.message.message_id)));
  });

  it('resumes a split reply that failed part-way after the last part sent, also after a restart', async () => {
    const h = await setup();
    const request = { channel: 'telegram:main', peer: '111', replyTo: '42', idempotencyKey: 'thread#9', text: `${'a'.repeat(4096)}${'b'.repeat(4096)}${'c'.repeat(100)}` };
    h.fake.failNext('sendMessage', { error_code: 502, description: 'Bad Gateway' }, { after: 1 });
    const failed = await rejection(h.gateway.send(request));
    expect(failed).toMatchObject({ kind: 'upstream', status: 502 });
    expect(failed.message).toContain('after 1 of 3 parts were sent');
    expect(h.fake.sent.map((sent) => sent.text[0])).toEqual(['a']);

    h.fake.failNext('sendMessage', { error_code: 502, description: 'Bad Gateway' }, { after: 1 });
    await rejection(h.gateway.send(request));
    expect(h.fake.sent.map((sent) => sent.text[0])).toEqual(['a', 'b']);

    // A gateway of a restarted daemon reads what was sent from the state.
    await h.channel.stop();
    const restarted = new Gateway({ home: h.home, config: XgwConfigSchema.parse({ channels: [h.config] }), state: h.state, logger: createLogger(h.logPath, { env: {} }) });
    h.channel = createTelegramChannel(h.config, { TEST_TG_TOKEN: h.fake.token });
    await restarted.startChannel(h.channel);
    const result = await restarted.send(request);
    expect(result.status).toBe('delivered');
    expect(h.fake.sent.map((sent) => sent.text[0])).toEqual(['a', 'b', 'c']);
    expect(h.fake.sent[2]!.reply_parameters).toBeUndefined(); // only the first part quotes
    expect(result.message_ids).toEqual(h.fake.sent.map((sent) => String(sent.message.message_id)));
    expect(await restarted.send(request)).toEqual({ status: 'duplicate', message_ids: result.message_ids });
    expect(h.fake.sent).toHaveLength(3);
  });

  it('does not send a reply again when it went out but could not be recorded', async () => {
    const h = await setup();
    const record = vi.spyOn(h.state, 'recordDelivery').mockImplementation(() => {
      throw new Error('disk I/O error');
    });
    const request = { channel: 'telegram:main', peer: '111', idempotencyKey: 'thread#10', text: 'x'.repeat(5000) };
    const first = await h.gateway.send(request);
    expect(first.status).toBe('delivered');
    expect(await h.gateway.send(request)).toEqual({ status: 'duplicate', message_ids: first.message_ids });
    expect(h.fake.sent).toHaveLength(2);
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/could not record the delivery under key thread#10 \(disk I\/O error\)/);
    record.mockRestore();
  });

  it('turns a Telegram refusal into an upstream error with its code, and says when to retry after 429', async () => {
    const h = await setup();
    h.fake.failNext('sendMessage', { error_code: 429, description: 'Too Many Requests: retry after 7', parameters: { retry_after: 7 } });
    const limited = await rejection(h.gateway.send({ channel: 'telegram:main', peer: '111', text: 'hi' }));
    expect(limited.kind).toBe('upstream');
    expect(limited.status).toBe(429);
    expect(limited.message).toMatch(/retry after 7 s/);

    h.fake.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
    const blocked = await rejection(h.gateway.send({ channel: 'telegram:main', peer: '111', text: 'hi' }));
    expect(blocked).toMatchObject({ kind: 'upstream', status: 403 });
    expect(formatError(blocked)).toMatch(/blocked/);
  });
});

describe('telegram channel: start, status and stop', () => {
  it('refuses to be created without the token variable, saying how to set it', async () => {
    const h = await setup({ start: false });
    const error = (() => {
      try {
        createTelegramChannel(h.config, {});
      } catch (error) {
        return error as ClawError;
      }
      throw new Error('expected an error');
    })();
    expect(error.kind).toBe('invalid');
    expect(formatError(error)).toBe('Error: TEST_TG_TOKEN is not set - export the bot token from @BotFather as TEST_TG_TOKEN');
  });

  it('refuses a token Telegram does not know, without repeating it', async () => {
    const h = await setup({ start: false });
    const wrong = '123456789:AAwrong-token-that-must-stay-secret';
    tokens.push(wrong);
    const channel = createTelegramChannel(h.config, { TEST_TG_TOKEN: wrong });
    const error = await rejection(channel.start(h.gateway.context()));
    expect(error).toMatchObject({ kind: 'invalid', status: 401 });
    expect(formatError(error)).not.toContain(wrong);
    expect(JSON.stringify(channel.status())).not.toContain(wrong);
    await channel.stop();
  });

  it('reports its state and bot name in status, never the token', async () => {
    const h = await setup();
    const status = h.channel.status();
    expect(status).toMatchObject({ id: 'telegram:main', type: 'telegram', state: 'running', detail: '@theclaw_test_bot' });
    expect(JSON.stringify(status)).not.toContain(h.fake.token);
  });

  it('keeps the token out of status, errors and the log when the Bot API becomes unreachable', async () => {
    const h = await setup();
    await h.fake.close();
    await waitFor(() => h.channel.status().state === 'error', 'the channel in error');
    const status = h.channel.status();
    expect(status.detail).toMatch(/polling failed/);
    expect(JSON.stringify(status)).not.toContain(h.fake.token);

    const sendError = await rejection(h.gateway.send({ channel: 'telegram:main', peer: '111', text: 'anyone there?' }));
    expect(sendError.kind).toBe('upstream');
    expect(`${formatError(sendError)} ${String(sendError.cause)}`).not.toContain(h.fake.token);

    const stopping = Date.now();
    await h.channel.stop();
    expect(Date.now() - stopping, 'stop while polling fails').toBeLessThan(1000);
    expect(h.channel.status().state).toBe('stopped');
    const again = createTelegramChannel(h.config, { TEST_TG_TOKEN: h.fake.token });
    const startError = await rejection(again.start(h.gateway.context()));
    expect(startError.kind).toBe('upstream');
    expect(formatError(startError)).not.toContain(h.fake.token);
    expect(JSON.stringify(again.status())).not.toContain(h.fake.token);
    // grammY's network errors held the URL (and so the token); the log shows where it was cut.
    expect(readFileSync(h.logPath, 'utf8')).toContain('/bot[redacted]/');
  });

  it('tries a start that failed on the network again with backoff, in error meanwhile, until Telegram is back', async () => {
    const h = await setup({ start: false });
    const { token } = h.fake;
    const port = Number(new URL(h.fake.apiRoot).port);
    await h.fake.close();
    const gateway = supervisedGateway(h, { retryDelayMs: 50, maxRetryDelayMs: 200 });
    await gateway.launchChannel(h.channel);
    const [status] = gateway.channelStatuses();
    expect(status).toMatchObject({ id: 'telegram:main', state: 'error', detail: expect.stringMatching(/cannot reach the Telegram Bot API .*; trying again in \d+ s$/) });
    expect(JSON.stringify(status)).not.toContain(token);

    h.fake = await startFakeTelegram({ token, port });
    await waitFor(() => gateway.channelStatuses()[0]!.state === 'running', 'the channel running again');
    h.fake.queueUpdate(textUpdate({ from: 111, text: 'are you back?' }));
    await waitFor(() => inbox(h).length === 1, 'the message after the recovery');
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/telegram:main: started after \d+ attempts/);
    await gateway.stopChannels();
    expect(gateway.channelStatuses()[0]!.state).toBe('stopped');
  });

  it('cancels a pending retry of the start on stop', async () => {
    const h = await setup({ start: false });
    await h.fake.close();
    const gateway = supervisedGateway(h, { retryDelayMs: 60_000 });
    await gateway.launchChannel(h.channel);
    expect(gateway.channelStatuses()[0]!.state).toBe('error');
    const stopping = Date.now();
    await gateway.stopChannels();
    expect(Date.now() - stopping, 'stop during the retry delay').toBeLessThan(1000);
    expect(gateway.channelStatuses()[0]).toMatchObject({ state: 'stopped' });
  });

  it('cancels a start that hangs past the start timeout, and stops while it hangs', async () => {
    const h = await setup({ start: false });
    const silent = createServer(() => {}); // accepts connections, never answers
    const held = new Set<Socket>();
    silent.on('connection', (socket) => held.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const config = { ...h.config, api_root: `http://127.0.0.1:${(silent.address() as AddressInfo).port}` };
      h.channel = createTelegramChannel(config, { TEST_TG_TOKEN: h.fake.token });
      const gateway = supervisedGateway(h, { startTimeoutMs: 300, retryDelayMs: 50, maxRetryDelayMs: 100 });
      await gateway.launchChannel(h.channel);
      expect(gateway.channelStatuses()[0]).toMatchObject({ state: 'error', detail: expect.stringMatching(/^telegram:main did not start within 0\.3 s; trying again/) });
      await waitFor(() => held.size >= 2, 'a second attempt');
      const stopping = Date.now();
      await gateway.stopChannels();
      expect(Date.now() - stopping).toBeLessThan(1000);
      expect(gateway.channelStatuses()[0]!.state).toBe('stopped');
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });

  it('does not try again a start that a refused token failed', async () => {
    const h = await setup({ start: false });
    const wrong = '123456789:AAwrong-token-that-must-stay-secret';
    tokens.push(wrong);
    h.channel = createTelegramChannel(h.config, { TEST_TG_TOKEN: wrong });
    const gateway = supervisedGateway(h, { retryDelayMs: 50 });
    await gateway.launchChannel(h.channel);
    expect(gateway.channelStatuses()[0]).toMatchObject({ state: 'error', detail: expect.stringContaining('Telegram refused the bot token in TEST_TG_TOKEN') });
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/telegram:main failed to start: .* \(not retried: fix it and restart xgw\)/);
    await gateway.stopChannels();
  });

  it('keeps polling through failed polls and restarts it after a conflict, with backoff', async () => {
    const h = await setup({ start: false });
    h.fake.failNext('getUpdates', { error_code: 409, description: 'Conflict: terminated by other getUpdates request' });
    h.fake.failNext('getUpdates', { error_code: 502, description: 'Bad Gateway' });
    h.fake.failNext('getUpdates', { error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } });
    h.channel = createTelegramChannel(h.config, { TEST_TG_TOKEN: h.fake.token }, { retryDelayMs: 50 });
    await h.gateway.startChannel(h.channel);
    h.fake.queueUpdate(textUpdate({ from: 111, text: 'still there?' }));
    await waitFor(() => inbox(h).length === 1, 'the message after the failures');
    expect(h.channel.status().state).toBe('running');
    const log = readFileSync(h.logPath, 'utf8');
    expect(log).toMatch(/polling stopped: 409: Conflict.*restarting in/);
    expect(log).toMatch(/polling failed: 502: Bad Gateway; retrying/);
    expect(log).toMatch(/polling works again/);
  });

  it('stops polling promptly, with a long poll pending', async () => {
    const h = await setup();
    const polls = () => h.fake.calls.filter((call) => call.method === 'getUpdates' && Number(call.params.timeout) > 0).length;
    await waitFor(() => polls() > 0, 'a long poll');
    const started = Date.now();
    await h.channel.stop();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(h.channel.status().state).toBe('stopped');
    const calls = h.fake.calls.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(h.fake.calls.length).toBe(calls);
    await rejection(h.channel.send({ peerId: '111', conversationType: 'dm', conversationId: '111', text: 'late' }));
  });

  it('leaves nothing behind after stop: a process that used the channel exits by itself', async () => {
    const root = packageRoot();
    const script = `
      import { startFakeTelegram, textUpdate } from ${JSON.stringify(join(root, 'src/testing/fake-telegram.ts'))};
      import { createTelegramChannel } from ${JSON.stringify(join(root, 'src/xgw/channels/telegram.ts'))};
      const fake = await startFakeTelegram();
      const received = [];
      const config = { id: 'telegram:main', type: 'telegram', token_env: 'T', api_root: fake.apiRoot, access: 'open', allow: [], groups: { require_mention: true } };
      const channel = createTelegramChannel(config, { T: fake.token });
      const logger = { debug() {}, info() {}, warn() {}, error() {} };
      await channel.start({ home: '/nonexistent', logger, state: undefined, noticeFor: () => null,
        receive: async (message) => (received.push(message), { kind: 'accepted', agent: 'a', eventId: 1, duplicate: false }) });
      fake.queueUpdate(textUpdate({ from: 111, text: 'hi' }));
      while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      await channel.send({ peerId: '111', conversationType: 'dm', conversationId: '111', text: 'hello' });
      await channel.stop();
      await fake.close();
      console.log('done', Date.now());
    `;
    await expectExitAfterDone(script);
  });
});
