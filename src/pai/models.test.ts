import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isClawError } from '../core/errors.js';
import { withoutSecrets } from '../core/secrets.js';
import { createTestHome, runTool, type RunResult, type TestHome } from '../testing/index.js';
import { chooseModel, loadPaiConfig, resolveModel } from './models.js';
import { PaiConfigSchema } from './types.js';

let t: TestHome;
let env: NodeJS.ProcessEnv;
let configFile: string;

beforeEach(() => {
  t = createTestHome();
  env = withoutSecrets(t.env);
  configFile = join(t.home, 'pai', 'config.yaml');
  mkdirSync(join(t.home, 'pai'));
});
afterEach(() => t.cleanup());

const pai = (args: string[]): Promise<RunResult> => runTool('pai', args, env);
const json = (result: RunResult) => {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
};

const FAKE_CONFIG = `# my pai settings
providers:
  fake:   # a local server
    api: openai-completions
    base_url: "http://127.0.0.1:9/v1"
    models:
      - { id: m1, context_window: 32768, max_output_tokens: 2048 }
retry: { max_attempts: 2 }   # keep it short
`;

describe('pai model', () => {
  it('resolves the offline mock with no config and no keys', async () => {
    expect(json(await pai(['model', 'resolve', '--json']))).toMatchObject({ provider: 'mock', model: 'echo', context_window: 32768, max_output_tokens: 4096, api: 'mock' });
  });

  it('resolves a configured provider with its model limits', async () => {
    writeFileSync(configFile, FAKE_CONFIG);
    const resolved = json(await pai(['model', 'resolve', '--provider', 'fake', '--json']));
    expect(resolved).toEqual({ provider: 'fake', model: 'm1', context_window: 32768, max_output_tokens: 2048, api: 'openai-completions', base_url: 'http://127.0.0.1:9/v1' });
    expect(json(await pai(['model', 'resolve', '--model', 'fake/m1', '--json']))).toEqual(resolved);
  });

  it('resolves --provider openai from the pi-ai catalogue', async () => {
    const resolved = json(await pai(['model', 'resolve', '--provider', 'openai', '--json']));
    expect(resolved).toMatchObject({ provider: 'openai', model: 'gpt-4o-mini', context_window: 128000 });
    expect(resolved.max_output_tokens).toBeGreaterThan(0);
  });

  it('lists the mock, configured models and built-in providers, as text and JSON', async () => {
    writeFileSync(configFile, FAKE_CONFIG);
    const rows: { provider: string; model: string | null; source: string; key: string }[] = json(await pai(['model', 'list', '--json']));
    expect(rows[0]).toMatchObject({ provider: 'mock', model: 'echo', source: 'mock' });
    expect(rows).toContainEqual(expect.objectContaining({ provider: 'fake', model: 'm1', source: 'config', base_url: 'http://127.0.0.1:9/v1' }));
    expect(rows).toContainEqual(expect.objectContaining({ provider: 'openai', model: 'gpt-4o-mini', source: 'builtin', key: 'missing' }));

    const text = await pai(['model', 'list']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^default: fake\/m1\n/); // the server the config describes
    expect(text.stdout).toContain('fake/m1');
  });

  it('sets the default in the config keeping other keys and comments', async () => {
    writeFileSync(configFile, FAKE_CONFIG);
    const set = await pai(['model', 'default', 'fake/m1']);
    expect(set).toEqual({ code: 0, stdout: 'fake/m1\n', stderr: '' });
    const text = readFileSync(configFile, 'utf8');
    expect(text).toContain('# my pai settings');
    expect(text).toContain('# a local server');
    expect(text).toContain('# keep it short');
    const stored = parse(text);
    expect(stored).toMatchObject({ default: 'fake/m1', retry: { max_attempts: 2 }, providers: { fake: { api: 'openai-completions', models: [{ id: 'm1' }] } } });
    expect(json(await pai(['model', 'default', '--json']))).toEqual({ default: 'fake/m1' });
    expect(json(await pai(['model', 'resolve', '--json']))).toMatchObject({ provider: 'fake', model: 'm1' });
  });

  it('refuses an unknown provider with exit 1 and a suggestion, leaving the config alone', async () => {
    writeFileSync(configFile, FAKE_CONFIG);
    const setDefault = await pai(['model', 'default', 'nope/x']);
    expect(setDefault.code).toBe(1);
    expect(setDefault.stderr).toMatch(/^Error: unknown provider nope - .*providers\.nope/);
    expect(readFileSync(configFile, 'utf8')).toBe(FAKE_CONFIG);

    const resolve = await pai(['model', 'resolve', '--provider', 'nope', '--json']);
    expect(resolve.code).toBe(1);
    expect(JSON.parse(resolve.stdout)).toEqual({ error: 'unknown provider nope', suggestion: expect.stringContaining('mock') });

    const chat = await pai(['chat', '--provider', 'nope', 'hi']);
    expect(chat.code).toBe(1);
    expect(chat.stdout).toBe('');
    expect(chat.stderr).toMatch(/^Error: unknown provider nope - /);
  });

  it('refuses a config with wrong types, naming the field', async () => {
    writeFileSync(configFile, 'retry: { max_attempts: "x" }\n');
    for (const args of [
      ['model', 'list'],
      ['chat', 'hi'],
      ['config', 'show'],
    ]) {
      const result = await pai(args);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^Error: invalid .*config\.yaml: retry\.max_attempts: .* - /);
    }
    writeFileSync(configFile, 'providers:\n  fake: { api: openai-completions, base_url: "not a url" }\ntimeout_seconds: -1\n');
    const result = await pai(['model', 'resolve', '--json']);
    expect(result.code).toBe(1);
    const error = JSON.parse(result.stdout).error;
    expect(error).toContain('providers.fake.base_url');
    expect(error).toContain('timeout_seconds');
  });
});

