import { parseConfigDocument, configDocumentText, readConfigText, writeFileAtomically } from '../core/config.js';
import { ClawError, usageError } from '../core/errors.js';
import { paiConfigPath, secretsEnvPath } from '../core/layout.js';
import { createRedactor } from '../core/secrets.js';
import { readSecretsFile, storeSecret, withStoredSecrets } from '../core/secrets-file.js';
import { BUILTIN_PROVIDERS, MOCK_PROVIDER, PaiConfigSchema } from '../pai/index.js';
import { callModelOnce } from './doctor.js';
import type { SetupProvider } from './setup-types.js';

/**
 * `theclaw setup`'s model step, the same for the flags and the prompts: which provider, where, which
 * model, with which key. The key is checked with one tiny call before anything is written; then
 * pai's config names the model (`default`, and for a server its `providers` entry, without the
 * key) and the key goes to secrets.env. What is not given is kept: a second run with only
 * `--model` changes the model and reuses the stored key.
 */

interface ProviderPlan {
  /** Where the key is kept; null: the provider takes none. */
  keyEnv: string | null;
  /** Whether it answers without a key. */
  keyless: boolean;
  /** A server described in pai's config (api, base_url, models) rather than one pi-ai knows. */
  server: boolean;
  /** Where its model list is, when no base URL is given. */
  defaultBaseUrl?: string;
}

const PLANS: Record<SetupProvider, ProviderPlan> = {
  openai: { keyEnv: 'OPENAI_API_KEY', keyless: false, server: false, defaultBaseUrl: 'https://api.openai.com/v1' },
  anthropic: { keyEnv: 'ANTHROPIC_API_KEY', keyless: false, server: false, defaultBaseUrl: 'https://api.anthropic.com/v1' },
  openrouter: { keyEnv: 'OPENROUTER_API_KEY', keyless: false, server: false, defaultBaseUrl: 'https://openrouter.ai/api/v1' },
  ollama: { keyEnv: null, keyless: true, server: true, defaultBaseUrl: 'http://127.0.0.1:11434/v1' },
  'openai-compatible': { keyEnv: 'OPENAI_COMPATIBLE_API_KEY', keyless: true, server: true },
  mock: { keyEnv: null, keyless: true, server: false },
};

export interface ModelSetupOptions {
  provider: SetupProvider;
  /** The server's (or a proxy's) URL, up to `/v1`. Required for openai-compatible the first time. */
  baseUrl?: string;
  /** Default: the provider's usual one (pi-ai's providers), else the first the server lists. */
  model?: string;
  /** A new key (from stdin or the hidden prompt). Default: the environment's, else secrets.env's. */
  apiKey?: string;
  /** The environment the check's call gets (secrets.env is added under it). */
  env: NodeJS.ProcessEnv;
}

export interface ModelSetupResult {
  provider: SetupProvider;
  model: string;
  base_url: string | null;
  /** Where the key came from: stored now in secrets.env, kept there, the environment, or none. */
  key: 'stored' | 'kept' | 'environment' | 'none';
  /** How long the check's call took; null for the offline mock. */
  checked_ms: number | null;
  config_file: string;
  secrets_file: string;
}

/** The provider's settings as far as the home and the options know them. */
export function providerSettings(
  home: string,
  options: Pick<ModelSetupOptions, 'provider' | 'baseUrl' | 'apiKey' | 'env'>,
): { baseUrl: string | undefined; key: string | undefined; keySource: ModelSetupResult['key'] } {
  const plan = PLANS[options.provider];
  const configured = (parsedPaiDocument(home).toJS() as { providers?: Record<string, { base_url?: string }> } | null)?.providers?.[options.provider]?.base_url;
  const baseUrl = options.baseUrl ?? configured ?? plan.defaultBaseUrl;
  if (!plan.keyEnv) return { baseUrl, key: undefined, keySource: 'none' };
  if (options.apiKey !== undefined) return { baseUrl, key: options.apiKey, keySource: 'stored' };
  if (options.env[plan.keyEnv]) return { baseUrl, key: options.env[plan.keyEnv], keySource: 'environment' };
  const stored = readSecretsFile(home)[plan.keyEnv];
  return { baseUrl, key: stored, keySource: stored ? 'kept' : 'none' };
}

