// Over 400 lines: one adapter class around one grammY Bot (poll, send, drafts, downloads, check); its message parsing and error hints are apart (telegram-inbound.ts, telegram-errors.ts).
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Bot, GrammyError, HttpError, InputFile } from 'grammy';
import type { Message, UserFromGetMe } from 'grammy/types';
import { ClawError, isClawError } from '../../core/errors.js';
import { backoffMs, sleep } from '../../core/retry.js';
import { settleWithin } from '../settle.js';
import { receiveWithRetries } from './inbound-retry.js';
import { sendInParts } from './send-parts.js';
import { hintFor, suggestionFor } from './telegram-errors.js';
import { createTokenRedactor } from './token-redactor.js';
import { toInboundMessage } from './telegram-inbound.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, ConversationTarget, InboundFile, InboundMessage, InboundOutcome, OutboundMessage, TelegramChannelConfig } from '../types.js';

/** Telegram's limit for the text of one message, in UTF-16 code units. */
export const TELEGRAM_TEXT_LIMIT = 4096;

export interface TelegramChannelOptions {
  /** How long each getUpdates call waits for news. Default: 30 (seconds). */
  pollTimeoutSeconds?: number;
  /** Delay before a failed poll is retried (or polling restarted); doubles per failure. Default: 1000 (1 s). */
  retryDelayMs?: number;
  /** Cap of that delay. Default: 60000 (1 minute). */
  maxRetryDelayMs?: number;
  /** Delay before a message the gateway could not take is handed to it again; doubles per failure, up to 5 s. Default: 500. */
  receiveRetryDelayMs?: number;
}

/**
 * grammY's Node build types its signals as the `abort-controller` polyfill's; Node's own
 * AbortSignal works the same at run time (grammY only adds and removes an abort listener).
 */
type GrammySignal = Parameters<Bot['api']['getMe']>[0];
const asGrammySignal = (signal: AbortSignal | undefined) => signal as unknown as GrammySignal;

/** How long `stop` waits for grammY to end its poll before it cuts the connections. */
const STOP_GRACE_MS = 5000;
/** How long `check`'s one getMe may take. */
const CHECK_TIMEOUT_SECONDS = 10;
/** A file that takes longer than this to download is given up (and the person told). */
const DOWNLOAD_TIMEOUT_MS = 60_000;

/**
 * The Telegram channel: long polling through grammY against `api_root`, text messages in, text
 * replies out (split at 4,096 code units). The bot token is read from `env[token_env]` here (an
 * `invalid` error when it is not set) and never leaves this module: grammY's network errors carry the request URL, which holds the
 * token, so every error text is redacted before it is logged, shown in `status` or thrown.
 */
export function createTelegramChannel(config: TelegramChannelConfig, env: NodeJS.ProcessEnv, options: TelegramChannelOptions = {}): ChannelAdapter {
  return new TelegramChannel(config, env, options);
}

class TelegramChannel implements ChannelAdapter {
  readonly type = 'telegram' as const;
  private bot: Bot | undefined;
  private agent: HttpAgent | undefined;
  private context: ChannelContext | undefined;
  /** Aborted by `stop`: the start-up call, restart delays and receive retries. */
  private lifetime = new AbortController();
  private stopping = false;
  /** grammY's polling loop (`bot.start`), settled. */
  private polling: Promise<void> | undefined;
  private failures = 0;
  private state: ChannelStatus['state'] = 'stopped';
  private problem: string | undefined;
  private username: string | undefined;
  private redact: (text: string) => string = (text) => text;
  private readonly apiRoot: string;
  private readonly pollTimeoutSeconds: number;
  private readonly token: string;

