import * as z from 'zod/mini';
import { ClawError } from '../core/errors.js';
import { attempt, type AttemptOptions, type AttemptOutcome } from './attempts.js';
import { KeyRing, keyVariables } from './key-ring.js';
import { classify, observeHttp } from './model-error.js';
import { BUILTIN_PROVIDERS } from './models.js';
import type { ModelError, PaiConfig } from './types.js';

/**
 * Embeddings from an OpenAI-compatible `POST <base_url>/embeddings` (OpenAI, Mistral, Ollama,
 * vLLM, LM Studio, llama.cpp's server). pi-ai has no embeddings API, so this is a small client of
 * pai's own on fetch, with what a chat call has: the error classes (observed the same way, by
 * status and error code), the provider's keys in turn and the retries (attempts.ts), the timeout.
 */
export interface EmbeddingModel {
  provider: string;
  model: string;
  /** Where `/embeddings` is appended, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  /** The variables the provider's keys are in (never the keys). */
  apiKeyEnvs: string[];
  /** A server the user configured (`base_url`), which may need no key. */
  keyless: boolean;
}

/** The built-in providers whose API has an OpenAI-compatible /embeddings; others need a base_url. */
const EMBEDDING_URLS: Record<string, string> = {
  openai: 'https://api.openai.com/v1',
  mistral: 'https://api.mistral.ai/v1',
};

/** `provider/model` made concrete from the pai config, as resolveModel does for chat models. */
export function resolveEmbeddingModel(config: PaiConfig, name: string): EmbeddingModel {
  const [provider = '', ...rest] = name.split('/');
  const model = rest.join('/');
  const configured = config.providers[provider];
  const baseUrl = configured?.base_url ?? EMBEDDING_URLS[provider];
  if (!baseUrl) {
    throw new ClawError('not_found', `provider ${provider} has no known embeddings endpoint`, {
      suggestion: `give providers.${provider}.base_url (an OpenAI-compatible server with /embeddings) in $THECLAW_HOME/pai/config.yaml, or use ${Object.keys(EMBEDDING_URLS).join(' or ')}`,
    });
  }
  return { provider, model, baseUrl: baseUrl.replace(/\/+$/, ''), apiKeyEnvs: keyVariables(config, provider, BUILTIN_PROVIDERS[provider]?.keyEnv ?? null), keyless: Boolean(configured?.base_url) };
}

const EmbeddingsResponseSchema = z.object({
  data: z.array(z.object({ index: z.optional(z.int()), embedding: z.array(z.number()).check(z.minLength(1)) })),
});

export interface EmbedOptions extends Pick<AttemptOptions, 'signal' | 'onRetry' | 'onKeyRotation'> {
  config: PaiConfig;
  env: NodeJS.ProcessEnv;
  /** Where the keys' cool-downs are kept (key-ring.ts). */
  home: string;
}

/**
 * The vectors of `texts` (one request: the caller makes the batches), in their order, or a
 * ModelCallError after pai's retries. The key variable that answered comes with them.
 */
export async function embed(model: EmbeddingModel, texts: readonly string[], options: EmbedOptions): Promise<{ vectors: Float32Array[]; profile: string | null }> {
  if (texts.length === 0) return { vectors: [], profile: null };
  const keys = KeyRing.of(options.config, model, options.env, options.home);
  const { value, key } = await attempt((profile) => request(model, texts, profile.key ?? (model.keyless ? 'none' : undefined), options), {
    retry: options.config.retry,
    model,
    keys,
    signal: options.signal,
    onRetry: options.onRetry,
    onKeyRotation: options.onKeyRotation,
  });
  return { vectors: value, profile: key.name };
}

async function request(model: EmbeddingModel, texts: readonly string[], apiKey: string | undefined, options: EmbedOptions): Promise<AttemptOutcome<Float32Array[]>> {
  if (apiKey === undefined) return failed('auth', 'no API key');
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.config.timeout_seconds * 1000);
  try {
    return await observeHttp(async (observation) => {
      let body: unknown;
      try {
        const response = await fetch(`${model.baseUrl}/embeddings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
          body: JSON.stringify({ model: model.model, input: texts, encoding_format: 'float' }),
          signal: controller.signal,
        });
        body = await response.json().catch(() => null);
        if (!response.ok) {
          const message = observation.errorBody?.message ?? `HTTP ${response.status}`;
          return { ok: false, error: classify({ observation, aborted: false, timedOut: false, message }) };
        }
      } catch (error) {
        return { ok: false, error: classify({ observation, aborted: options.signal?.aborted ?? false, timedOut, message: (error as Error).message }) };
      }
      const parsed = EmbeddingsResponseSchema.safeParse(body);
      const data = parsed.success ? [...parsed.data.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)) : [];
      const dims = data[0]?.embedding.length;
      if (data.length !== texts.length || data.some((item) => item.embedding.length !== dims)) {
        return failed('unknown', `${model.baseUrl}/embeddings answered with ${data.length} vectors of unequal or no length for ${texts.length} texts`);
      }
      return { ok: true, value: data.map((item) => Float32Array.from(item.embedding)) };
    });
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

function failed(kind: ModelError['kind'], message: string): { ok: false; error: ModelError } {
  return { ok: false, error: { kind, recoverable: false, status: null, message, retryAfterMs: null } };
}
