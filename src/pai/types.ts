import * as z from 'zod/mini';

/**
 * `pai` is how every agent talks to a model: providers (through pi-ai), sessions, the
 * `bash_exec` tool loop, retries, usage and cost. This file holds its nouns.
 */

const ModelEntrySchema = z.strictObject({
  id: z.string().check(z.minLength(1)),
  context_window: z.optional(z.int().check(z.positive())),
  max_output_tokens: z.optional(z.int().check(z.positive())),
  /** USD per million tokens, for the cost figures. */
  cost: z.optional(z.strictObject({ input: z.number().check(z.nonnegative()), output: z.number().check(z.nonnegative()) })),
  /** What the model takes in: `[text]`, or `[text, image]` for a model that sees images. */
  input: z.optional(z.array(z.enum(['text', 'image']))),
});

const envName = z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'));

const ProviderConfigSchema = z
  .strictObject({
    /** Wire protocol: openai-completions, anthropic-messages, openai-responses, google-generative-ai, ... */
    api: z.optional(z.string().check(z.minLength(1))),
    base_url: z.optional(z.url()),
    /** Environment variable holding the key (the provider's standard one when not given). */
    api_key_env: z.optional(envName),
    /**
     * Several keys of the provider (auth profiles, key-ring.ts), in the order they are used: one
     * refused or rate limited is set aside and the call goes on with the next. Instead of api_key_env.
     */
    api_key_envs: z.optional(z.array(envName).check(z.minLength(1))),
    /** The key itself; prefer api_key_env, and keep this file private (mode 0600). */
    api_key: z.optional(z.string().check(z.minLength(1))),
    models: z.optional(z.array(ModelEntrySchema)),
    /** For the `mock` provider: a script of replies (see `pai chat --help`). */
    script: z.optional(z.string()),
  })
  .check(z.refine((provider) => !(provider.api_key_env && provider.api_key_envs), 'give api_key_env (one key) or api_key_envs (several), not both'));

/** `$THECLAW_HOME/pai/config.yaml`; every field optional, flags override it. */
export const PaiConfigSchema = z.strictObject({
  /** `provider/model` used when none is given. */
  default: z.optional(z.string().check(z.regex(/^[^/\s]+\/\S+$/, 'must be provider/model, e.g. openai/gpt-4o-mini'))),
  providers: z._default(z.record(z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]*$/)), ProviderConfigSchema), {}),
  retry: z._default(
    z.strictObject({
      max_attempts: z._default(z.int().check(z.positive(), z.maximum(10)), 3),
      initial_delay_ms: z._default(z.int().check(z.positive()), 1000),
      max_delay_ms: z._default(z.int().check(z.positive()), 30_000),
    }),
    { max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 30_000 },
  ),
  /** A model call that sends nothing for this long is aborted (and retried). */
  timeout_seconds: z._default(z.number().check(z.positive()), 120),
  /** Tool rounds per turn before the turn ends with a note instead of an answer. */
  max_turns: z._default(z.int().check(z.positive()), 20),
  /** Commands one answer of the model may ask for; the rest are not run (exit 125, and why). */
  max_tool_calls_per_round: z._default(z.int().check(z.positive()), 8),
  /**
   * Speech to text (voice messages): `provider/model` of an OpenAI-compatible
   * `/audio/transcriptions` endpoint, e.g. openai/whisper-1. None: voice messages get a notice.
   */
  transcription: z.optional(z.strictObject({ model: z.string().check(z.regex(/^[^/\s]+\/\S+$/, 'must be provider/model, e.g. openai/whisper-1')) })),
});

export type PaiConfig = z.output<typeof PaiConfigSchema>;
export type ProviderConfig = z.output<typeof ProviderConfigSchema>;

/** A provider and model made concrete: what `pai model resolve --json` prints, and more. */
export interface ResolvedModel {
  provider: string;
  model: string;
  /** pi-ai wire protocol, or `mock`. */
  api: string;
  baseUrl: string | null;
  contextWindow: number;
  maxOutputTokens: number;
  /** Where the key comes from (never the key itself): the first of apiKeyEnvs. */
  apiKeyEnv: string | null;
  /** Every variable holding one of the provider's keys, in the order they are used (key-ring.ts). */
  apiKeyEnvs: string[];
  /** USD per million tokens. */
  cost: { input: number; output: number };
  /** The model takes images (pi-ai's catalogue, or `input` in the pai config). */
  images: boolean;
}

/** Token counts and cost of one model call or a whole turn. */
export interface Usage {
  input: number;
  output: number;
  cache_read: number;
  cache_write: number;
  /** USD. */
  cost: number;
}

/** What the model asked `bash_exec` to run. */
export interface BashExecArgs {
  command: string;
  comment?: string;
  cwd?: string;
  timeout_seconds?: number;
}

/** What `bash_exec` returns to the model. */
export interface BashExecResult {
  stdout: string;
  stderr: string;
  exit_code: number;
}

/** Error classes, decided from HTTP status, error codes and an error body's structured fields, not from message text (the one narrow exception: model-error.ts). */
export type ModelErrorKind = 'network' | 'timeout' | 'rate_limit' | 'server' | 'auth' | 'invalid_request' | 'context_length' | 'aborted' | 'unknown';

export interface ModelError {
  kind: ModelErrorKind;
  recoverable: boolean;
  status: number | null;
  message: string;
  /** Milliseconds the server asked us to wait (Retry-After). */
  retryAfterMs: number | null;
}

/**
 * The events of a turn, in order: `start`, then per model call `delta`s, `tool_call` /
 * `tool_result` pairs, `usage`, maybe `retry`; finally exactly one of `done` or `error`.
 * `pai chat --json` prints them as NDJSON on stderr.
 */
export type ChatEvent =
  | { type: 'start'; provider: string; model: string }
  | { type: 'delta'; text: string }
  | { type: 'tool_call'; id: string; name: string; arguments: BashExecArgs }
  | { type: 'tool_result'; id: string; exit_code: number; stdout: string; stderr: string; duration_ms: number }
  /** `profile`: the variable of the key the call used (never the key); null for none or the config's own. */
  | { type: 'usage'; usage: Usage; duration_ms: number; profile: string | null }
  | { type: 'retry'; attempt: number; delay_ms: number; error: ModelErrorKind; status: number | null }
  /** A key was refused or rate limited, and the call goes on at once with the next one (key-ring.ts). */
  | { type: 'key_rotation'; from: string | null; to: string | null; error: ModelErrorKind; status: number | null }
  | { type: 'done'; text: string; usage: Usage; tool_rounds: number; stopped_at_max_turns: boolean }
  | { type: 'error'; error: string; suggestion: string; kind: ModelErrorKind; status: number | null };

/** What `chat` returns. */
export interface ChatResult {
  text: string;
  toolCalls: { id: string; arguments: BashExecArgs; result: BashExecResult }[];
  usage: Usage;
  toolRounds: number;
  /** The turn ended because it reached maxTurns tool rounds. */
  stoppedAtMaxTurns: boolean;
}

export const ZERO_USAGE: Usage = { input: 0, output: 0, cache_read: 0, cache_write: 0, cost: 0 };

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cache_read: a.cache_read + b.cache_read,
    cache_write: a.cache_write + b.cache_write,
    cost: a.cost + b.cost,
  };
}
