import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { packageRoot } from '../../core/package.js';
import { createTestHome, expectExitAfterDone, rejection, startedInbox, startFakeSlack, waitFor, type FakeSlack, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import type { ChannelAdapter } from '../channel.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import { XgwConfigSchema, type SlackChannelConfig } from '../types.js';
import { createSlackChannel } from './slack.js';

/**
 * The Slack channel with real @slack/bolt in Socket Mode against the fake Slack (Web API and
 * Socket Mode WebSocket) on loopback, a real Gateway and GatewayState, and a real agent inbox
 * thread in a temp home. One fake and one running channel serve the whole file (each test its
 * own people and conversations); the xgw log is scanned for both tokens at the end.
 */
let testHome: TestHome;
let home: string;
let slack: FakeSlack;
let state: GatewayState;
let gateway: Gateway;
let config: SlackChannelConfig;
let channel: ChannelAdapter;
let logPath: string;
const secrets: string[] = [];
const ALLOWED = 'U0ANN00001';
const OTHER = 'U0BOB00002';

beforeAll(async () => {
  testHome = createTestHome();
  home = testHome.home;
  slack = await startFakeSlack();
  secrets.push(slack.botToken, slack.appToken);
  startedInbox(home);
  const parsed = XgwConfigSchema.parse({
    channels: [
      {
        id: 'slack:main',
        type: 'slack',
        token_env: 'TEST_SLACK_BOT',
        app_token_env: 'TEST_SLACK_APP',
        api_root: slack.apiRoot,
        access: 'allowlist',
        allow: [ALLOWED, OTHER],
        stream_interval_seconds: 1,
      },
    ],
    routes: [{ channel: '*', peer: '*', agent: 'admin' }],
  });
  config = parsed.channels[0] as SlackChannelConfig;
  state = new GatewayState(home);
  logPath = join(home, 'logs', 'xgw.log');
  // No env: the logger's own redaction must not hide a leak of the channel's.
  gateway = new Gateway({ home, config: parsed, state, logger: createLogger(logPath, { level: 'debug', env: {} }) });
  channel = createSlackChannel(config, tokens(), { receiveRetryDelayMs: 5, reconnectDelayMs: 50, pingTimeoutMs: 2000 });
  await gateway.startChannel(channel);
});

afterAll(async () => {
  await channel?.stop();
  await slack?.close();
  state?.close();
  const log = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
  for (const secret of secrets) expect(log).not.toContain(secret);
  testHome?.cleanup();
});

function tokens(overrides: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return { TEST_SLACK_BOT: slack.botToken, TEST_SLACK_APP: slack.appToken, ...overrides };
}

function inbox() {
  const thread = openThread(join(home, 'agents', 'admin', 'inbox'), { home });
  try {
    return thread.peek({ limit: 1000 });
  } finally {
    thread.close();
  }
}

/** The inbox event of the message with this `ts` (its id, or `<thread>/<ts>` in a thread). */
async function pushed(ts: string) {
  const idOf = (content: string) => (parseMessageContent(content).reply_context as { message_id?: string } | undefined)?.message_id;
  return waitFor(() => inbox().find((event) => idOf(event.content)?.endsWith(ts)), `message ${ts} in the inbox`);
}

function log(): string {
  return existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
}

describe('slack channel: inbound', () => {
  it('puts a direct message into the inbox, addressed to the person, and answers it in the thread of the message, as written', async () => {
    const message = slack.queueMessage({ from: ALLOWED, text: 'hello &lt;claw&gt;' });
    const event = await pushed(message.ts);
    expect(event.source).toBe(`external:slack:main:dm:${ALLOWED}:${ALLOWED}`);
    const content = parseMessageContent(event.content);
    expect(content.text).toBe('hello <claw>');
    expect(content.reply_context).toEqual({ kind: 'external', channel_id: 'slack:main', conversation_type: 'dm', conversation_id: ALLOWED, peer_id: ALLOWED, message_id: message.ts });
    await waitFor(() => slack.acked(message.ts), 'the envelope acknowledged');

    const before = slack.posted.length;
    const result = await gateway.send({ channel: 'slack:main', peer: ALLOWED, conversation: ALLOWED, replyTo: message.ts, text: 'Hello <back> & no <!channel> ping' });
    expect(result.status).toBe('delivered');
    expect(slack.posted.slice(before)).toEqual([expect.objectContaining({ channel: slack.dmChannel(ALLOWED), thread_ts: message.ts, text: 'Hello &lt;back&gt; &amp; no &lt;!channel&gt; ping' })]);
    expect(result.message_ids).toEqual([slack.posted.at(-1)!.ts]);
  });

  it('gives a stranger under the allowlist nothing: no answer, no code, nothing to the agent, and logs it', async () => {
    const before = { posted: slack.posted.length, inbox: inbox().length };
    const message = slack.queueMessage({ from: 'U0EVE00009', text: 'let me in' });
    await waitFor(() => log().includes('ignored a message from "U0EVE00009", who is not on the allowlist'), 'the refusal in the log');
    await waitFor(() => slack.acked(message.ts), 'the envelope acknowledged all the same');
    expect(slack.posted.length).toBe(before.posted);
    expect(inbox().length).toBe(before.inbox);
    expect(state.pendingPairings()).toEqual([]);
  });

  it('keeps channel messages without a mention as context, takes a mention without it and with that context, and a reply in the thread of the bot', async () => {
    const plain = slack.queueMessage({ from: ALLOWED, channel: 'C0TEAM0001', text: 'hello everyone' });
    await waitFor(() => log().includes(`kept message "${plain.ts}" of group "C0TEAM0001"`), 'the plain message kept as context');

    const mention = slack.queueMessage({ from: ALLOWED, channel: 'C0TEAM0001', text: `hey <@${slack.bot.userId}> what is up` });
    const event = await pushed(mention.ts);
    expect(event.source).toBe(`external:slack:main:group:C0TEAM0001:${ALLOWED}`);
    expect(parseMessageContent(event.content)).toMatchObject({
      text: 'hey what is up',
      addressed: true,
      reply_context: { conversation_type: 'group', conversation_id: 'C0TEAM0001', message_id: mention.ts },
      group_context: [{ peer_id: ALLOWED, text: 'hello everyone' }],
    });

    // The answer goes into the message's thread in the channel; a reply there to it needs no mention.
    await gateway.send({ channel: 'slack:main', peer: ALLOWED, conversationType: 'group', conversation: 'C0TEAM0001', replyTo: mention.ts, text: 'I am here' });
    expect(slack.posted.at(-1)).toMatchObject({ channel: 'C0TEAM0001', thread_ts: mention.ts, text: 'I am here' });
    const botThread = slack.queueMessage({ from: ALLOWED, channel: 'C0TEAM0001', text: 'thanks', threadTs: slack.posted.at(-1)!.ts, parentUserId: slack.bot.userId });
    expect(parseMessageContent((await pushed(botThread.ts)).content)).toMatchObject({ text: 'thanks', addressed: true });
    const otherThread = slack.queueMessage({ from: ALLOWED, channel: 'C0TEAM0001', text: 'and you?', threadTs: mention.ts, parentUserId: ALLOWED });
    await waitFor(() => log().includes(`${otherThread.ts}" of group "C0TEAM0001"`), 'the reply without a mention kept as context');
    const fromBot = slack.queueMessage({ from: 'U0OTHERBOT', channel: 'C0TEAM0001', text: `<@${slack.bot.userId}> ping`, bot: true });
    await waitFor(() => log().includes(`ignored message ${fromBot.ts} `), 'the bot message ignored');
  });

  it("takes a shared file into the agent's files/ by its SHA-256, downloaded with the bot token; a voice clip as a voice file", async () => {
    const pdf = Buffer.from('%PDF-1.4 the report');
    const message = slack.queueMessage({ from: ALLOWED, text: 'see the report', files: [{ name: 'report.pdf', bytes: pdf, mimetype: 'application/pdf' }] });
    const content = parseMessageContent((await pushed(message.ts)).content);
    const sha = createHash('sha256').update(pdf).digest('hex');
    expect(content.text).toBe('see the report');
    expect(content.attachments).toEqual([{ type: 'document', path: `files/${sha}.pdf`, bytes: pdf.length, mime_type: 'application/pdf', name: 'report.pdf' }]);
    expect(readFileSync(join(home, 'agents', 'admin', 'files', `${sha}.pdf`))).toEqual(pdf);

    // The bot token goes to Slack's file hosts (here api_root's) only.
    const elsewhere = await rejection(channel.download!({ kind: 'document', ref: 'https://files.example.com/report.pdf' }, 1000));
    expect(formatError(elsewhere)).toBe('Error: the file is not on a Slack file host - ask the person to send it again');

    const clip = slack.queueMessage({ from: ALLOWED, files: [{ name: 'audio_message.webm', bytes: Buffer.from('webm!'), mimetype: 'audio/webm', voice: true }] });
    const voice = parseMessageContent((await pushed(clip.ts)).content);
    expect(voice.attachments).toEqual([expect.objectContaining({ type: 'voice', mime_type: 'audio/webm', bytes: 5 })]);
  });

  it('tells the person in the thread when a file cannot be fetched (an app without files:read gets the sign-in page), and passes nothing on', async () => {
    slack.scopes.filesRead = false;
    try {
      const before = inbox().length;
      const message = slack.queueMessage({ from: ALLOWED, text: 'here', files: [{ name: 'a.pdf', bytes: Buffer.from('%PDF'), mimetype: 'application/pdf' }] });
      const notice = await waitFor(() => slack.posted.find((posted) => posted.thread_ts === message.ts), 'the notice in the thread');
      expect(notice.text).toBe('I could not fetch that file. Please send it again.');
      expect(log()).toContain('Slack answered the download with its sign-in page: the bot token may not read files');
      expect(inbox()).toHaveLength(before);
    } finally {
      slack.scopes.filesRead = true;
    }
  });

  it('shows "is thinking…" in the thread of the message the agent works on, once while it works, and not after the answer', async () => {
    const message = slack.queueMessage({ from: OTHER, text: 'think about it' });
    await pushed(message.ts);
    const statuses = () => slack.calls.filter((call) => call.method === 'assistant.threads.setStatus' && call.args.thread_ts === message.ts);
    const target = { peerId: OTHER, conversationType: 'dm', conversationId: OTHER };
    gateway.typing('slack:main', target);
    await waitFor(() => statuses().length === 1, 'the status');
    expect(statuses()[0]!.args).toEqual({ channel_id: slack.dmChannel(OTHER), thread_ts: message.ts, status: 'is thinking…' });
    await channel.typing!(target); // the gateway asks again every few seconds: Slack keeps it shown
    await gateway.send({ channel: 'slack:main', peer: OTHER, replyTo: message.ts, text: 'thought' });
    await channel.typing!(target);
    expect(statuses()).toHaveLength(1);
  });
});

describe('slack channel: outbound', () => {
  it('sends a file the agent attached after the text, into the same thread, by the external upload', async () => {
    const message = slack.queueMessage({ from: ALLOWED, text: 'the report please' });
    await pushed(message.ts);
    const path = join(home, 'report.txt');
    writeFileSync(path, 'quarterly numbers\n');
    const result = await gateway.send({ channel: 'slack:main', peer: ALLOWED, replyTo: message.ts, text: 'Here is the report.', files: [{ kind: 'document', path, name: 'report.txt', bytes: 18 }] });
    const upload = slack.uploads.at(-1)!;
    expect(upload).toMatchObject({ name: 'report.txt', channel_id: slack.dmChannel(ALLOWED), thread_ts: message.ts });
    expect(upload.bytes.toString()).toBe('quarterly numbers\n');
    expect(result.message_ids).toEqual([slack.posted.at(-1)!.ts, upload.id]);
    expect(slack.posted.at(-1)).toMatchObject({ text: 'Here is the report.', thread_ts: message.ts });
  });

  it('streams an answer into one message in the thread, edited at most once a second, which the answer becomes', async () => {
    const message = slack.queueMessage({ from: OTHER, text: 'tell me a story' });
    await pushed(message.ts);
    const before = slack.posted.length;
    const target = { peerId: OTHER, conversationType: 'dm', conversationId: OTHER };
    const story = 'Once upon a time there was a gateway that spoke Slack.';
    for (let end = 5; end < story.length; end += 5) {
      gateway.draft('slack:main', target, message.ts, story.slice(0, end));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await waitFor(() => slack.posted[before]?.edits.length, 'an edit of the draft');
    await gateway.send({ channel: 'slack:main', peer: OTHER, replyTo: message.ts, text: story });

    const [draft, ...more] = slack.posted.slice(before);
    expect(more).toEqual([]); // the draft became the answer
    expect(draft).toMatchObject({ channel: slack.dmChannel(OTHER), thread_ts: message.ts });
    expect(draft!.edits.at(-1)!.text).toBe(story);
    // Bounded: eleven drafts asked for at once gave a first one and one edit a second later (xgw
    // starts them a second apart; Slack sees them less a round trip's jitter), then the answer.
    const times = [draft!.at, ...draft!.edits.slice(0, -1).map((edit) => edit.at)];
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(850);
    expect(draft!.edits).toHaveLength(2);
  });

  it('sends a 9,000-character answer as three messages of at most 4,000, all in the thread', async () => {
    const before = slack.posted.length;
    await gateway.send({ channel: 'slack:main', peer: ALLOWED, replyTo: '1700000000.000001', text: 'x'.repeat(9000) });
    expect(slack.posted.slice(before).map((posted) => [posted.text.length, posted.thread_ts])).toEqual([
      [4000, '1700000000.000001'],
      [4000, '1700000000.000001'],
      [1000, '1700000000.000001'],
    ]);
  });

  it('turns a Slack refusal into an upstream error saying how to fix it, and says when to retry after 429', async () => {
    slack.failNext('chat.postMessage', { status: 429, retryAfterSeconds: 7 });
    const limited = await rejection(gateway.send({ channel: 'slack:main', peer: ALLOWED, text: 'hi' }));
    expect(limited).toMatchObject({ kind: 'upstream', status: 429 });
    expect(limited.message).toContain('retry after 7 s');
    slack.failNext('chat.postMessage', { error: 'not_in_channel' });
    const outside = await rejection(gateway.send({ channel: 'slack:main', peer: ALLOWED, conversationType: 'group', conversation: 'C0ELSE0001', text: 'hi' }));
    expect(formatError(outside)).toBe('Error: Slack refused chat.postMessage (not_in_channel) - invite the bot to the channel: /invite @<bot>');
  });
});

describe('slack channel: start, status and stop', () => {
  it('refuses to be created without either token variable, saying where each token is', () => {
    expect(formatError(catching(() => createSlackChannel(config, tokens({ TEST_SLACK_BOT: undefined }))))).toBe(
      "Error: TEST_SLACK_BOT is not set - export the bot token (xoxb-…, from OAuth & Permissions in the Slack app's settings) as TEST_SLACK_BOT",
    );
    expect(formatError(catching(() => createSlackChannel(config, tokens({ TEST_SLACK_APP: undefined }))))).toBe(
      'Error: TEST_SLACK_APP is not set - export the app-level token (xapp-…, from Basic Information > App-Level Tokens, scope connections:write) as TEST_SLACK_APP',
    );
  });

  it('refuses a bot token or an app-level token Slack does not know, naming its variable without repeating it', async () => {
    const wrongBot = 'xoxb-1000000001-wrong-and-secret';
    const wrongApp = 'xapp-1-A0APP-wrong-and-secret';
    secrets.push(wrongBot, wrongApp);
    for (const [env, variable] of [
      [{ TEST_SLACK_BOT: wrongBot }, 'TEST_SLACK_BOT'],
      [{ TEST_SLACK_APP: wrongApp }, 'TEST_SLACK_APP'],
    ] as const) {
      const wrong = createSlackChannel(config, tokens(env));
      const error = await rejection(wrong.start(gateway.context()));
      expect(error.kind).toBe('invalid');
      expect(formatError(error)).toMatch(new RegExp(`^Error: Slack refused the (bot|app-level) token in ${variable} \\(.*invalid_auth\\) - check the .* export it again as ${variable}$`));
      expect(`${formatError(error)} ${JSON.stringify(wrong.status())}`).not.toMatch(/wrong-and-secret/);
      expect(wrong.status().state).toBe('error');
      await wrong.stop();
    }
  });

  it('asks Slack, without starting, whether both tokens work (theclaw doctor with xgw down)', async () => {
    expect(await createSlackChannel(config, tokens()).check!()).toBe('@theclaw-test');
    const error = await rejection(createSlackChannel(config, tokens({ TEST_SLACK_APP: 'xapp-1-A0APP-wrong-and-secret' })).check!());
    expect(formatError(error)).toMatch(/^Error: Slack refused the app-level token in TEST_SLACK_APP \(apps.connections.open: invalid_auth\) - /);
  });

  it('reports its state and bot name in status, and connects again when Slack refreshes or drops the connection, missing nothing, with backoff after a failed try and not after a revoked token', async () => {
    expect(channel.status()).toEqual({ id: 'slack:main', type: 'slack', state: 'running', detail: '@theclaw-test' });
    const opened = slack.sockets.opened;
    slack.refresh();
    await waitFor(() => slack.sockets.opened === opened + 1 && channel.status().state === 'running', 'a new connection after the refresh');
    const first = slack.queueMessage({ from: ALLOWED, text: 'after the refresh' });
    await pushed(first.ts);

    // A try that fails is tried again after a backoff (not left to the client, whose failed retry would end xgw).
    slack.failNext('apps.connections.open', { error: 'internal_error' });
    slack.drop();
    await waitFor(() => slack.sockets.opened === opened + 2, 'a new connection after the drop');
    const second = slack.queueMessage({ from: ALLOWED, text: 'after the drop' });
    await pushed(second.ts);
    await waitFor(() => channel.status().state === 'running', 'the channel running');
    expect(log()).toMatch(
      /the Socket Mode connection was lost; reconnecting[\s\S]*reconnecting failed: Slack refused apps.connections.open \(internal_error\)[\s\S]*the Socket Mode connection works again/,
    );

    // An app-level token revoked meanwhile: no more tries, the channel in error saying which token.
    slack.failNext('apps.connections.open', { error: 'token_revoked' });
    slack.refresh();
    await waitFor(() => channel.status().state === 'error' && /Slack refused the app-level token in TEST_SLACK_APP/.test(channel.status().detail ?? ''), 'the channel in error');
    expect(log()).toMatch(/not reconnecting: check the app-level token/);
  });

  it('leaves nothing behind after stop: a process that used the channel exits by itself', async () => {
    const root = packageRoot();
    const script = `
      import { startFakeSlack } from ${JSON.stringify(join(root, 'src/testing/fake-slack.ts'))};
      import { createSlackChannel } from ${JSON.stringify(join(root, 'src/xgw/channels/slack.ts'))};
      const fake = await startFakeSlack();
      const received = [];
      const config = { id: 'slack:main', type: 'slack', token_env: 'T', app_token_env: 'A', api_root: fake.apiRoot, access: 'open', allow: [], groups: { require_mention: true }, stream: true, stream_interval_seconds: 1 };
      const channel = createSlackChannel(config, { T: fake.botToken, A: fake.appToken });
      const logger = { debug() {}, info() {}, warn() {}, error() {} };
      await channel.start({ home: '/nonexistent', logger, state: undefined, admits: () => true, noticeFor: () => null,
        receive: async (message) => (received.push(message), { kind: 'accepted', agent: 'a', eventId: 1, duplicate: false }) });
      const message = fake.queueMessage({ from: 'U1', text: 'hi' });
      while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      await channel.send({ peerId: 'U1', conversationType: 'dm', conversationId: 'U1', replyTo: message.ts, text: 'hello' });
      await channel.stop();
      await fake.close();
      console.log('done', Date.now());
    `;
    await expectExitAfterDone(script);
  });
});

function catching(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}
