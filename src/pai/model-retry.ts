import { backoffMs, sleep } from '../core/retry.js';
import { ModelCallError, type CallTarget } from './model-error.js';
import type { ModelError, PaiConfig } from './types.js';

/** Retry-After is honoured up to this: a server asking for an hour should not wedge a turn. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

/** One try of a provider call: failures are data, classified (model-error.ts). */
export type Attempt<T> = { ok: true; value: T } | { ok: false; error: ModelError };

export interface RetryOptions {
  retry: PaiConfig['retry'];
  /** Where the call goes, for the words of the error. */
  target: CallTarget;
  signal?: AbortSignal;
  /** Before each wait for another try. */
  onRetry?(attempt: number, delayMs: number, error: ModelError): void;
}

/**
 * Tries a provider call (a model's answer, a transcription) until it succeeds: what its class
 * says is recoverable (network, timeout, 429, 5xx) up to `retry.max_attempts` times, waiting the
 * server's Retry-After or a doubling backoff. A call that fails for good throws ModelCallError.
 */
export async function withRetries<T>(call: () => Promise<Attempt<T>>, options: RetryOptions): Promise<T> {
  const { retry, target, signal } = options;
  for (let attempt = 1; ; attempt++) {
    // Aborted between calls (while a tool ran): a provider SDK would still send the request.
    const outcome = signal?.aborted ? ABORTED : await call();
    if (outcome.ok) return outcome.value;
    const { error } = outcome;
    if (!error.recoverable || attempt >= retry.max_attempts) throw new ModelCallError(error, { ...target, attempts: attempt });
    const delay = Math.min(error.retryAfterMs ?? backoffMs(attempt, { initialMs: retry.initial_delay_ms, maxMs: retry.max_delay_ms }), MAX_RETRY_AFTER_MS);
    options.onRetry?.(attempt, delay, error);
    await sleep(delay, signal);
  }
}

const ABORTED = { ok: false, error: { kind: 'aborted', recoverable: false, status: null, message: 'aborted', retryAfterMs: null } } as const;
