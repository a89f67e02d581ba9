import { LogLevel, type Logger as SlackLogger, type SocketModeReceiver } from '@slack/bolt';
import { ClawError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { backoffMs, sleep } from '../../core/retry.js';
import { settleWithin } from '../settle.js';

type SocketModeClient = SocketModeReceiver['client'];

/** How long `close` waits for Slack to answer the close of the WebSocket. */
const CLOSE_GRACE_MS = 2000;

export interface SlackConnectionOptions {
  /** Aborted when the channel stops: a start or a reconnect under way ends. */
  signal: AbortSignal;
  /** Delay before the second try to reconnect; doubles per failure, up to 1 minute. */
  reconnectDelayMs: number;
  /** The connection was lost; reconnecting begins. */
  lost(): void;
  /** It works again. */
  back(): void;
  /** A try to reconnect failed: whether to try again (not after a refused token, say). */
  failed(error: unknown): boolean;
}

/**
 * The Socket Mode connection of a Slack channel: opened once by `open`, and opened again, with
 * backoff, whenever it ends (Slack refreshes connections every few hours with a `disconnect`
 * message; a network failure ends one without a word). @slack/socket-mode can reconnect by
 * itself, but a failed reconnect leaves a rejected promise no one handles, which would end xgw:
 * so its client runs with autoReconnectEnabled false and the loop is here.
 */
export class SlackConnection {
  private reconnecting: Promise<void> | undefined;

  constructor(
    private readonly client: SocketModeClient,
    private readonly options: SlackConnectionOptions,
  ) {}

  /** Connects (apps.connections.open, then the WebSocket until Slack's `hello`); rejects with why not. */
  async open(): Promise<void> {
    await this.connect();
    this.client.on('disconnected', () => {
      if (!this.options.signal.aborted) this.reconnect();
    });
  }

  /** Ends the connection and a reconnect under way. */
  async close(): Promise<void> {
    await settleWithin(Promise.all([this.client.disconnect(), this.reconnecting]), CLOSE_GRACE_MS);
  }

  private async connect(): Promise<void> {
    const { signal } = this.options;
    const start = this.client.start();
    // A start that `close` abandoned may still connect later: that connection is ended at once.
    start.then(
      () => {
        if (signal.aborted) void this.client.disconnect();
      },
      () => {},
    );
    await unlessStopped(start, signal);
  }

  private reconnect(): void {
    if (this.reconnecting) return; // each failed try ends a connection too
    this.options.lost();
    this.reconnecting = this.tryAgain().finally(() => (this.reconnecting = undefined));
  }

  private async tryAgain(): Promise<void> {
    const { signal } = this.options;
    for (let attempt = 1; !signal.aborted; attempt++) {
      try {
        await this.connect();
        this.options.back();
        return;
      } catch (error) {
        if (signal.aborted || !this.options.failed(error)) return;
      }
      try {
        await sleep(backoffMs(attempt, { initialMs: this.options.reconnectDelayMs, maxMs: 60_000 }), signal);
      } catch {
        return;
      }
    }
  }
}

/**
 * `promise`, or a rejection (`aborted`) once `signal` aborts first (the channel stops): what a
 * start and each reconnect race. The abort listener goes when it settles: reconnects add up.
 */
export async function unlessStopped<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  let onAbort = () => {};
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ClawError('aborted', 'the Slack channel was stopped while connecting', { suggestion: 'start it again with: xgw start' }));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, stopped]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The Slack clients' logger, into the channel's (once it has one): their errors as warnings,
 * the rest as debug lines, tokens redacted. Their debug output (every event's payload, so every
 * message's text) is not asked for.
 */
export function createSlackLogger(logger: () => Logger | undefined, redact: (text: string) => string): SlackLogger {
  const line = (parts: unknown[]) => redact(parts.map((part) => (part instanceof Error ? part.message : String(part))).join(' '));
  return {
    debug: () => {},
    info: (...parts) => logger()?.debug(`slack: ${line(parts)}`),
    warn: (...parts) => logger()?.debug(`slack: ${line(parts)}`),
    error: (...parts) => logger()?.warn(`slack: ${line(parts)}`),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  };
}
