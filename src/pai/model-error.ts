import { AsyncLocalStorage } from 'node:async_hooks';
import { ClawError } from '../core/errors.js';
import type { ModelError, ModelErrorKind } from './types.js';

/**
 * Errors are classified by structure — HTTP status, network error code, the error body's code and
 * type, who aborted — not by the text of a message (DESIGN §9: retries that never fired because
 * errors were matched by text; the one narrow exception is in isContextLength). pi-ai reports a failed call as a message with `stopReason: 'error'` and only the error's
 * text, so the structure is observed one level down: a wrapper around `fetch` (which the provider
 * SDKs read when pi-ai creates their client for a call) records the status and Retry-After of
 * every response, or the error code when no response came, into the context of the model call
 * that is running (AsyncLocalStorage keeps concurrent calls apart). A refused response's JSON body
 * is read too (from a clone, so the SDK still reads the original), for its structured fields.
 */
export interface HttpObservation {
  status: number | null;
  retryAfterMs: number | null;
  /** `ECONNREFUSED`, `ECONNRESET`, `UND_ERR_SOCKET`, ... when the request got no response. */
  networkCode: string | null;
  /** The `error` object of a refused (4xx/5xx) response's JSON body, when it has one. */
  errorBody: ProviderErrorBody | null;
}

/** `{"error": {"code", "type", "message"}}`: OpenAI's and Anthropic's shape, which most servers copy. */
export interface ProviderErrorBody {
  code: string | null;
  type: string | null;
  message: string | null;
}

const observations = new AsyncLocalStorage<HttpObservation>();
let installed = false;

function installFetchObserver(): void {
  if (installed) return;
  installed = true;
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const observation = observations.getStore();
    try {
      const response = await original(input, init);
      if (observation) {
        observation.status = response.status;
        observation.retryAfterMs = parseRetryAfter(response.headers);
        observation.errorBody = response.status >= 400 ? await readErrorBody(response) : null;
      }
      return response;
    } catch (error) {
      if (observation) observation.networkCode = networkCodeOf(error);
      throw error;
    }
  };
}

/** Runs a model call with a fresh observation of the HTTP requests it makes. */
export function observeHttp<T>(fn: (observation: HttpObservation) => Promise<T>): Promise<T> {
  installFetchObserver();
  const observation: HttpObservation = { status: null, retryAfterMs: null, networkCode: null, errorBody: null };
  return observations.run(observation, () => fn(observation));
}

