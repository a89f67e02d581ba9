import { readFileSync } from 'node:fs';
import {
  Client,
  DiscordAPIError,
  DiscordjsErrorCodes,
  Events,
  GatewayDispatchEvents,
  GatewayIntentBits,
  HTTPError,
  RateLimitError,
  Routes,
  type APIChannel,
  type APIMessage,
  type GatewayDispatchPayload,
  type GatewayMessageCreateDispatchData,
  type RateLimitData,
} from 'discord.js';
import { ClawError, isClawError } from '../../core/errors.js';
import { toDiscordInbound, type DiscordInbound } from './discord-inbound.js';
import { gatewayCloseError, suggestionFor } from './discord-errors.js';
import { receiveWithRetries } from './inbound-retry.js';
import { sendInParts } from './send-parts.js';
import { createTokenRedactor } from './token-redactor.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, ConversationTarget, DiscordChannelConfig, InboundFile, OutboundMessage } from '../types.js';

/** Discord's limit for the text of one message. */
export const DISCORD_TEXT_LIMIT = 2000;
/** A file that takes longer than this to download is given up (and the person told). */
const DOWNLOAD_TIMEOUT_MS = 60_000;

/** Rate-limit waits up to this long happen inside the client; longer ones fail the call, saying when to retry. */
const MAX_RATE_LIMIT_WAIT_MS = 5000;

export interface DiscordChannelOptions {
  /** Delay before a message the gateway could not take is handed to it again; doubles per failure, up to 5 s. Default: 500. */
  receiveRetryDelayMs?: number;
}

/**
 * The Discord channel: discord.js's gateway connection (which heartbeats, resumes and reconnects
 * by itself) brings messages in; replies go out through its REST client against `api_root`,
 * split at 2,000 characters. Messages are taken from the gateway's own MESSAGE_CREATE payloads,
 * so that nothing depends on what discord.js has cached (a DM channel after a restart is not).
 * The bot token is read from `env[token_env]` here and never leaves this module: every error
 * text is redacted before it is logged, shown in `status` or thrown.
 */
export function createDiscordChannel(config: DiscordChannelConfig, env: NodeJS.ProcessEnv, options: DiscordChannelOptions = {}): ChannelAdapter {
  return new DiscordChannel(config, env, options);
}

class DiscordChannel implements ChannelAdapter {
  readonly type = 'discord' as const;
  private client: Client | undefined;
  private context: ChannelContext | undefined;
  /** Aborted by `stop`: the start under way and receive retries. */
  private lifetime = new AbortController();
  private stopping = false;
  private state: ChannelStatus['state'] = 'stopped';
  private problem: string | undefined;
  private username: string | undefined;
  /** Each peer's DM channel: learnt from their messages, else opened on the first reply. */
  private readonly dmChannels = new Map<string, string>();
  private readonly redact: (text: string) => string;
  private readonly apiRoot: string;
  private readonly token: string;

  constructor(
    private readonly config: DiscordChannelConfig,
    env: NodeJS.ProcessEnv,
    private readonly options: DiscordChannelOptions,
  ) {
    const token = env[config.token_env];
    if (!token) throw new ClawError('invalid', `${config.token_env} is not set`, { suggestion: `export the bot token from the Discord developer portal (Bot > Reset Token) as ${config.token_env}` });
    this.token = token;
    this.redact = createTokenRedactor(token);
    // @discordjs/rest appends `/v10/<route>` as it is: a trailing slash would double.
    this.apiRoot = config.api_root.replace(/\/+$/, '');
  }

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    if (this.client) throw new ClawError('conflict', `${this.id} is running already`, { suggestion: 'stop it first' });
    this.context = context;
    this.stopping = false;
    this.lifetime = new AbortController();
    this.setState('starting');
    const client = new Client({
      // Message Content is privileged: without it enabled in the developer portal the gateway closes with 4014.
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
      // No retries inside the client: a repeated POST could post twice; delivery retries go
      // through the gateway's idempotency keys instead.
      rest: { api: this.apiRoot, retries: 0, rejectOnRateLimit: (limit: RateLimitData) => Math.max(limit.retryAfter, limit.timeToReset) > MAX_RATE_LIMIT_WAIT_MS },
    });
    this.client = client;
    client.on(Events.Raw, (packet: GatewayDispatchPayload) => {
      if (packet.t === GatewayDispatchEvents.MessageCreate) void this.handleMessage(client, packet.d);
    });
    const fatal = this.watchGateway(client, context);

