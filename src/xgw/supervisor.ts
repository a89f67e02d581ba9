import { ClawError, isClawError } from '../core/errors.js';
import { backoffMs, sleep } from '../core/retry.js';
import { settleWithin } from './settle.js';
import type { ChannelAdapter, ChannelContext } from './channel.js';
import type { ChannelStatus } from './types.js';

export interface SupervisorOptions {
  /** How long one start may take before it is cancelled and counted as failed. Default: 5000 (5 s). */
  startTimeoutMs?: number;
  /** Delay before a failed start is tried again; doubles per failure. Default: 1000 (1 s). */
  retryDelayMs?: number;
  /** Cap of that delay. Default: 60000 (1 minute). */
  maxRetryDelayMs?: number;
}

/** How long a start that was cancelled (timed out, or stopped) may take to give up. */
const CANCEL_GRACE_MS = 5_000;

/**
 * Keeps one channel started: a start that fails, or takes longer than `startTimeoutMs`, leaves
 * the channel in `error` and is tried again with backoff until it succeeds or `stop` is called.
 * A configuration mistake (`invalid`, `usage`: a token Telegram refuses) is not retried, since
 * trying again cannot fix it. Once started, the channel keeps itself up (Telegram restarts its
 * polling); the supervisor's work is done.
 */
export class ChannelSupervisor {
  private readonly stopped = new AbortController();
  private loop: Promise<void> | undefined;
  /** While waiting to try again: why the last start failed, and when the next one is due. */
  private retry: { problem: string; fix?: string; at: number } | undefined;
  /** A start failure that is not retried: why, and how to fix it (the fix ends with a restart of xgw). */
  private failure: { problem: string; fix?: string } | undefined;
  private readonly startTimeoutMs: number;

  constructor(
    readonly channel: ChannelAdapter,
    private readonly context: ChannelContext,
    private readonly options: SupervisorOptions = {},
  ) {
    this.startTimeoutMs = options.startTimeoutMs ?? 5_000;
  }

  /** Starts the channel in the background. Resolves once the first attempt succeeded or failed; never rejects. */
  start(): Promise<void> {
    let firstSettled!: () => void;
    const first = new Promise<void>((resolve) => (firstSettled = resolve));
    this.loop = this.run(firstSettled).finally(firstSettled);
    return first;
  }

  status(): ChannelStatus {
    const status = this.channel.status();
    if (this.stopped.signal.aborted) return status;
    if (this.retry) {
      const seconds = Math.max(0, Math.ceil((this.retry.at - Date.now()) / 1000));
      return { ...status, state: 'error', detail: `${this.retry.problem}; trying again in ${seconds} s`, problem: { message: this.retry.problem, fix: this.retry.fix } };
    }
    if (this.failure) {
      const { problem, fix } = this.failure;
      return { ...status, state: 'error', detail: fix ? `${problem} - ${fix}` : problem, problem: { message: problem, fix: `${fix ? `${fix}, then ` : ''}restart xgw: theclaw down && theclaw up` } };
    }
    return status;
  }

  /** Cancels a start under way or a pending retry, and stops the channel. */
  async stop(): Promise<void> {
    this.stopped.abort();
    await this.channel.stop(); // a start under way gives up
    await this.loop;
    await this.channel.stop(); // in case a start succeeded meanwhile
  }

  private async run(firstSettled: () => void): Promise<void> {
    const { logger } = this.context;
    const id = this.channel.id;
    for (let attempt = 1; !this.stopped.signal.aborted; attempt++) {
      try {
        await this.attempt();
        this.retry = undefined;
        if (attempt > 1) logger.info(`${id}: started after ${attempt} attempts`);
        return;
      } catch (error) {
        if (this.stopped.signal.aborted) return;
        const problem = error instanceof Error ? error.message : String(error);
        if (isClawError(error) && (error.kind === 'invalid' || error.kind === 'usage')) {
          this.retry = undefined;
          this.failure = { problem, ...(error.suggestion && { fix: error.suggestion }) };
          logger.error(`${id} failed to start: ${error.suggestion ? `${problem} - ${error.suggestion}` : problem} (not retried: fix it and restart xgw)`);
          return;
        }
        const delayMs = backoffMs(attempt, { initialMs: this.options.retryDelayMs ?? 1_000, maxMs: this.options.maxRetryDelayMs ?? 60_000 });
        this.retry = { problem, fix: isClawError(error) ? error.suggestion : undefined, at: Date.now() + delayMs };
        logger.warn(`${id} failed to start: ${problem}; trying again in ${(delayMs / 1000).toFixed(1)} s`);
        firstSettled();
        try {
          await sleep(delayMs, this.stopped.signal);
        } catch {
          return; // stopped
        }
      }
    }
  }

  /** One start, bounded by `startTimeoutMs`: a slow one is cancelled (by `stop`) and fails. */
  private async attempt(): Promise<void> {
    const starting = this.channel.start(this.context);
    if (await settleWithin(starting, this.startTimeoutMs)) return starting;
    await this.channel.stop();
    await settleWithin(starting, CANCEL_GRACE_MS);
    throw new ClawError('timeout', `${this.channel.id} did not start within ${this.startTimeoutMs / 1000} s`, {
      suggestion: 'check the network and the channel config; it is tried again',
    });
  }
}
