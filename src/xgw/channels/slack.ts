// Over 400 lines: one adapter class around one bolt App (start, send, drafts, status, downloads, check); its message parsing, connection and errors are apart (slack-inbound.ts, slack-connection.ts, slack-errors.ts).
import { readFileSync } from 'node:fs';
import { App, SocketModeReceiver, webApi } from '@slack/bolt';
import { ClawError } from '../../core/errors.js';
import { receiveWithRetries } from './inbound-retry.js';
import { sendInParts } from './send-parts.js';
import { toSlackError } from './slack-errors.js';
import { parseSlackMessageRef, SlackMessageEventSchema, toSlackInbound, type SlackInbound } from './slack-inbound.js';
import { createSlackLogger, SlackConnection, unlessStopped } from './slack-connection.js';
import { toSlackText } from './slack-text.js';
import { createTokenRedactor } from './token-redactor.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, ConversationTarget, InboundFile, OutboundMessage, SlackChannelConfig } from '../types.js';

/**
 * Slack's advice for the text of one message (it takes up to 40,000 characters, but cuts long
 * ones into "Show more" and truncates past that).
 */
export const SLACK_TEXT_LIMIT = 4000;
/** A file that takes longer than this to download is given up (and the person told). */
const DOWNLOAD_TIMEOUT_MS = 60_000;
/** A Web API call that takes longer fails (the client's own default is to wait forever). */
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How often the "is thinking…" status of a thread is set again while a turn runs: Slack keeps
 * it until the bot posts in the thread, or for two minutes.
 */
const STATUS_RENEW_MS = 60_000;
/** The status a thread shows while the agent works on its answer. */
const WORKING_STATUS = 'is thinking…';

export interface SlackChannelOptions {
  /** Delay before a message the gateway could not take is handed to it again; doubles per failure, up to 5 s. Default: 500. */
  receiveRetryDelayMs?: number;
  /** Delay before a lost Socket Mode connection is opened again after a failed try; doubles per failure, up to 1 minute. Default: 1000. */
  reconnectDelayMs?: number;
  /** How long the connection may go without an answer to its pings before it counts as lost. Default: 5000. */
  pingTimeoutMs?: number;
}

/** The thread of the newest message a conversation's agent is answering: where "is thinking…" shows. */
interface Working {
  channel: string;
  threadTs: string;
  statusAt: number;
}

/**
 * The Slack channel: @slack/bolt in Socket Mode (a WebSocket that the app opens, so no public
 * URL) brings message events in; answers go out through the Web API against `api_root`, each in
 * the thread of the message it answers, split at 4,000 characters, streamed by editing one
 * message (chat.update), files by Slack's external upload. The bot token (`token_env`) and the
 * app-level token (`app_token_env`) are read here and never leave this module: every error
 * text is redacted before it is logged, shown in `status` or thrown.
 */
export function createSlackChannel(config: SlackChannelConfig, env: NodeJS.ProcessEnv, options: SlackChannelOptions = {}): ChannelAdapter {
  return new SlackChannel(config, env, options);
}

class SlackChannel implements ChannelAdapter {
  readonly type = 'slack' as const;
  private app: App | undefined;
  private connection: SlackConnection | undefined;
  private context: ChannelContext | undefined;
  /** Aborted by `stop`: the start under way, reconnect delays and receive retries. */
  private lifetime = new AbortController();
  private stopping = false;
  private state: ChannelStatus['state'] = 'stopped';
  private problem: string | undefined;
  private me: { userId: string; botId: string; name: string } | undefined;
  /** Each peer's DM channel (`D…`): learnt from their messages, else opened on the first reply. */
  private readonly dmChannels = new Map<string, string>();
  /** By conversation: the thread whose answer the agent works on (see `typing`). */
  private readonly working = new Map<string, Working>();
  /** Set once the workspace refused the thread status (an older app without the scope): typing is then not asked for again. */
  private statusRefused = false;
  private readonly redact: (text: string) => string;
  private readonly clientOptions: webApi.WebClientOptions;
  private readonly token: string;
  private readonly appToken: string;

