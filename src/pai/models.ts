import { join } from 'node:path';
import { loadYamlConfig } from '../core/config.js';
import { ClawError, usageError } from '../core/errors.js';
import { loadPiModels } from './pi.js';
import { PaiConfigSchema, type PaiConfig, type ResolvedModel } from './types.js';

export function paiConfigPath(home: string): string {
  return join(home, 'pai', 'config.yaml');
}

export function loadPaiConfig(home: string): PaiConfig {
  return loadYamlConfig(paiConfigPath(home), PaiConfigSchema);
}

/** The built-in offline provider: deterministic, no key, no network. */
export const MOCK_PROVIDER = 'mock';

/**
 * Providers pi-ai knows, their standard key variable, and the model used when only the provider
 * is named. Listed here (not read from pi-ai) so that `pai model list` does not load pi-ai.
 */
export const BUILTIN_PROVIDERS: Record<string, { keyEnv: string; defaultModel: string }> = {
  openai: { keyEnv: 'OPENAI_API_KEY', defaultModel: 'gpt-4o-mini' },
  anthropic: { keyEnv: 'ANTHROPIC_API_KEY', defaultModel: 'claude-haiku-4-5' },
  google: { keyEnv: 'GEMINI_API_KEY', defaultModel: 'gemini-2.5-flash' },
  mistral: { keyEnv: 'MISTRAL_API_KEY', defaultModel: 'mistral-small-latest' },
  groq: { keyEnv: 'GROQ_API_KEY', defaultModel: 'llama-3.3-70b-versatile' },
  openrouter: { keyEnv: 'OPENROUTER_API_KEY', defaultModel: 'openai/gpt-4o-mini' },
  xai: { keyEnv: 'XAI_API_KEY', defaultModel: 'grok-3-mini' },
  deepseek: { keyEnv: 'DEEPSEEK_API_KEY', defaultModel: 'deepseek-v4-flash' },
};

const DEFAULT_CONTEXT_WINDOW = 128_000;
const DEFAULT_MAX_OUTPUT = 4_096;

export interface ModelChoice {
  provider?: string;
  /** A model id, or `provider/model` when no provider is given. */
  model?: string;
}

/**
 * Picks the provider and model: the flags, else the config's `default`, else the first server the
 * config describes (a provider with `api` and `base_url`, and its first model: an Ollama set up
 * is meant to be used), else the first provider whose standard key is set, else the offline mock
 * — so that everything runs with no key.
 */
export function chooseModel(config: PaiConfig, choice: ModelChoice, env: NodeJS.ProcessEnv): { provider: string; model: string | undefined } {
  if (choice.provider) return { provider: choice.provider, model: choice.model };
  if (choice.model?.includes('/')) {
    const [provider, ...rest] = choice.model.split('/');
    return { provider: provider!, model: rest.join('/') };
  }
  if (choice.model) throw usageError(`--model ${choice.model} needs a provider`, `pass --provider P, or --model provider/${choice.model}`);
  if (config.default) {
    const [provider, ...rest] = config.default.split('/');
    return { provider: provider!, model: rest.join('/') };
  }
  const server = Object.entries(config.providers).find(([name, p]) => name !== MOCK_PROVIDER && p.api && p.base_url && p.models?.length);
  if (server) return { provider: server[0], model: server[1].models![0]!.id };
  const withKey = Object.entries(BUILTIN_PROVIDERS).find(([, { keyEnv }]) => env[keyEnv]);
  return withKey ? { provider: withKey[0], model: withKey[1].defaultModel } : { provider: MOCK_PROVIDER, model: 'echo' };
}

