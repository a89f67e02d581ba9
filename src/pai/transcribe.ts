import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { attempt, type AttemptOutcome } from './attempts.js';
import { KeyRing, keyVariables } from './key-ring.js';
import { classify, ModelCallError, observeHttp } from './model-error.js';
import { BUILTIN_PROVIDERS } from './models.js';
import type { PaiConfig } from './types.js';

/**
 * Speech to text, for voice messages: pi-ai has no transcription, so this is a small client of
 * the OpenAI-compatible `POST <base_url>/audio/transcriptions` (multipart: `model`, `file`),
 * which OpenAI (whisper-1, gpt-4o-transcribe), Groq (whisper-large-v3) and local whisper servers
 * speak. The model is `transcription.model` in the pai config; its provider's base_url and key
 * come as for a chat model (`providers.<p>`, else the built-in provider's), its errors are
 * classified and retried, with the provider's keys in turn, as a model call's are (model-error.ts,
 * attempts.ts).
 */
const TRANSCRIPTION_ROOTS: Record<string, string> = {
  openai: 'https://api.openai.com/v1',
  groq: 'https://api.groq.com/openai/v1',
};

export interface TranscriptionModel {
  provider: string;
  model: string;
  baseUrl: string;
  /** The variables of the provider's keys, tried in order (key-ring.ts). */
  apiKeyEnvs: string[];
  /** A server the user configured (`providers.<p>.base_url`), which may need no key. */
  keyless: boolean;
}

/** The configured transcription model, or null when the config names none. */
export function transcriptionModel(config: PaiConfig): TranscriptionModel | null {
  if (!config.transcription) return null;
  const [provider, ...rest] = config.transcription.model.split('/') as [string, ...string[]];
  const configured = config.providers[provider];
  const baseUrl = configured?.base_url ?? TRANSCRIPTION_ROOTS[provider];
  if (!baseUrl) {
    throw new ClawError('invalid', `pai knows no transcription endpoint of provider ${provider} (transcription.model: ${config.transcription.model})`, {
      suggestion: `set providers.${provider}.base_url to its OpenAI-compatible root (e.g. http://127.0.0.1:8000/v1) in $THECLAW_HOME/pai/config.yaml, or use openai/whisper-1 or groq/whisper-large-v3`,
    });
  }
  return {
    provider,
    model: rest.join('/'),
    baseUrl: baseUrl.replace(/\/+$/, ''),
    apiKeyEnvs: keyVariables(config, provider, BUILTIN_PROVIDERS[provider]?.keyEnv ?? null),
    keyless: configured?.base_url !== undefined,
  };
}

/** An audio file to transcribe. */
export interface AudioFile {
  path: string;
  /** Default: `application/octet-stream`; the server goes by the file name's extension too. */
  mime_type?: string;
}

export interface TranscribeOptions {
  config: PaiConfig;
  /** For the key. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where the keys' cool-downs are kept (key-ring.ts). Default: `resolveHome()`. */
  home?: string;
  signal?: AbortSignal;
}

/**
 * The words of an audio file, by the configured transcription model. Throws a `usage` error when
 * none is configured, an `io` error when the file cannot be read, and ModelCallError when the
 * call fails for good (after the retries of `retry` in the config; each try within
 * `timeout_seconds`).
 */
export async function transcribe(file: AudioFile, options: TranscribeOptions): Promise<string> {
  const { config, signal } = options;
  const model = transcriptionModel(config);
  if (!model) throw usageError('no transcription model is configured', 'set transcription: { model: openai/whisper-1 } in $THECLAW_HOME/pai/config.yaml');
  const keys = KeyRing.of(config, model, options.env ?? process.env, options.home ?? resolveHome());
  const keyOf = (key: string | undefined) => key ?? (model.keyless ? 'none' : undefined);
  if (keyOf(keys.current().key) === undefined) {
    throw new ModelCallError(
      { kind: 'auth', recoverable: false, status: null, message: 'no API key', retryAfterMs: null },
      { provider: model.provider, baseUrl: model.baseUrl, apiKeyEnv: keys.names, attempts: 1 },
    );
  }
  let audio: Buffer;
  try {
    audio = readFileSync(file.path);
  } catch (error) {
    throw new ClawError('io', `cannot read ${file.path}: ${(error as Error).message}`, { suggestion: 'check that the file exists and can be read', cause: error });
  }
  const upload = { data: audio, name: basename(file.path), mime_type: file.mime_type ?? 'application/octet-stream' };
  const { value } = await attempt((profile) => postAudio(model, keyOf(profile.key) ?? '', upload, config.timeout_seconds * 1000, signal), { retry: config.retry, model, keys, signal });
  return value;
}

/** One request; its failure classified like a model call's. */
function postAudio(model: TranscriptionModel, key: string, audio: { data: Buffer; name: string; mime_type: string }, timeoutMs: number, signal?: AbortSignal): Promise<AttemptOutcome<string>> {
  return observeHttp(async (observation) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const failed = (message: string): AttemptOutcome<string> => ({
      ok: false,
      error: classify({ observation, aborted: signal?.aborted ?? false, timedOut: timeout.aborted, message }),
    });
    try {
      const form = new FormData();
      form.append('model', model.model);
      form.append('response_format', 'json');
      form.append('file', new Blob([audio.data], { type: audio.mime_type }), audio.name);
      const response = await fetch(`${model.baseUrl}/audio/transcriptions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}` },
        body: form,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      const body = await response.text();
      if (!response.ok) return failed(observation.errorBody?.message ?? `HTTP ${response.status}`);
      const text = (JSON.parse(body) as { text?: unknown }).text;
      if (typeof text !== 'string') return failed('the answer holds no text');
      return { ok: true, value: text.trim() };
    } catch (error) {
      return failed(error instanceof Error ? error.message : String(error));
    }
  });
}