  constructor(
    private readonly config: TelegramChannelConfig,
    env: NodeJS.ProcessEnv,
    private readonly options: TelegramChannelOptions,
  ) {
    const token = env[config.token_env];
    if (!token) throw new ClawError('invalid', `${config.token_env} is not set`, { suggestion: `export the bot token from @BotFather as ${config.token_env}` });
    this.token = token;
    // grammY refuses a root with a trailing slash; a URL from YAML may well have one.
    this.apiRoot = config.api_root.replace(/\/+$/, '');
    this.pollTimeoutSeconds = options.pollTimeoutSeconds ?? 30;
  }

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    if (this.bot) throw new ClawError('conflict', `${this.id} is running already`, { suggestion: 'stop it first' });
    const token = this.token;
    this.context = context;
    this.redact = createTokenRedactor(token);
    this.stopping = false;
    this.failures = 0;
    this.lifetime = new AbortController();
    this.setState('starting');
    // An agent of our own, so that `stop` can close grammY's keep-alive connections.
    this.agent = this.apiRoot.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    const bot = new Bot(token, {
      client: { apiRoot: this.apiRoot, timeoutSeconds: this.pollTimeoutSeconds + 30, baseFetchConfig: { agent: this.agent } },
    });
    this.bot = bot;
    bot.api.config.use(async (prev, method, payload, signal) => {
      if (method !== 'getUpdates') return prev(method, payload, signal);
      return this.pollWithRetries(
        () => prev(method, payload, signal),
        () => signal?.aborted === true,
      );
    });
    bot.on('message', (ctx) => this.handleMessage(bot, ctx.message));
    // Without a handler grammY prints to stderr and stops polling on the first failed update.
    bot.catch((error) => context.logger.error(`${this.id}: handling update ${error.ctx.update.update_id} failed: ${this.describe(error.error)}`));