    try {
      const login = client.login(this.token);
      login.catch(() => {}); // a login abandoned by `stop` or a fatal close settles unobserved
      await Promise.race([login, fatal, aborted(this.lifetime.signal, () => this.stoppedWhileStarting())]);
      this.username = client.user?.username;
    } catch (error) {
      await this.shutdown();
      const failure = this.toClawError(error, 'start');
      this.setState(failure.kind === 'aborted' ? 'stopped' : 'error', failure.message);
      throw failure;
    }
    this.setState('running');
    context.logger.info(`${this.id}: connected as ${this.username} via ${this.apiRoot}`);
  }

  /**
   * Follows the gateway connection in `status` and the log: discord.js resumes or reconnects by
   * itself, except after a close no retry fixes (a reset token, the Message Content intent
   * turned off), which the returned promise rejects with.
   */
  private watchGateway(client: Client, context: ChannelContext): Promise<never> {
    const fatal = new Promise<never>((_, reject) => {
      client.on(Events.ShardDisconnect, ({ code }) => {
        const error = gatewayCloseError(code, this.config.token_env);
        reject(error);
        if (this.state === 'starting' || this.stopping) return; // the start reports it
        this.setState('error', error.message);
        context.logger.error(`${this.id}: ${error.message}; not reconnecting: ${error.suggestion}`);
      });
    });
    client.on(Events.ShardReconnecting, () => {
      if (this.stopping || this.state !== 'running') return;
      this.setState('error', 'the gateway connection was lost; reconnecting');
      context.logger.warn(`${this.id}: the gateway connection was lost; reconnecting`);
    });
    const connected = () => {
      if (this.stopping || this.state !== 'error') return;
      this.setState('running');
      context.logger.info(`${this.id}: the gateway connection works again`);
    };
    client.on(Events.ShardResume, connected);
    client.on(Events.ShardReady, connected);
    client.on(Events.ShardError, (error) => context.logger.warn(`${this.id}: gateway: ${this.describe(error)}`));
    client.on(Events.Error, (error) => context.logger.error(`${this.id}: ${this.describe(error)}`));
    fatal.catch(() => {}); // a close after the start is reported here, not there
    return fatal;
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    const { signal } = options;
    const client = this.client;
    if (!client || this.stopping) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const replyTo = message.replyTo !== undefined && /^\d+$/.test(message.replyTo) ? message.replyTo : undefined;
    let target: string | undefined;
    return sendInParts(
      this.id,
      message.text,
      DISCORD_TEXT_LIMIT,
      options,
      async (chunk, index) => {
        target ??= await this.channelFor(client, message, signal);
        return (await this.post(client, target, chunk, index === 0 ? replyTo : undefined, signal)).id;
      },
      (error, partly) => this.toClawError(error, 'send', partly),
      {
        items: message.files ?? [],
        // Each file its own message, after the text: a part that failed is sent again alone.
        send: async (file) => {
          target ??= await this.channelFor(client, message, signal);
          const files = [{ name: file.name, data: readFileSync(file.path) }];
          const body = { content: '', allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: file.name }] };
          return ((await client.rest.post(Routes.channelMessages(target), { body, files, ...(signal && { signal }) })) as APIMessage).id;
        },
      },
    );
  }

  /** An attachment's bytes, from Discord's CDN (its URL needs no token), within `maxBytes`. */
  async download(file: InboundFile, maxBytes: number): Promise<Buffer> {
    const tooLarge = () => new ClawError('usage', `the file is larger than ${maxBytes} bytes`, { suggestion: 'raise media.max_bytes in the xgw config' });
    if ((file.bytes ?? 0) > maxBytes) throw tooLarge();
    let response: Response;
    try {
      response = await fetch(file.ref, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS) });
    } catch (error) {
      throw new ClawError('upstream', `downloading a file failed: ${this.describe(error)}`, { suggestion: 'ask the person to send it again' });
    }
    if (!response.ok) throw new ClawError('upstream', `downloading a file failed: HTTP ${response.status}`, { suggestion: 'ask the person to send it again', status: response.status });
    const bytes = Buffer.from(await response.arrayBuffer());
    if (bytes.length > maxBytes) throw tooLarge();
    return bytes;
  }

  /** Discord shows "typing…" for 10 s; the gateway asks again while the turn runs. */
  async typing(target: ConversationTarget): Promise<void> {
    const client = this.client;
    if (!client || this.stopping) return;
    try {
      const channel = await this.channelFor(client, target, undefined);
      await client.rest.post(Routes.channelTyping(channel));
    } catch (error) {
      throw this.toClawError(error, 'typing');
    }
  }

  status(): ChannelStatus {
    const detail = [this.username, this.problem].filter(Boolean).join(': ');
    return { id: this.id, type: this.type, state: this.state, ...(detail && { detail }) };
  }

  async stop(): Promise<void> {
    if (this.client) {
      await this.shutdown();
      this.context?.logger.info(`${this.id}: stopped`);
    }
    this.setState('stopped');
  }

  private async shutdown(): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.stopping = true;
    this.lifetime.abort();
    this.client = undefined;
    await client.destroy();
  }

  /** The Discord channel a reply goes to: a DM's is the peer's DM channel, opened when not known. */
  private async channelFor(client: Client, message: ConversationTarget, signal: AbortSignal | undefined): Promise<string> {
    if (message.conversationType !== 'dm') return message.conversationId;
    const known = this.dmChannels.get(message.peerId);
    if (known) return known;
    const channel = (await client.rest.post(Routes.userChannels(), { body: { recipient_id: message.peerId }, ...(signal && { signal }) })) as APIChannel;
    this.dmChannels.set(message.peerId, channel.id);
    return channel.id;
  }

  private async post(client: Client, channelId: string, content: string, replyTo: string | undefined, signal?: AbortSignal): Promise<APIMessage> {
    const body = {
      content,
      // The agent's text pings no one (no @everyone for a whole server); a reply still notifies the person answered.
      allowed_mentions: { parse: [], replied_user: true },
      ...(replyTo !== undefined && { message_reference: { message_id: replyTo, fail_if_not_exists: false } }),
    };
    return (await client.rest.post(Routes.channelMessages(channelId), { body, ...(signal && { signal }) })) as APIMessage;
  }

  private async handleMessage(client: Client, data: GatewayMessageCreateDispatchData): Promise<void> {
    const context = this.context!;
    const me = client.user;
    const inbound = me ? toDiscordInbound(data, this.config, me) : null;
    if (!inbound) {
      context.logger.debug(`${this.id}: ignored message ${data.id} in channel ${data.channel_id}`);
      return;
    }
    const { message } = inbound;
    if (message.conversationType === 'dm') this.dmChannels.set(message.peerId, inbound.channelId);
    // Discord does not deliver a message again: failures that may pass are retried here.
    const outcome = await receiveWithRetries(context, message, {
      channelId: this.id,
      describe: (error) => this.describe(error),
      signal: this.lifetime.signal,
      initialDelayMs: this.options.receiveRetryDelayMs ?? 500,
    });
    if (!outcome) return;
    const notice = context.noticeFor(outcome);
    if (notice) await this.tell(client, inbound, notice, outcome.kind);
  }

  /** Answers the message with a notice of the channel's own; a failure is logged. */
  private async tell(client: Client, inbound: DiscordInbound, notice: string, about: string): Promise<void> {
    try {
      await this.post(client, inbound.channelId, notice, inbound.message.messageId);
    } catch (error) {
      this.context?.logger.warn(`${this.id}: could not tell ${JSON.stringify(inbound.message.peerId)} about ${about}: ${this.describe(error)}`);
    }
  }

  private setState(state: ChannelStatus['state'], problem?: string): void {
    this.state = state;
    this.problem = problem === undefined ? undefined : this.redact(problem);
  }

  private stoppedWhileStarting(): ClawError {
    return new ClawError('aborted', `${this.id} was stopped while starting`, { suggestion: 'start it again with: xgw start' });
  }

  /** An error as one line without the token. */
  private describe(error: unknown): string {
    if (error instanceof DiscordAPIError) return this.redact(`${error.status}: ${error.message}`);
    const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return this.redact((error instanceof Error ? error.message : String(error)) + cause);
  }

  /** The ClawError for a failed call; a cause that may hold the token is not kept. */
  private toClawError(error: unknown, what: string, partly = ''): ClawError {
    if (isClawError(error)) return error;
    if (error instanceof Error && 'code' in error && error.code === DiscordjsErrorCodes.TokenInvalid) {
      return new ClawError('invalid', `Discord refused the bot token in ${this.config.token_env} (401: ${error.message})`, {
        status: 401,
        suggestion: `check the token in the Discord developer portal (Bot > Reset Token) and export it again as ${this.config.token_env}`,
      });
    }
    if (error instanceof RateLimitError) {
      const seconds = Math.ceil(Math.max(error.retryAfter, error.timeToReset) / 1000);
      return new ClawError('upstream', `Discord rate-limits the bot: retry after ${seconds} s (${error.method.toUpperCase()} ${error.route}: 429)${partly}`, {
        status: 429,
        suggestion: suggestionFor(429, seconds),
      });
    }
    if (error instanceof DiscordAPIError || error instanceof HTTPError) {
      const route = new URL(error.url).pathname;
      return new ClawError('upstream', `Discord refused ${error.method.toUpperCase()} ${route} (${this.describe(error)})${partly}`, {
        status: error.status,
        suggestion: suggestionFor(error.status),
      });
    }
    return new ClawError('upstream', `cannot reach Discord at ${this.apiRoot} (${what}: ${this.describe(error)})${partly}`, { suggestion: 'check the network and api_root; retry later' });
  }
}

/** A promise that rejects with `error()` once `signal` aborts. */
function aborted(signal: AbortSignal, error: () => Error): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(error());
    else signal.addEventListener('abort', () => reject(error()), { once: true });
  });
}