function parseRetryAfter(headers: Headers): number | null {
  const ms = Number(headers.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers.get('retry-after');
  if (value === null) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

async function readErrorBody(response: Response): Promise<ProviderErrorBody | null> {
  try {
    const error = (JSON.parse(await response.clone().text()) as { error?: unknown }).error;
    if (typeof error !== 'object' || error === null) return null;
    const field = (name: string) => {
      const value = (error as Record<string, unknown>)[name];
      return typeof value === 'string' ? value : null;
    };
    return { code: field('code'), type: field('type'), message: field('message') };
  } catch {
    return null; // no body, not JSON, or the call was aborted while it arrived
  }
}

function networkCodeOf(error: unknown): string {
  for (let current: unknown = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return (error as { name?: unknown })?.name === 'AbortError' ? 'ABORT_ERR' : 'FETCH_FAILED';
}

export interface CallOutcome {
  observation: HttpObservation;
  /** The caller's signal fired. */
  aborted: boolean;
  /** Our idle timeout fired. */
  timedOut: boolean;
  /** pi-ai's text for the failure, for the message only. */
  message: string;
}

const RECOVERABLE: Record<ModelErrorKind, boolean> = {
  network: true,
  timeout: true,
  rate_limit: true,
  server: true,
  auth: false,
  invalid_request: false,
  // The same request would be refused again; the agent shortens its context and tries once more.
  context_length: false,
  aborted: false,
  unknown: false,
};

export function classify(outcome: CallOutcome): ModelError {
  const { status, retryAfterMs, networkCode, errorBody } = outcome.observation;
  const kind = kindOf(outcome);
  return { kind, recoverable: RECOVERABLE[kind], status: status !== null && status >= 400 ? status : null, message: outcome.message, retryAfterMs };

  function kindOf({ aborted, timedOut }: CallOutcome): ModelErrorKind {
    if (aborted) return 'aborted';
    if (timedOut) return 'timeout';
    if (status !== null && status >= 400) {
      if (status === 429) return 'rate_limit';
      if (status === 408) return 'timeout';
      if (status >= 500) return 'server';
      if (status === 401 || status === 403) return 'auth';
      if (isContextLength(status, errorBody)) return 'context_length';
      return 'invalid_request';
    }
    // A response that began (2xx) and then broke off, or no response at all.
    if (networkCode !== null || status !== null) return 'network';
    return 'unknown'; // failed before any request: configuration (no key, unknown api)
  }
}

/**
 * A request too long for the model's window, by status and the body's structured fields:
 * - HTTP 413: the request is too large (Anthropic's `request_too_large`, Cerebras, proxies);
 * - 400 with `error.code` `context_length_exceeded`: OpenAI (chat completions and responses),
 *   Azure, Groq and the servers that copy OpenAI's errors;
 * - 400 with `error.type` `exceed_context_size_error`: llama.cpp's server.
 * Anthropic has no code for it, only a 400 `invalid_request_error` whose message begins "prompt is
 * too long": the one rule that reads text, narrowed to that type and that opening. Providers that
 * say it in text alone (Gemini's INVALID_ARGUMENT, Mistral, Ollama) stay `invalid_request`.
 */
function isContextLength(status: number, body: ProviderErrorBody | null): boolean {
  if (status === 413) return true;
  if (status !== 400 || body === null) return false;
  if (body.code === 'context_length_exceeded' || body.type === 'exceed_context_size_error') return true;
  return body.type === 'invalid_request_error' && (body.message?.startsWith('prompt is too long') ?? false);
}

/** Where a provider call goes: what its errors name. */
export interface CallTarget {
  provider: string;
  baseUrl: string | null;
  apiKeyEnv: string | null;
}

/** A model call that failed for good: after retries, or at once when not recoverable. */
export class ModelCallError extends ClawError {
  override name = 'ModelCallError';
  readonly modelError: ModelError;

  constructor(modelError: ModelError, context: CallTarget & { attempts: number }) {
    const { what, fix } = explain(modelError, context);
    super(modelError.kind === 'aborted' ? 'aborted' : 'upstream', what, { suggestion: fix, status: modelError.status ?? undefined });
    this.modelError = modelError;
  }
}

function explain(error: ModelError, context: CallTarget & { attempts: number }): { what: string; fix: string } {
  const after = context.attempts > 1 ? ` after ${context.attempts} attempts` : '';
  const detail = firstLine(error.message);
  const where = context.baseUrl ?? `the ${context.provider} API`;
  switch (error.kind) {
    case 'auth': {
      // apiKeyEnv lists the variables of a provider with several keys (api_key_envs), every one refused.
      const several = context.apiKeyEnv?.includes(', ') ?? false;
      if (error.status === null) {
        // Refused before any request: no key at all.
        if (several) return { what: `none of ${context.apiKeyEnv} is set`, fix: `export one of them or configure providers.${context.provider}.api_key_envs` };
        return context.apiKeyEnv
          ? { what: `${context.apiKeyEnv} is not set`, fix: `export it or configure providers.${context.provider}.api_key_env` }
          : { what: `no API key for ${context.provider}`, fix: `set providers.${context.provider}.api_key_env in $THECLAW_HOME/pai/config.yaml` };
      }
      return {
        what: `${where} refused the credentials (HTTP ${error.status})${several ? ' of every key' : ''}: ${detail}`,
        fix: several
          ? `check the keys in ${context.apiKeyEnv} or api_key_envs in $THECLAW_HOME/pai/config.yaml`
          : `check the key in ${context.apiKeyEnv ?? 'the provider key variable'} or api_key_env in $THECLAW_HOME/pai/config.yaml`,
      };
    }
    case 'invalid_request':
      return { what: `${where} rejected the request (HTTP ${error.status}): ${detail}`, fix: 'check the model name and its limits: pai model resolve --json' };
    case 'context_length':
      return {
        what: `${where} refused the request as too long for the model's context window (HTTP ${error.status}): ${detail}`,
        fix: 'shorten the input or the session, or use a model with a larger window (agents compact their context and retry by themselves)',
      };
    case 'rate_limit':
      return { what: `${where} is rate limiting (HTTP 429)${after}`, fix: 'wait a minute and try again, or raise retry.max_attempts in $THECLAW_HOME/pai/config.yaml' };
    case 'server':
      return { what: `${where} failed (HTTP ${error.status})${after}: ${detail}`, fix: 'the provider is having trouble; try again later' };
    case 'network':
      return { what: `cannot reach ${where}${after}: ${detail}`, fix: 'check that the server runs and that base_url is right' };
    case 'timeout':
      return { what: `${where} sent nothing before the timeout${after}`, fix: 'raise timeout_seconds in $THECLAW_HOME/pai/config.yaml, or check the server' };
    case 'aborted':
      return { what: 'the model call was aborted', fix: 'run it again' };
    case 'unknown':
      return { what: `the model call failed before reaching ${where}: ${detail}`, fix: 'check the provider settings: pai model resolve --json' };
  }
}

function firstLine(text: string): string {
  return (text.split('\n')[0] ?? '').slice(0, 300);
}
