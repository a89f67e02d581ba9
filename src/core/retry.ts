import { ClawError } from './errors.js';

/** Resolves after `ms`, or rejects with an `aborted` ClawError when `signal` fires first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new ClawError('aborted', 'aborted'));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new ClawError('aborted', 'aborted'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface BackoffOptions {
  /** Delay before the first retry. */
  initialMs: number;
  /** Cap of the doubling delay. */
  maxMs: number;
}

/**
 * Exponential backoff with ±20% jitter: `initialMs × 2^(attempt−1)`, capped at `maxMs`, for the
 * `attempt`-th retry (1-based). Jitter keeps many failing callers from retrying in lockstep.
 */
export function backoffMs(attempt: number, { initialMs, maxMs }: BackoffOptions): number {
  return Math.min(initialMs * 2 ** (attempt - 1), maxMs) * (0.8 + Math.random() * 0.4);
}