describe('pai config show', () => {
  it('redacts api keys as text and as JSON', async () => {
    writeFileSync(configFile, 'providers:\n  fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1", api_key: "sk-very-secret-key-123456" }\n');
    const text = await pai(['config', 'show']);
    expect(text.code).toBe(0);
    expect(text.stdout).not.toContain('sk-very-secret-key-123456');
    expect(text.stdout).toContain('[redacted]');
    const shown = json(await pai(['config', 'show', '--json']));
    expect(shown.providers.fake).toMatchObject({ api_key: '[redacted]', base_url: 'http://127.0.0.1:9/v1' });
    expect(shown.retry).toEqual({ max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 30000 });
  });
});

describe('model choice (library)', () => {
  const config = (raw: unknown = {}) => PaiConfigSchema.parse(raw);

  it('prefers flags, then the config default, then a server the config describes, then a provider whose key is set, then the mock', () => {
    const withDefault = config({ default: 'fake/m1' });
    expect(chooseModel(withDefault, { provider: 'openai', model: 'gpt-4o' }, {})).toEqual({ provider: 'openai', model: 'gpt-4o' });
    expect(chooseModel(withDefault, { model: 'anthropic/claude-x' }, {})).toEqual({ provider: 'anthropic', model: 'claude-x' });
    expect(chooseModel(withDefault, {}, { OPENAI_API_KEY: 'k' })).toEqual({ provider: 'fake', model: 'm1' });
    expect(chooseModel(config(), {}, { ANTHROPIC_API_KEY: 'k' })).toEqual({ provider: 'anthropic', model: 'claude-haiku-4-5' });
    expect(chooseModel(config(), {}, {})).toEqual({ provider: 'mock', model: 'echo' });
    const ollama = config({ providers: { mock: { script: 's.yaml' }, local: { api: 'openai-completions', base_url: 'http://127.0.0.1:11434/v1', models: [{ id: 'qwen3:8b' }, { id: 'other' }] } } });
    expect(chooseModel(ollama, {}, { OPENAI_API_KEY: 'k' })).toEqual({ provider: 'local', model: 'qwen3:8b' });
    // Without a model list the server cannot be chosen on its own.
    expect(chooseModel(config({ providers: { local: { api: 'openai-completions', base_url: 'http://127.0.0.1:11434/v1' } } }), {}, {})).toEqual({ provider: 'mock', model: 'echo' });
  });

  it('asks for a provider when --model has none', () => {
    expect(() => chooseModel(config(), { model: 'gpt-4o' }, {})).toThrow(/needs a provider/);
  });

  it('refuses a model pi-ai does not know for a built-in provider', async () => {
    const error = await resolveModel(config(), { provider: 'openai', model: 'no-such-model-xyz' }, {}).catch((caught: unknown) => caught);
    expect(isClawError(error, 'not_found')).toBe(true);
  });

  it('loads an empty config when the file is missing', () => {
    expect(loadPaiConfig(join(t.home, 'elsewhere'))).toMatchObject({ providers: {}, retry: { max_attempts: 3 }, timeout_seconds: 120, max_turns: 20 });
  });
});