export async function setupModel(home: string, options: ModelSetupOptions): Promise<ModelSetupResult> {
  const { provider } = options;
  const plan = PLANS[provider];
  const { baseUrl, key, keySource } = providerSettings(home, options);
  if (plan.server && !baseUrl) throw usageError(`${provider} needs the server's URL`, 'pass --base-url, e.g. --base-url http://127.0.0.1:8000/v1');
  if (!plan.keyless && !key) throw usageError(`${provider} needs an API key`, `pass it on stdin with --api-key-stdin (or set ${plan.keyEnv} in the environment)`);
  const model = options.model ?? (provider === MOCK_PROVIDER ? 'echo' : BUILTIN_PROVIDERS[provider]?.defaultModel) ?? (await listModels(provider, baseUrl!, key))[0];
  if (!model) throw usageError(`${baseUrl} lists no model`, 'pass --model with the id of the model to use');

  const file = paiConfigPath(home);
  const document = parsedPaiDocument(home);
  document.set('default', `${provider}/${model}`);
  if (plan.server) {
    const models = (document.getIn(['providers', provider, 'models']) as { toJSON(): unknown } | undefined)?.toJSON() as { id: string }[] | undefined;
    document.setIn(['providers', provider, 'api'], document.getIn(['providers', provider, 'api']) ?? 'openai-completions');
    document.setIn(['providers', provider, 'base_url'], baseUrl);
    if (!models?.some((entry) => entry.id === model)) document.setIn(['providers', provider, 'models'], [...(models ?? []), { id: model }]);
    if (key && plan.keyEnv) document.setIn(['providers', provider, 'api_key_env'], plan.keyEnv);
  } else if (options.baseUrl) {
    document.setIn(['providers', provider, 'base_url'], options.baseUrl);
  }
  const parsed = PaiConfigSchema.safeParse(document.toJS() ?? {});
  if (!parsed.success) throw usageError(`the change would make ${file} invalid: ${parsed.error.issues[0]?.message}`, 'check --base-url and --model');

  let checkedMs: number | null = null;
  if (provider !== MOCK_PROVIDER) {
    const env = { ...withStoredSecrets(home, options.env), ...(key && plan.keyEnv ? { [plan.keyEnv]: key } : {}) };
    const started = Date.now();
    try {
      await callModelOnce(home, parsed.data, { provider, model }, env);
    } catch (error) {
      const redact = createRedactor(env, key ? [key] : []);
      throw new ClawError('upstream', `${provider}/${model} did not answer the check, so nothing was changed: ${redact((error as Error).message)}`, {
        suggestion: keySource === 'none' ? 'check --base-url and --model' : 'check the key (paste it again with --api-key-stdin), --base-url and --model',
      });
    }
    checkedMs = Date.now() - started;
  }
  writeFileAtomically(file, configDocumentText(document));
  if (keySource === 'stored' && plan.keyEnv) storeSecret(home, plan.keyEnv, key!);
  return { provider, model, base_url: plan.server || options.baseUrl ? (baseUrl ?? null) : null, key: keySource, checked_ms: checkedMs, config_file: file, secrets_file: secretsEnvPath(home) };
}

/**
 * The ids of the models the provider lists (`GET <base>/models`; Anthropic's with its own
 * headers), for the prompt's choice and a server's default. The key goes in a header only.
 */
export async function listModels(provider: SetupProvider, baseUrl: string, key: string | undefined, timeoutMs = 10_000): Promise<string[]> {
  const headers: Record<string, string> = provider === 'anthropic' ? { 'x-api-key': key ?? '', 'anthropic-version': '2023-06-01' } : key ? { authorization: `Bearer ${key}` } : {};
  let response: Response;
  try {
    response = await fetch(`${baseUrl.replace(/\/+$/, '')}/models`, { headers, signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    throw new ClawError('upstream', `cannot reach ${baseUrl}: ${(error as Error).message}`, { suggestion: 'check --base-url, and that the server runs' });
  }
  if (!response.ok) throw new ClawError('upstream', `${baseUrl}/models answered HTTP ${response.status}`, { status: response.status, suggestion: 'check the key and --base-url, or pass --model' });
  const body = (await response.json().catch(() => null)) as { data?: { id?: unknown }[] } | null;
  return (body?.data ?? []).flatMap((entry) => (typeof entry.id === 'string' ? [entry.id] : []));
}

function parsedPaiDocument(home: string) {
  const file = paiConfigPath(home);
  return parseConfigDocument(file, readConfigText(file));
}