    try {
      bot.botInfo = await this.getMe(bot);
      this.username = bot.botInfo.username;
      if (this.stopping) throw this.stoppedWhileStarting();
      await new Promise<void>((resolve, reject) => this.poll(bot, { resolve, reject }));
    } catch (error) {
      await this.shutdown();
      const failure = this.toClawError(error, 'start');
      this.setState(failure.kind === 'aborted' ? 'stopped' : 'error', failure.message);
      throw failure;
    }
    context.logger.info(`${this.id}: polling as @${this.username} via ${this.apiRoot}`);
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    const { signal } = options;
    const bot = this.bot;
    if (!bot || this.stopping) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const chatId = toChatId(message.conversationId);
    const replyTo = message.replyTo !== undefined && /^\d+$/.test(message.replyTo) ? Number(message.replyTo) : undefined;
    return sendInParts(
      this.id,
      message.text,
      TELEGRAM_TEXT_LIMIT,
      options,
      async (chunk, index) => {
        if (index === 0 && options.draft) {
          // The message that showed the answer as it was written becomes its first part.
          await this.edit(chatId, Number(options.draft), chunk, signal);
          return options.draft;
        }
        const other = index === 0 && replyTo !== undefined ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {};
        const sent = await bot.api.sendMessage(chatId, chunk, other, asGrammySignal(signal));
        return String(sent.message_id);
      },
      (error, partly) => this.toClawError(error, 'sendMessage', partly),
      {
        items: message.files ?? [],
        // A photo as a photo (Telegram shows it), anything else as a document.
        send: async (file) => {
          const input = new InputFile(file.path, file.name);
          const sent = file.kind === 'image' ? await bot.api.sendPhoto(chatId, input, {}, asGrammySignal(signal)) : await bot.api.sendDocument(chatId, input, {}, asGrammySignal(signal));
          return String(sent.message_id);
        },
      },
    );
  }

  get draftIntervalMs(): number {
    return this.config.stream_interval_seconds * 1000;
  }

  /**
   * The answer as it is written: one message (its first 4,096 code units), edited in place; the
   * answer's first part replaces it (see `send`). Withdrawn: deleted.
   */
  async draft(target: ConversationTarget, replyTo: string, text: string, draft: string | undefined): Promise<string> {
    const bot = this.bot;
    if (!bot || this.stopping) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const chatId = toChatId(target.conversationId);
    try {
      if (text === '') {
        if (draft !== undefined) await bot.api.deleteMessage(chatId, Number(draft));
        return '';
      }
      const shown = text.slice(0, TELEGRAM_TEXT_LIMIT);
      if (draft !== undefined) {
        await this.edit(chatId, Number(draft), shown);
        return draft;
      }
      const other = /^\d+$/.test(replyTo) ? { reply_parameters: { message_id: Number(replyTo), allow_sending_without_reply: true } } : {};
      return String((await bot.api.sendMessage(chatId, shown, other)).message_id);
    } catch (error) {
      throw this.toClawError(error, text === '' ? 'deleteMessage' : draft === undefined ? 'sendMessage' : 'editMessageText');
    }
  }

  /** Edits a message's text; the same text again is no change, not a failure. */
  private async edit(chatId: number | string, messageId: number, text: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.bot!.api.editMessageText(chatId, messageId, text, undefined, asGrammySignal(signal));
    } catch (error) {
      if (error instanceof GrammyError && /message is not modified/i.test(error.description)) return;
      throw error;
    }
  }

  /**
   * A file a person sent, through getFile and the Bot API's file URL (which holds the token: it
   * never leaves this module, like every other URL of the API).
   */
  async download(file: InboundFile, maxBytes: number): Promise<Buffer> {
    const bot = this.bot;
    if (!bot || this.stopping) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    const tooLarge = () => new ClawError('usage', `the file is larger than ${maxBytes} bytes`, { suggestion: 'raise media.max_bytes in the xgw config' });
    let info: Awaited<ReturnType<Bot['api']['getFile']>>;
    try {
      info = await bot.api.getFile(file.ref);
    } catch (error) {
      throw this.toClawError(error, 'getFile');
    }
    if ((info.file_size ?? 0) > maxBytes) throw tooLarge();
    if (!info.file_path) throw new ClawError('upstream', 'Telegram gave no path to download the file from', { suggestion: 'ask the person to send it again' });
    let response: Response;
    try {
      response = await fetch(`${this.apiRoot}/file/bot${this.token}/${info.file_path}`, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS) });
    } catch (error) {
      throw new ClawError('upstream', `downloading a file failed: ${this.redact(error instanceof Error ? error.message : String(error))}`, { suggestion: 'ask the person to send it again' });
    }
    if (!response.ok) throw new ClawError('upstream', `downloading a file failed: HTTP ${response.status}`, { suggestion: 'ask the person to send it again', status: response.status });
    const bytes = Buffer.from(await response.arrayBuffer());
    if (bytes.length > maxBytes) throw tooLarge();
    return bytes;
  }

  async typing(target: ConversationTarget): Promise<void> {
    if (!this.bot || this.stopping) return;
    try {
      await this.bot.api.sendChatAction(toChatId(target.conversationId), 'typing');
    } catch (error) {
      throw this.toClawError(error, 'sendChatAction');
    }
  }

  status(): ChannelStatus {
    const who = this.username ? `@${this.username}` : undefined;
    const detail = [who, this.problem].filter(Boolean).join(': ');
    return { id: this.id, type: this.type, state: this.state, ...(detail && { detail }) };
  }

  async stop(): Promise<void> {
    if (this.bot) {
      await this.shutdown();
      this.context?.logger.info(`${this.id}: stopped`);
    }
    this.setState('stopped');
  }

  /** Ends polling (waiting for it, within a grace period), then every connection. */
  private async shutdown(): Promise<void> {
    const bot = this.bot;
    if (!bot) return;
    this.stopping = true;
    // `bot.stop` aborts the pending poll and confirms the last offset with one more short call;
    // it marks polling as ended before our retry delay (below) is cut short, so the loop ends.
    const stopped = bot.isRunning() ? bot.stop() : undefined;
    this.lifetime.abort();
    await settleWithin(Promise.allSettled([stopped, this.polling]), STOP_GRACE_MS);
    this.agent?.destroy();
    this.agent = undefined;
    this.bot = undefined;
    this.polling = undefined;
  }

  /** One getMe, as `start` begins with: the bot's @name, or the error `start` would fail with. */
  async check(): Promise<string> {
    this.redact = createTokenRedactor(this.token);
    const agent = this.apiRoot.startsWith('https:') ? new HttpsAgent() : new HttpAgent();
    try {
      const bot = new Bot(this.token, { client: { apiRoot: this.apiRoot, timeoutSeconds: CHECK_TIMEOUT_SECONDS, baseFetchConfig: { agent } } });
      return `@${(await this.getMe(bot)).username}`;
    } catch (error) {
      throw this.toClawError(error, 'getMe');
    } finally {
      agent.destroy();
    }
  }

  /** One getMe, unlike `bot.init`, which retries network errors forever. */
  private async getMe(bot: Bot): Promise<UserFromGetMe> {
    try {
      return await bot.api.getMe(asGrammySignal(this.lifetime.signal));
    } catch (error) {
      if (this.lifetime.signal.aborted) throw this.stoppedWhileStarting();
      if (error instanceof GrammyError && (error.error_code === 401 || error.error_code === 404)) {
        throw new ClawError('invalid', `Telegram refused the bot token in ${this.config.token_env} (${error.error_code}: ${error.description})`, {
          status: error.error_code,
          suggestion: `check the token with @BotFather and export it again as ${this.config.token_env}`,
        });
      }
      throw error;
    }
  }

  /**
   * Starts grammY's long polling. `first` settles once polling began (grammY's `onStart`, after
   * deleteWebhook) or failed before it did; later failures restart it with backoff.
   */
  private poll(bot: Bot, first?: { resolve(): void; reject(error: unknown): void }): void {
    let began = false;
    const run = bot.start({
      timeout: this.pollTimeoutSeconds,
      allowed_updates: ['message'],
      onStart: () => {
        began = true;
        this.setState('running');
        first?.resolve();
      },
    });
    this.polling = run.then(
      () => this.pollingEnded(undefined, began, first),
      (error: unknown) => this.pollingEnded(error, began, first),
    );
  }

  private pollingEnded(error: unknown, began: boolean, first: { reject(error: unknown): void } | undefined): void {
    if (this.stopping) {
      if (!began) first?.reject(this.stoppedWhileStarting());
      return;
    }
    if (!began && first) {
      first.reject(error ?? new ClawError('upstream', `${this.id}: polling ended before it began`, { suggestion: 'see the xgw log; the start is tried again' }));
      return;
    }
    const why = error === undefined ? 'polling ended' : this.describe(error);
    const delayMs = this.nextDelayMs();
    this.setState('error', `polling stopped: ${why}`);
    this.context?.logger.error(`${this.id}: polling stopped: ${why}${hintFor(error)}; restarting in ${(delayMs / 1000).toFixed(1)} s`);
    sleep(delayMs, this.lifetime.signal).then(
      () => {
        if (!this.stopping && this.bot) this.poll(this.bot);
      },
      () => {}, // stopped meanwhile
    );
  }

  private pollSucceeded(): void {
    if (this.stopping) return;
    this.failures = 0;
    if (this.state === 'error') this.context?.logger.info(`${this.id}: polling works again`);
    if (this.state !== 'running') this.setState('running');
  }

  /**
   * One getUpdates call, retried here until it succeeds: grammY would wait a fixed 3 s after a
   * failed poll, in a sleep that `stop` cannot cut short; ours backs off (doubling, capped) and
   * ends at once on `stop`. Only 401 and 409, which no retry fixes, reach grammY, which then
   * stops polling (see `pollingEnded`).
   */
  private async pollWithRetries<T extends { ok: boolean }>(call: () => Promise<T>, aborted: () => boolean): Promise<T> {
    for (;;) {
      let why: string;
      let retryAfterSeconds: number | undefined;
      try {
        const response = await call();
        if (response.ok) {
          this.pollSucceeded();
          return response;
        }
        const failed = response as unknown as { error_code: number; description: string; parameters?: { retry_after?: number } };
        why = `${failed.error_code}: ${failed.description}`;
        if (this.stopping || failed.error_code === 401 || failed.error_code === 409) return response;
        retryAfterSeconds = failed.parameters?.retry_after;
      } catch (error) {
        if (aborted() || this.stopping) throw error;
        why = this.describe(error);
      }
      const delayMs = Math.max((retryAfterSeconds ?? 0) * 1000, this.nextDelayMs());
      // Log the change, not every attempt.
      if (this.state !== 'error') this.context?.logger.warn(`${this.id}: polling failed: ${why}; retrying`);
      else this.context?.logger.debug(`${this.id}: polling failed again: ${why}; retrying in ${Math.round(delayMs)} ms`);
      this.setState('error', `polling failed: ${why}`);
      await sleep(delayMs, this.lifetime.signal);
    }
  }

  /** The next backoff delay; `pollSucceeded` starts the sequence again. */
  private nextDelayMs(): number {
    this.failures += 1;
    return backoffMs(this.failures, { initialMs: this.options.retryDelayMs ?? 1000, maxMs: this.options.maxRetryDelayMs ?? 60_000 });
  }

  private async handleMessage(bot: Bot, message: Message): Promise<void> {
    const context = this.context!;
    const inbound = toInboundMessage(message, this.config, bot.botInfo);
    if (!inbound) {
      context.logger.debug(`${this.id}: ignored message ${message.message_id} in ${message.chat.type} chat ${message.chat.id}`);
      return;
    }
    const outcome = await this.receive(inbound);
    const notice = outcome && context.noticeFor(outcome);
    if (!notice) return;
    try {
      await bot.api.sendMessage(message.chat.id, notice, {
        reply_parameters: { message_id: message.message_id, allow_sending_without_reply: true },
      });
    } catch (error) {
      context.logger.warn(`${this.id}: could not tell ${JSON.stringify(inbound.peerId)} about ${outcome.kind}: ${this.describe(error)}`);
    }
  }

  /** Hands the message to the gateway (see receiveWithRetries): grammY has moved past this update already. */
  private receive(inbound: InboundMessage): Promise<InboundOutcome | undefined> {
    return receiveWithRetries(this.context!, inbound, {
      channelId: this.id,
      describe: (error) => this.describe(error),
      signal: this.lifetime.signal,
      initialDelayMs: this.options.receiveRetryDelayMs ?? 500,
    });
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
    if (error instanceof GrammyError) return `${error.error_code}: ${error.description}`;
    if (error instanceof HttpError) {
      // grammY keeps node-fetch's message ("request to <url with token> failed, reason: …") here.
      const cause = error.error instanceof Error ? error.error.message : String(error.error);
      return this.redact(`${error.message} ${cause}`);
    }
    return this.redact(error instanceof Error ? error.message : String(error));
  }

  /** The ClawError for a failed API call; a cause that may hold the token is not kept. */
  private toClawError(error: unknown, method: string, partly = ''): ClawError {
    if (isClawError(error)) return error;
    if (error instanceof GrammyError) {
      const retryAfter = error.parameters.retry_after;
      const what =
        error.error_code === 429 && retryAfter !== undefined
          ? `Telegram rate-limits the bot: retry after ${retryAfter} s (${error.method}: 429 ${error.description})`
          : `Telegram refused ${error.method} (${error.error_code}: ${error.description})`;
      return new ClawError('upstream', what + partly, { status: error.error_code, suggestion: suggestionFor(error), cause: error });
    }
    if (error instanceof HttpError) {
      return new ClawError('upstream', `cannot reach the Telegram Bot API at ${this.apiRoot} (${this.describe(error)})${partly}`, {
        suggestion: 'check the network and api_root; retry later',
      });
    }
    return new ClawError('upstream', `${method} failed: ${this.describe(error)}${partly}`, { suggestion: 'see the xgw log' });
  }
}

/** Telegram chat ids are integers below 2^52; anything else (`@channel`) goes as a string. */
function toChatId(conversationId: string): number | string {
  return /^-?\d+$/.test(conversationId) && Number.isSafeInteger(Number(conversationId)) ? Number(conversationId) : conversationId;
}