/** Makes a provider/model concrete. Loads pi-ai's model catalogue only for its built-in providers. */
export async function resolveModel(config: PaiConfig, choice: ModelChoice, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedModel> {
  const { provider, model: requested } = chooseModel(config, choice, env);
  const configured = config.providers[provider];
  const entry = (id: string) => configured?.models?.find((m) => m.id === id);

  if (provider === MOCK_PROVIDER) {
    const model = requested ?? 'echo';
    return {
      provider,
      model,
      api: 'mock',
      baseUrl: null,
      contextWindow: entry(model)?.context_window ?? 32_768,
      maxOutputTokens: entry(model)?.max_output_tokens ?? DEFAULT_MAX_OUTPUT,
      apiKeyEnv: null,
      cost: { input: 0, output: 0 },
      images: false,
    };
  }

  const builtin = BUILTIN_PROVIDERS[provider];
  if (configured?.api) {
    // Any server speaking a known wire protocol: Ollama, vLLM, LM Studio, a proxy.
    const model = requested ?? configured.models?.[0]?.id;
    if (!model) throw usageError(`no model given for provider ${provider}`, `pass --model, or list models under providers.${provider}.models in the pai config`);
    if (!configured.base_url && !builtin) {
      throw new ClawError('invalid', `provider ${provider} has an api but no base_url`, { suggestion: `set providers.${provider}.base_url in $THECLAW_HOME/pai/config.yaml` });
    }
    const known = entry(model);
    return {
      provider,
      model,
      api: configured.api,
      baseUrl: configured.base_url ?? null,
      contextWindow: known?.context_window ?? DEFAULT_CONTEXT_WINDOW,
      maxOutputTokens: known?.max_output_tokens ?? DEFAULT_MAX_OUTPUT,
      apiKeyEnv: configured.api_key_env ?? builtin?.keyEnv ?? null,
      cost: known?.cost ?? { input: 0, output: 0 },
      images: known?.input?.includes('image') ?? false,
    };
  }

  if (builtin) {
    const model = requested ?? builtin.defaultModel;
    const { getModel } = await loadPiModels();
    const catalogued = getModel(provider as never, model);
    if (!catalogued) {
      throw new ClawError('not_found', `pi-ai does not know the model ${provider}/${model}`, {
        suggestion: `check the model id, or describe it under providers.${provider}.models (with api and base_url) in $THECLAW_HOME/pai/config.yaml`,
      });
    }
    const known = entry(model);
    return {
      provider,
      model,
      api: catalogued.api,
      baseUrl: configured?.base_url ?? catalogued.baseUrl,
      contextWindow: known?.context_window ?? catalogued.contextWindow,
      maxOutputTokens: known?.max_output_tokens ?? catalogued.maxTokens,
      apiKeyEnv: configured?.api_key_env ?? builtin.keyEnv,
      cost: known?.cost ?? { input: catalogued.cost.input, output: catalogued.cost.output },
      images: known?.input ? known.input.includes('image') : catalogued.input.includes('image'),
    };
  }

  throw new ClawError('not_found', `unknown provider ${provider}`, {
    suggestion: `use one of ${[MOCK_PROVIDER, ...Object.keys(BUILTIN_PROVIDERS)].join(', ')}, or add providers.${provider} with api and base_url to $THECLAW_HOME/pai/config.yaml`,
  });
}

/**
 * Every provider key this config knows of: the keys written in it, and the values of the
 * variables its providers name (`api_key_env`, which need not look like a secret's name), for
 * the redactor; variables named like secrets it finds by itself.
 */
export function providerSecrets(config: PaiConfig, env: NodeJS.ProcessEnv): string[] {
  return Object.values(config.providers).flatMap((provider) => [provider.api_key, provider.api_key_env && env[provider.api_key_env]].filter((value): value is string => !!value));
}

/** The key for a call: the config's `api_key`, else the key variable. Never logged or printed. */
export function apiKeyFor(config: PaiConfig, resolved: Pick<ResolvedModel, 'provider' | 'apiKeyEnv'>, env: NodeJS.ProcessEnv): string | undefined {
  return config.providers[resolved.provider]?.api_key ?? (resolved.apiKeyEnv ? env[resolved.apiKeyEnv] : undefined);
}