  constructor(
    private readonly config: SlackChannelConfig,
    env: NodeJS.ProcessEnv,
    private readonly options: SlackChannelOptions,
  ) {
    const token = env[config.token_env];
    if (!token)
      throw new ClawError('invalid', `${config.token_env} is not set`, { suggestion: `export the bot token (xoxb-…, from OAuth & Permissions in the Slack app's settings) as ${config.token_env}` });
    const appToken = env[config.app_token_env];
    if (!appToken) {
      throw new ClawError('invalid', `${config.app_token_env} is not set`, {
        suggestion: `export the app-level token (xapp-…, from Basic Information > App-Level Tokens, scope connections:write) as ${config.app_token_env}`,
      });
    }
    this.token = token;
    this.appToken = appToken;
    this.redact = createTokenRedactor(token, appToken);
    this.clientOptions = {
      slackApiUrl: config.api_root.endsWith('/') ? config.api_root : `${config.api_root}/`,
      logger: createSlackLogger(() => this.context?.logger, this.redact),
      // No retries inside the client: a repeated chat.postMessage could post twice; delivery
      // retries go through the gateway's idempotency keys instead. A 429 fails the call, saying when.
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: REQUEST_TIMEOUT_MS,
    };
  }

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    if (this.app) throw new ClawError('conflict', `${this.id} is running already`, { suggestion: 'stop it first' });
    this.context = context;
    this.stopping = false;
    this.lifetime = new AbortController();
    this.setState('starting');
    try {
      const me = await unlessStopped(this.whoAmI(new webApi.WebClient(this.token, this.clientOptions)), this.lifetime.signal);
      this.me = me;
      const receiver = new SocketModeReceiver({
        appToken: this.appToken,
        logger: this.clientOptions.logger!,
        // Reconnecting is ours (SlackConnection): the client's own leaves rejections unhandled when it fails.
        autoReconnectEnabled: false,
        clientPingTimeout: this.options.pingTimeoutMs ?? 5000,
        installerOptions: { clientOptions: { ...this.clientOptions, retryConfig: { retries: 0 } } },
      });
      const app = new App({
        token: this.token,
        botId: me.botId,
        botUserId: me.userId,
        tokenVerificationEnabled: false,
        receiver,
        logger: this.clientOptions.logger!,
        clientOptions: this.clientOptions,
      });
      app.event('message', async ({ event }) => this.handleEvent(event));
      app.error(async (error) => context.logger.error(`${this.id}: ${this.describe(error)}`));
      this.app = app;
      this.connection = new SlackConnection(receiver.client, {
        signal: this.lifetime.signal,
        reconnectDelayMs: this.options.reconnectDelayMs ?? 1000,
        lost: () => {
          this.setState('error', 'the Socket Mode connection was lost; reconnecting');
          context.logger.warn(`${this.id}: the Socket Mode connection was lost; reconnecting`);
        },
        back: () => {
          this.setState('running');
          context.logger.info(`${this.id}: the Socket Mode connection works again`);
        },
        failed: (error) => {
          const failure = this.toClawError(error, 'apps.connections.open');
          const final = failure.kind === 'invalid';
          if (final) this.setState('error', failure.message);
          context.logger[final ? 'error' : 'warn'](`${this.id}: reconnecting failed: ${failure.message}${final ? `; not reconnecting: ${failure.suggestion}` : ''}`);
          return !final;
        },
      });
      await this.connection.open();
    } catch (error) {
      await this.shutdown();
      const failure = this.toClawError(error, 'apps.connections.open');
      this.setState(failure.kind === 'aborted' ? 'stopped' : 'error', failure.message);
      throw failure;
    }
    this.setState('running');
    context.logger.info(`${this.id}: connected as @${this.me?.name} via ${this.clientOptions.slackApiUrl}`);
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    const client = this.client();
    const thread = parseSlackMessageRef(message.replyTo)?.threadTs;
    let channel: string | undefined;
    const result = await sendInParts(
      this.id,
      message.text,
      SLACK_TEXT_LIMIT,
      options,
      async (chunk, index) => {
        channel ??= await this.channelFor(client, message);
        if (index === 0 && options.draft) {
          // The message that showed the answer as it was written becomes its first part.
          await this.call('chat.update', () => client.chat.update({ channel: channel!, ts: options.draft!, text: toSlackText(chunk) }));
          return options.draft;
        }
        return this.post(client, channel, chunk, thread);
      },
      (error, partly) => this.toClawError(error, 'chat.postMessage', partly),
      {
        items: message.files ?? [],
        send: async (file) => {
          channel ??= await this.channelFor(client, message);
          const uploaded = await this.call('files.uploadV2', () =>
            client.filesUploadV2({ ...(thread ? { channel_id: channel!, thread_ts: thread } : { channel_id: channel! }), file: readFileSync(file.path), filename: file.name, title: file.name }),
          );
          const id = (uploaded.files as { files?: { id?: string }[] }[])[0]?.files?.[0]?.id;
          if (!id) throw new ClawError('upstream', `Slack did not say which file ${JSON.stringify(file.name)} became`, { suggestion: 'see the conversation; retry later' });
          return id;
        },
      },
    );
    // Answered: that thread no longer shows the agent at work.
    if (thread !== undefined && this.working.get(conversationKey(message))?.threadTs === thread) this.working.delete(conversationKey(message));
    return result;
  }

  get draftIntervalMs(): number {
    return this.config.stream_interval_seconds * 1000;
  }

  /**
   * The answer as it is written: one message in the thread (its first 4,000 characters), edited
   * in place; the answer's first part replaces it (see `send`). Withdrawn: deleted.
   */
  async draft(target: ConversationTarget, replyTo: string, text: string, draft: string | undefined): Promise<string> {
    const client = this.client();
    const channel = await this.channelFor(client, target);
    if (text === '') {
      if (draft !== undefined) await this.call('chat.delete', () => client.chat.delete({ channel, ts: draft }));
      return '';
    }
    const shown = text.slice(0, SLACK_TEXT_LIMIT);
    if (draft === undefined) return this.post(client, channel, shown, parseSlackMessageRef(replyTo)?.threadTs);
    await this.call('chat.update', () => client.chat.update({ channel, ts: draft, text: toSlackText(shown) }));
    return draft;
  }

  /**
   * "is thinking…" under the thread of the message the agent answers (assistant.threads.setStatus,
   * which Slack clears when the bot posts there). Set once, and again only after STATUS_RENEW_MS:
   * the gateway asks every few seconds.
   */
  async typing(target: ConversationTarget): Promise<void> {
    const working = this.working.get(conversationKey(target));
    if (!this.app || this.stopping || !working || this.statusRefused || Date.now() - working.statusAt < STATUS_RENEW_MS) return;
    working.statusAt = Date.now();
    try {
      await this.app.client.assistant.threads.setStatus({ channel_id: working.channel, thread_ts: working.threadTs, status: WORKING_STATUS });
    } catch (error) {
      if ((error as { code?: string }).code === webApi.ErrorCode.PlatformError) {
        this.statusRefused = true;
        this.context?.logger.info(`${this.id}: no "is thinking…" status in threads: ${this.toClawError(error, 'assistant.threads.setStatus').message}`);
      }
      throw this.toClawError(error, 'assistant.threads.setStatus');
    }
  }

  /**
   * A file a person shared, from its `url_private_download` with the bot token, which is sent to
   * Slack's own file host (or api_root's) only. Slack answers a request it does not authorize
   * with its sign-in page rather than an error: that is refused as such.
   */
  async download(file: InboundFile, maxBytes: number): Promise<Buffer> {
    const tooLarge = () => new ClawError('usage', `the file is larger than ${maxBytes} bytes`, { suggestion: 'raise media.max_bytes in the xgw config' });
    if ((file.bytes ?? 0) > maxBytes) throw tooLarge();
    const url = URL.canParse(file.ref) ? new URL(file.ref) : undefined;
    if (!url || !this.isSlackFileHost(url)) throw new ClawError('upstream', 'the file is not on a Slack file host', { suggestion: 'ask the person to send it again' });
    let response: Response;
    try {
      response = await fetch(url, { headers: { authorization: `Bearer ${this.token}` }, signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS) });
    } catch (error) {
      throw new ClawError('upstream', `downloading a file failed: ${this.describe(error)}`, { suggestion: 'ask the person to send it again' });
    }
    if (!response.ok) throw new ClawError('upstream', `downloading a file failed: HTTP ${response.status}`, { suggestion: 'ask the person to send it again', status: response.status });
    if (/^text\/html/.test(response.headers.get('content-type') ?? '') && !file.mime_type?.startsWith('text/html')) {
      await response.body?.cancel();
      throw new ClawError('upstream', 'Slack answered the download with its sign-in page: the bot token may not read files', {
        suggestion: "add the files:read scope under OAuth & Permissions in the Slack app's settings, reinstall the app, and export the new bot token",
      });
    }
    const bytes = Buffer.from(await response.arrayBuffer());
    if (bytes.length > maxBytes) throw tooLarge();
    return bytes;
  }

  status(): ChannelStatus {
    const who = this.me ? `@${this.me.name}` : undefined;
    const detail = [who, this.problem].filter(Boolean).join(': ');
    return { id: this.id, type: this.type, state: this.state, ...(detail && { detail }) };
  }

  /** The tokens, as `start` would use them: auth.test with the bot token, apps.connections.open with the app token. */
  async check(): Promise<string> {
    const me = await this.whoAmI(new webApi.WebClient(this.token, this.clientOptions));
    const app = new webApi.WebClient(undefined, { ...this.clientOptions, headers: { authorization: `Bearer ${this.appToken}` } });
    await this.call('apps.connections.open', () => app.apps.connections.open({}));
    return `@${me.name}`;
  }

  async stop(): Promise<void> {
    const running = this.app !== undefined;
    await this.shutdown(); // also a start under way
    if (running) this.context?.logger.info(`${this.id}: stopped`);
    this.setState('stopped');
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.lifetime.abort();
    const connection = this.connection;
    this.app = undefined;
    this.connection = undefined;
    this.working.clear();
    await connection?.close();
  }

  private client(): webApi.WebClient {
    if (!this.app || this.stopping) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    return this.app.client;
  }

  /** auth.test: who the bot is; a token Slack refuses is an `invalid` error naming its variable. */
  private async whoAmI(client: webApi.WebClient): Promise<{ userId: string; botId: string; name: string }> {
    const me = await this.call('auth.test', () => client.auth.test());
    if (!me.user_id || !me.bot_id) {
      throw new ClawError('invalid', `the token in ${this.config.token_env} is not a bot token (auth.test names no bot)`, {
        suggestion: `export the Bot User OAuth Token (xoxb-…) as ${this.config.token_env}`,
      });
    }
    return { userId: me.user_id, botId: me.bot_id, name: me.user ?? me.user_id };
  }

  /** The Slack conversation a reply goes to: a DM's is the peer's DM channel, opened when not known. */
  private async channelFor(client: webApi.WebClient, target: ConversationTarget): Promise<string> {
    if (target.conversationType !== 'dm') return target.conversationId;
    const known = this.dmChannels.get(target.peerId);
    if (known) return known;
    const opened = await this.call('conversations.open', () => client.conversations.open({ users: target.peerId }));
    const id = opened.channel?.id;
    if (!id) throw new ClawError('upstream', 'Slack opened no DM channel', { suggestion: 'retry later' });
    this.dmChannels.set(target.peerId, id);
    return id;
  }

  /** Posts a text as it was written (see toSlackText), in `thread` where there is one; its `ts`. */
  private async post(client: webApi.WebClient, channel: string, text: string, thread: string | undefined): Promise<string> {
    const posted = await this.call('chat.postMessage', () => client.chat.postMessage({ channel, text: toSlackText(text), ...(thread && { thread_ts: thread }) }));
    if (!posted.ts) throw new ClawError('upstream', 'Slack did not say which message it posted', { suggestion: 'see the conversation; retry later' });
    return posted.ts;
  }

  private async handleEvent(event: unknown): Promise<void> {
    const context = this.context!;
    const parsed = SlackMessageEventSchema.safeParse(event);
    const inbound = parsed.success && this.me ? toSlackInbound(parsed.data, this.config, this.me) : null;
    if (!inbound) {
      const { ts, channel } = (event ?? {}) as { ts?: unknown; channel?: unknown };
      context.logger.debug(`${this.id}: ignored message ${String(ts)} in ${String(channel)}`);
      return;
    }
    const { message } = inbound;
    if (message.conversationType === 'dm') this.dmChannels.set(message.peerId, inbound.channelId);
    const key = conversationKey(message);
    this.working.set(key, { channel: inbound.channelId, threadTs: inbound.threadTs, statusAt: 0 });
    // Slack gets its acknowledgement before this (bolt sends it first): failures that may pass are retried here.
    const outcome = await receiveWithRetries(context, message, {
      channelId: this.id,
      describe: (error) => this.describe(error),
      signal: this.lifetime.signal,
      initialDelayMs: this.options.receiveRetryDelayMs ?? 500,
    });
    if (outcome?.kind !== 'accepted' && this.working.get(key)?.threadTs === inbound.threadTs) this.working.delete(key);
    const notice = outcome && context.noticeFor(outcome);
    if (notice) await this.tell(inbound, notice, outcome.kind);
  }

  /** Answers the message in its thread with a notice of the channel's own; a failure is logged. */
  private async tell(inbound: SlackInbound, notice: string, about: string): Promise<void> {
    try {
      await this.post(this.client(), inbound.channelId, notice, inbound.threadTs);
    } catch (error) {
      this.context?.logger.warn(`${this.id}: could not tell ${JSON.stringify(inbound.message.peerId)} about ${about}: ${this.describe(error)}`);
    }
  }

  /** Slack's file host, or (for a test server) api_root's. */
  private isSlackFileHost(url: URL): boolean {
    const api = new URL(this.config.api_root);
    if (url.origin === api.origin) return true;
    return url.protocol === 'https:' && api.hostname === 'slack.com' && (url.hostname === 'files.slack.com' || url.hostname.endsWith('.slack.com'));
  }

  /** One Web API call, its failure a ClawError that names the method. */
  private async call<T>(method: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw this.toClawError(error, method);
    }
  }

  private setState(state: ChannelStatus['state'], problem?: string): void {
    this.state = state;
    this.problem = problem === undefined ? undefined : this.redact(problem);
  }

  /** An error as one line without the tokens. */
  private describe(error: unknown): string {
    const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return this.redact((error instanceof Error ? error.message : String(error)) + cause);
  }

  /** The ClawError for a failed call of `method`; `partly` says what was sent before. */
  private toClawError(error: unknown, method: string, partly = ''): ClawError {
    return toSlackError(error, method, { tokenEnv: this.config.token_env, appTokenEnv: this.config.app_token_env, apiUrl: this.clientOptions.slackApiUrl!, describe: (e) => this.describe(e) }, partly);
  }
}

/** A conversation of the channel, as `working` keys it. */
function conversationKey(target: ConversationTarget): string {
  return `${target.conversationType}\u0000${target.conversationId}`;
}
