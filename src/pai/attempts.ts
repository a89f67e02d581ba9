import { backoffMs, sleep } from '../core/retry.js';
import { isKeyProblem, type KeyProfile, type KeyRing } from './key-ring.js';
import { ModelCallError } from './model-error.js';
import type { ModelError, ModelErrorKind, PaiConfig, ResolvedModel } from './types.js';

/**
 * How pai makes one request to a provider (a chat completion, a batch of embeddings): with the
 * provider's keys in turn (key-ring.ts) and retries by error class. A key refused or rate limited
 * is set aside and the next key tried at once, not counted as an attempt; a recoverable failure
 * (network, timeout, 429 with every key set aside, 5xx) is retried with backoff, honouring
 * Retry-After up to a bound; anything else, or the last attempt, throws ModelCallError.
 */
export type AttemptOutcome<T> = { ok: true; value: T } | { ok: false; error: ModelError };

export interface AttemptOptions {
  retry: PaiConfig['retry'];
  model: Pick<ResolvedModel, 'provider' | 'baseUrl'>;
  keys: KeyRing;
  signal?: AbortSignal;
  onRetry?: (event: { attempt: number; delay_ms: number; error: ModelErrorKind; status: number | null }) => void;
  onKeyRotation?: (event: { from: string | null; to: string | null; error: ModelErrorKind; status: number | null }) => void;
}

/** Retry-After is honoured up to this: a server asking for an hour should not wedge a turn. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

const ABORTED: ModelError = { kind: 'aborted', recoverable: false, status: null, message: 'aborted', retryAfterMs: null };

export async function attempt<T>(call: (key: KeyProfile) => Promise<AttemptOutcome<T>>, options: AttemptOptions): Promise<{ value: T; key: KeyProfile }> {
  const { keys, signal } = options;
  // Each key once per attempt: keys set aside for a second only must not make a loop without end.
  let rotations = 0;
  for (let attempts = 1; ; ) {
    const key = keys.current();
    // Aborted between calls (while a tool ran): a provider SDK would still send the request.
    const outcome = signal?.aborted ? { ok: false as const, error: ABORTED } : await call(key);
    if (outcome.ok) return { value: outcome.value, key };
    const { error } = outcome;
    if (keys.rotates && isKeyProblem(error)) {
      const next = keys.setAside(key, error);
      if (next && rotations < keys.profiles.length - 1) {
        rotations++;
        options.onKeyRotation?.({ from: key.name, to: next.name, error: error.kind, status: error.status });
        continue;
      }
    }
    if (!error.recoverable || attempts >= options.retry.max_attempts) {
      throw new ModelCallError(error, { provider: options.model.provider, baseUrl: options.model.baseUrl, apiKeyEnv: keys.names, attempts });
    }
    const delay = Math.min(error.retryAfterMs ?? backoffMs(attempts, { initialMs: options.retry.initial_delay_ms, maxMs: options.retry.max_delay_ms }), MAX_RETRY_AFTER_MS);
    options.onRetry?.({ attempt: attempts, delay_ms: Math.round(delay), error: error.kind, status: error.status });
    await sleep(delay, signal);
    attempts++;
    rotations = 0;
  }
}
