import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { packageRoot } from '../../core/package.js';
import { createTestHome, expectExitAfterDone, startedInbox, rejection, startFakeDiscord, waitFor, type FakeDiscord, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import type { ChannelAdapter } from '../channel.js';
import { XgwConfigSchema, type DiscordChannelConfig } from '../types.js';
import { createDiscordChannel } from './discord.js';

/**
 * The Discord channel with real discord.js against the fake Discord (REST and gateway) on
 * loopback, a real Gateway and GatewayState, and a real agent inbox thread in a temp home. Every
 * test ends by scanning the xgw log for the bot token.
 */
interface Harness {
  testHome: TestHome;
  home: string;
  fake: FakeDiscord;
  state: GatewayState;
  gateway: Gateway;
  config: DiscordChannelConfig;
  channel: ChannelAdapter;
  logPath: string;
}

let harness: Harness | undefined;
const tokens: string[] = [];
const GUILD = '500000000000001';

async function setup(options: { start?: boolean; groups?: { require_mention: boolean }; refuseMessageContent?: boolean } = {}): Promise<Harness> {
  const testHome = createTestHome();
  const { home } = testHome;
  const fake = await startFakeDiscord({ refuseMessageContent: options.refuseMessageContent });
  tokens.push(fake.token);
  startedInbox(home);
  const config = XgwConfigSchema.parse({
    channels: [
      {
        id: 'discord:main',
        type: 'discord',
        token_env: 'TEST_DISCORD_TOKEN',
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
  const channelConfig = config.channels[0] as DiscordChannelConfig;
  const channel = createDiscordChannel(channelConfig, { TEST_DISCORD_TOKEN: fake.token }, { receiveRetryDelayMs: 5 });
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
  for (const token of tokens) expect(log).not.toContain(token);
  tokens.length = 0;
  testHome.cleanup();
});

function inbox(h: Harness) {
  const thread = openThread(join(h.home, 'agents', 'admin', 'inbox'), { home: h.home });
  try {
    return thread.peek();
  } finally {
    thread.close();
  }
}

/** Waits until the channel logged that it ignored the message. */
async function ignored(h: Harness, messageId: string): Promise<void> {
  await waitFor(() => existsSync(h.logPath) && readFileSync(h.logPath, 'utf8').includes(`ignored message ${messageId} `), `message ${messageId} ignored`);
}

describe('discord channel: inbound', () => {
  it('puts a direct message from an allowed peer into the inbox, addressed to the peer as Telegram does', async () => {
    const h = await setup();
    const message = h.fake.queueMessage({ from: '111', text: 'hello claw', username: 'ann' });
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the message in the inbox');
    expect(event!.source).toBe('external:discord:main:dm:111:111');
    const content = parseMessageContent(event!.content);
    expect(content.text).toBe('hello claw');
    expect(content.reply_context).toEqual({ kind: 'external', channel_id: 'discord:main', conversation_type: 'dm', conversation_id: '111', peer_id: '111', message_id: message.id });
    expect(JSON.parse(event!.content)).not.toHaveProperty('addressed');
    expect(h.fake.sent).toHaveLength(0); // an accepted message is not answered by the channel

    // The reply goes to the peer's DM channel, quoting the message, pinging no one else.
    const result = await h.gateway.send({ channel: 'discord:main', peer: '111', conversation: '111', replyTo: message.id, text: 'Hello back' });
    expect(result.status).toBe('delivered');
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({
      channel_id: h.fake.dmChannel('111'),
      content: 'Hello back',
      message_reference: { message_id: message.id, fail_if_not_exists: false },
      allowed_mentions: { parse: [] },
    });
    expect(result.message_ids).toEqual([h.fake.sent[0]!.message.id]);
  });

  it('answers an unknown peer with a pairing code, keeps its message out, and admits it once the code is approved', async () => {
    const h = await setup();
    const first = h.fake.queueMessage({ from: '222', text: 'hi, who are you?', username: 'bob' });
    const notice = await waitFor(() => h.fake.sent.find((sent) => sent.channel_id === h.fake.dmChannel('222')), 'the pairing notice');
    const code = /code: ([A-Z0-9]{8})\b/.exec(notice.content)?.[1];
    expect(code, notice.content).toBeDefined();
    expect(notice.message_reference?.message_id).toBe(first.id);
    expect(inbox(h)).toHaveLength(0);

    expect(h.state.approvePairing(code!)?.peer_id).toBe('222');
    h.fake.queueMessage({ from: '222', text: 'approved now?' });
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the message in the inbox');
    expect(event!.source).toBe('external:discord:main:dm:222:222');
    expect(parseMessageContent(event!.content).text).toBe('approved now?');
    expect(h.fake.sent).toHaveLength(1); // no second notice
  });

  it('keeps server messages without a mention as the channel’s context, takes mentioned ones without the mention and with that context, and replies to the bot', async () => {
    const h = await setup();
    const channel = `${GUILD}7`;
    const plain = h.fake.queueMessage({ from: '111', guild: GUILD, channel, text: 'hello everyone' });
    await waitFor(() => existsSync(h.logPath) && readFileSync(h.logPath, 'utf8').includes(`kept message ${JSON.stringify(plain.id)} of group`), 'the message kept as context');
    expect(inbox(h)).toHaveLength(0);

    h.fake.queueMessage({ from: '111', guild: GUILD, channel, text: `hey <@${h.fake.bot.id}> what is up`, mentions: [h.fake.bot.id] });
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the mention in the inbox');
    expect(event!.source).toBe(`external:discord:main:group:${channel}:111`);
    const content = parseMessageContent(event!.content);
    expect(content.text).toBe('hey what is up');
    expect(content.reply_context).toMatchObject({ conversation_type: 'group', conversation_id: channel, peer_id: '111' });
    expect(content.addressed).toBe(true);
    expect(content.group_context).toMatchObject([{ peer_id: '111', text: 'hello everyone' }]);

    // A reply to something the bot said counts as addressing it; a reply goes to the server channel.
    await h.gateway.send({ channel: 'discord:main', peer: '111', conversationType: 'group', conversation: channel, text: 'I am here' });
    expect(h.fake.sent.at(-1)!.channel_id).toBe(channel);
    h.fake.queueMessage({ from: '111', guild: GUILD, channel, text: 'thanks', replyTo: h.fake.sent.at(-1)!.message });
    await waitFor(() => inbox(h).length === 2, 'the reply in the inbox');
    expect(parseMessageContent(inbox(h)[1]!.content)).toMatchObject({ text: 'thanks', addressed: true });
    // A message of another bot is not taken, mention or not.
    const fromBot = h.fake.queueMessage({ from: '333', guild: GUILD, channel, text: `<@${h.fake.bot.id}> ping`, mentions: [h.fake.bot.id], bot: true });
    await ignored(h, fromBot.id);
    expect(inbox(h)).toHaveLength(2);
  });

  it('gives an unknown peer in a server no pairing code and nothing to the agent', async () => {
    const h = await setup();
    for (const from of ['301', '302', '303', '304']) h.fake.queueMessage({ from, guild: GUILD, text: `<@${h.fake.bot.id}> let me in`, mentions: [h.fake.bot.id] });
    await waitFor(() => (readFileSync(h.logPath, 'utf8').match(/unknown peers pair in a direct chat/g) ?? []).length === 4, 'the four refusals');
    expect(h.fake.sent).toEqual([]);
    expect(h.state.pendingPairings()).toEqual([]);
    expect(inbox(h)).toEqual([]);
  });

  it('takes every server message when the config does not require a mention, and tells the agent which addressed it', async () => {
    const h = await setup({ groups: { require_mention: false } });
    h.fake.queueMessage({ from: '111', guild: GUILD, text: 'no mention here' });
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the server message in the inbox');
    expect(event!.source).toBe(`external:discord:main:group:${GUILD}0:111`);
    expect(parseMessageContent(event!.content).addressed).toBe(false);
  });

  it("takes a file into the agent's files/ by its SHA-256, with its caption as the text; a voice message as a voice file", async () => {
    const h = await setup();
    const pdf = Buffer.from('%PDF-1.4 the report');
    h.fake.queueMessage({ from: '111', text: 'see the report', attachments: [{ filename: 'report.pdf', bytes: pdf, contentType: 'application/pdf' }] });
    const [event] = await waitFor(() => (inbox(h).length > 0 ? inbox(h) : null), 'the message with its file');
    const content = parseMessageContent(event!.content);
    const sha = createHash('sha256').update(pdf).digest('hex');
    expect(content.text).toBe('see the report');
    expect(content.attachments).toEqual([{ type: 'document', path: `files/${sha}.pdf`, bytes: pdf.length, mime_type: 'application/pdf', name: 'report.pdf' }]);
    expect(readFileSync(join(h.home, 'agents', 'admin', 'files', `${sha}.pdf`))).toEqual(pdf);

    h.fake.queueMessage({ from: '111', attachments: [{ filename: 'voice-message.ogg', bytes: Buffer.from('OggS'), contentType: 'audio/ogg', voice: true }] });
    const voice = await waitFor(() => inbox(h)[1], 'the voice message');
    const oggSha = createHash('sha256').update('OggS').digest('hex');
    expect(parseMessageContent(voice.content).attachments).toEqual([{ type: 'voice', path: `files/${oggSha}.ogg`, bytes: 4, mime_type: 'audio/ogg', name: 'voice-message.ogg' }]);
    expect(h.fake.sent).toEqual([]); // no notice: the agent transcribes it, or says why not
  });

  it('shows typing in the conversation the gateway asks for', async () => {
    const h = await setup();
    h.fake.queueMessage({ from: '111', text: 'hello' });
    await waitFor(() => inbox(h).length === 1, 'the message');
    h.gateway.typing('discord:main', { peerId: '111', conversationType: 'dm', conversationId: '111' });
    await waitFor(() => h.fake.typing.length === 1, 'the typing indicator');
    expect(h.fake.typing).toEqual([h.fake.dmChannel('111')]);
  });
});

describe('discord channel: outbound', () => {
  it('sends a file the agent attached after the text, as a message of its own', async () => {
    const h = await setup();
    const path = join(h.home, 'report.txt');
    writeFileSync(path, 'quarterly numbers\n');
    const result = await h.gateway.send({ channel: 'discord:main', peer: '111', text: 'Here is the report.', files: [{ kind: 'document', path, name: 'report.txt', bytes: 18 }] });
    expect(result.message_ids).toHaveLength(2);
    expect(h.fake.sent.map((sent) => [sent.content, sent.files?.map((file) => [file.name, file.bytes.toString()])])).toEqual([
      ['Here is the report.', undefined],
      ['', [['report.txt', 'quarterly numbers\n']]],
    ]);
  });

  it('sends a 4,500-character reply as three messages of at most 2,000, quoting with the first', async () => {
    const h = await setup();
    const result = await h.gateway.send({ channel: 'discord:main', peer: '111', replyTo: '42', text: 'x'.repeat(4500) });
    expect(h.fake.sent.map((sent) => sent.content.length)).toEqual([2000, 2000, 500]);
    expect(h.fake.sent[0]!.message_reference?.message_id).toBe('42');
    expect(h.fake.sent.slice(1).map((sent) => sent.message_reference)).toEqual([undefined, undefined]);
    expect(result.message_ids).toEqual(h.fake.sent.map((sent) => sent.message.id));
    // A peer never heard from here: its DM channel was opened once.
    expect(h.fake.calls.filter((call) => call.route === '/users/@me/channels')).toEqual([{ method: 'POST', route: '/users/@me/channels', body: { recipient_id: '111' } }]);
  });

  it('resumes a split reply that failed part-way after the last part sent, and sends a delivered key once', async () => {
    const h = await setup();
    const request = { channel: 'discord:main', peer: '111', idempotencyKey: 'thread#9', text: `${'a'.repeat(2000)}${'b'.repeat(2000)}${'c'.repeat(100)}` };
    h.fake.failNext('createMessage', { status: 502, code: 0, message: 'Bad Gateway' }, { after: 1 });
    const failed = await rejection(h.gateway.send(request));
    expect(failed).toMatchObject({ kind: 'upstream', status: 502 });
    expect(failed.message).toContain('after 1 of 3 parts were sent');
    expect(h.fake.sent.map((sent) => sent.content[0])).toEqual(['a']); // not retried inside discord.js

    const result = await h.gateway.send(request);
    expect(result.status).toBe('delivered');
    expect(h.fake.sent.map((sent) => sent.content[0])).toEqual(['a', 'b', 'c']);
    expect(await h.gateway.send(request)).toEqual({ status: 'duplicate', message_ids: result.message_ids });
    expect(h.fake.sent).toHaveLength(3);
  });

  it('turns a Discord refusal into an upstream error with its status, and says when to retry after 429', async () => {
    const h = await setup();
    h.fake.failNext('createMessage', { status: 429, code: 0, message: 'You are being rate limited.', retryAfterSeconds: 7 });
    const limited = await rejection(h.gateway.send({ channel: 'discord:main', peer: '111', text: 'hi' }));
    expect(limited).toMatchObject({ kind: 'upstream', status: 429 });
    expect(limited.message).toMatch(/retry after [78] s/);

    // discord.js now holds back that channel's messages itself until the limit resets; another channel is free.
    expect(await rejection(h.gateway.send({ channel: 'discord:main', peer: '111', text: 'again' }))).toMatchObject({ status: 429 });
    h.fake.failNext('createMessage', { status: 403, code: 50013, message: 'Missing Permissions' });
    const blocked = await rejection(h.gateway.send({ channel: 'discord:main', peer: '111', conversationType: 'group', conversation: `${GUILD}5`, text: 'hi' }));
    expect(blocked).toMatchObject({ kind: 'upstream', status: 403 });
    expect(formatError(blocked)).toMatch(/403: Missing Permissions.* - the bot cannot write there/);
  });
});

describe('discord channel: start, status and stop', () => {
  it('refuses to be created without the token variable, saying how to set it', async () => {
    const h = await setup({ start: false });
    let error: unknown;
    try {
      createDiscordChannel(h.config, {});
    } catch (caught) {
      error = caught;
    }
    expect(formatError(error)).toBe('Error: TEST_DISCORD_TOKEN is not set - export the bot token from the Discord developer portal (Bot > Reset Token) as TEST_DISCORD_TOKEN');
  });

  it('refuses a token Discord does not know, without repeating it', async () => {
    const h = await setup({ start: false });
    const wrong = 'MTIzNDU2Nzg5.wrong.token-that-must-stay-secret';
    tokens.push(wrong);
    const channel = createDiscordChannel(h.config, { TEST_DISCORD_TOKEN: wrong });
    const error = await rejection(channel.start(h.gateway.context()));
    expect(error).toMatchObject({ kind: 'invalid', status: 401 });
    expect(formatError(error)).toMatch(/^Error: Discord refused the bot token in TEST_DISCORD_TOKEN .* - check the token in the Discord developer portal/);
    expect(formatError(error)).not.toContain(wrong);
    expect(JSON.stringify(channel.status())).not.toContain(wrong);
    expect(channel.status().state).toBe('error');
    await channel.stop();
  });

  it('says to enable the Message Content intent when Discord refuses it', async () => {
    const h = await setup({ start: false, refuseMessageContent: true });
    const error = await rejection(h.channel.start(h.gateway.context()));
    expect(error.kind).toBe('invalid');
    expect(formatError(error)).toMatch(/disallowed intents.* - enable "Message Content Intent" under Bot > Privileged Gateway Intents/);
  });

  it('reports its state and bot name in status, and resumes after the gateway drops the connection', async () => {
    const h = await setup();
    expect(h.channel.status()).toEqual({ id: 'discord:main', type: 'discord', state: 'running', detail: 'theclaw-test' });
    h.fake.disconnect();
    await waitFor(() => h.fake.sessions.resumed === 1, 'the session resumed');
    h.fake.queueMessage({ from: '111', text: 'are you back?' });
    await waitFor(() => inbox(h).length === 1, 'the message after the reconnect');
    expect(h.fake.sessions.identified).toBe(1);
    await waitFor(() => h.channel.status().state === 'running', 'the channel running');
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/the gateway connection was lost; reconnecting[\s\S]*the gateway connection works again/);
  });

  it('shows an error, saying why, when Discord closes the gateway for good (the token was reset meanwhile)', async () => {
    const h = await setup();
    h.fake.disconnect(4004);
    await waitFor(() => h.channel.status().state === 'error', 'the channel in error');
    expect(h.channel.status().detail).toMatch(/Discord refused the bot token in TEST_DISCORD_TOKEN \(gateway close 4004/);
    expect(readFileSync(h.logPath, 'utf8')).toMatch(/not reconnecting: check the token in the Discord developer portal/);
  });

  it('keeps the token out of errors when Discord is unreachable, and stops promptly', async () => {
    const h = await setup();
    await h.fake.close();
    const sendError = await rejection(h.gateway.send({ channel: 'discord:main', peer: '111', conversation: '111', text: 'anyone there?' }));
    expect(sendError.kind).toBe('upstream');
    expect(formatError(sendError)).toMatch(/cannot reach Discord at http:\/\/127\.0\.0\.1:\d+\/api/);
    expect(`${formatError(sendError)} ${String(sendError.cause)}`).not.toContain(h.fake.token);
    const stopping = Date.now();
    await h.channel.stop();
    expect(Date.now() - stopping).toBeLessThan(1000);
    expect(h.channel.status().state).toBe('stopped');
    await rejection(h.channel.send({ peerId: '111', conversationType: 'dm', conversationId: '111', text: 'late' }));

    const again = createDiscordChannel(h.config, { TEST_DISCORD_TOKEN: h.fake.token });
    const startError = await rejection(again.start(h.gateway.context()));
    expect(startError.kind).toBe('upstream');
    expect(formatError(startError)).not.toContain(h.fake.token);
    expect(JSON.stringify(again.status())).not.toContain(h.fake.token);
  });

  it('leaves nothing behind after stop: a process that used the channel exits by itself', async () => {
    const root = packageRoot();
    const script = `
      import { startFakeDiscord } from ${JSON.stringify(join(root, 'src/testing/fake-discord.ts'))};
      import { createDiscordChannel } from ${JSON.stringify(join(root, 'src/xgw/channels/discord.ts'))};
      const fake = await startFakeDiscord();
      const received = [];
      const config = { id: 'discord:main', type: 'discord', token_env: 'T', api_root: fake.apiRoot, access: 'open', allow: [], groups: { require_mention: true } };
      const channel = createDiscordChannel(config, { T: fake.token });
      const logger = { debug() {}, info() {}, warn() {}, error() {} };
      await channel.start({ home: '/nonexistent', logger, state: undefined, admits: () => true, noticeFor: () => null,
        receive: async (message) => (received.push(message), { kind: 'accepted', agent: 'a', eventId: 1, duplicate: false }) });
      fake.queueMessage({ from: '111', text: 'hi' });
      while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      await channel.send({ peerId: '111', conversationType: 'dm', conversationId: '111', text: 'hello' });
      await channel.stop();
      await fake.close();
      console.log('done', Date.now());
    `;
    await expectExitAfterDone(script);
  });
});
