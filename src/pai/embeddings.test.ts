import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, embeddingRequests, fakeEmbedding, startFakeOpenAI, type FakeLlmOptions, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { embed, resolveEmbeddingModel, type EmbedOptions } from './embeddings.js';
import { ModelCallError } from './model-error.js';
import { PaiConfigSchema, type PaiConfig } from './types.js';

// pai's embeddings client against the loopback fake OpenAI server's /v1/embeddings.

let t: TestHome;
const servers: FakeLlmServer[] = [];
beforeEach(() => {
  t = createTestHome();
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  t.cleanup();
});

async function server(options?: FakeLlmOptions): Promise<FakeLlmServer> {
  const started = await startFakeOpenAI(options);
  servers.push(started);
  return started;
}

function configFor(url: string, provider: Record<string, unknown> = {}): PaiConfig {
  return PaiConfigSchema.parse({ providers: { local: { api: 'openai-completions', base_url: url, ...provider } }, retry: { max_attempts: 2, initial_delay_ms: 10 }, timeout_seconds: 0.5 });
}

function options(config: PaiConfig, env: NodeJS.ProcessEnv = {}): EmbedOptions & { events: string[] } {
  const events: string[] = [];
  return {
    config,
    env,
    home: t.home,
    events,
    onRetry: (event) => events.push(`retry ${event.error}`),
    onKeyRotation: (event) => events.push(`key ${event.from} -> ${event.to}`),
  };
}

async function failure(promise: Promise<unknown>): Promise<ModelCallError> {
  const error = await promise.then(
    () => expect.fail('expected the call to fail'),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ModelCallError);
  return error as ModelCallError;
}

describe('embeddings', () => {
  it("resolves provider/model to an /embeddings endpoint: a configured server's base_url, OpenAI's own, none for a provider without one", () => {
    expect(resolveEmbeddingModel(configFor('http://127.0.0.1:9/v1/'), 'local/nomic-embed-text')).toEqual({
      provider: 'local',
      model: 'nomic-embed-text',
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKeyEnvs: [],
      keyless: true,
    });
    expect(resolveEmbeddingModel(PaiConfigSchema.parse({}), 'openai/text-embedding-3-small')).toMatchObject({ baseUrl: 'https://api.openai.com/v1', apiKeyEnvs: ['OPENAI_API_KEY'], keyless: false });
    expect(() => resolveEmbeddingModel(PaiConfigSchema.parse({}), 'anthropic/none')).toThrow(/no known embeddings endpoint/);
  });

  it('returns the vectors of a batch in its order, with the key from api_key_env', async () => {
    const fake = await server({ apiKey: 'sk-embed-0001' });
    const config = configFor(fake.url, { api_key_env: 'EMBED_KEY' });
    const texts = ['the boiler is old', 'my sister lives in Lisbon', 'the boiler is old'];
    const { vectors, profile } = await embed(resolveEmbeddingModel(config, 'local/e1'), texts, options(config, { EMBED_KEY: 'sk-embed-0001' }));
    expect(vectors.map((vector) => Array.from(vector))).toEqual(texts.map((text) => Array.from(Float32Array.from(fakeEmbedding(text)))));
    expect(profile).toBe('EMBED_KEY');
    expect(embeddingRequests(fake)).toHaveLength(1);
    expect(embeddingRequests(fake)[0]!.body).toMatchObject({ model: 'e1', input: texts });
  });

  it('retries a 500, goes on with the next key after a 401, and times out a server that does not answer', async () => {
    let failures = 1;
    const flaky = await server({ embeddings: () => (failures-- > 0 ? { kind: 'error', status: 500 } : { kind: 'vectors' }) });
    const config = configFor(flaky.url);
    const retried = options(config);
    expect((await embed(resolveEmbeddingModel(config, 'local/e1'), ['x'], retried)).vectors).toHaveLength(1);
    expect(retried.events).toEqual(['retry server']);

    const keyed = await server({ apiKey: 'sk-second-0002' });
    const twoKeys = configFor(keyed.url, { api_key_envs: ['FIRST_KEY', 'SECOND_KEY'] });
    const rotated = options(twoKeys, { FIRST_KEY: 'sk-first-0001', SECOND_KEY: 'sk-second-0002' });
    expect((await embed(resolveEmbeddingModel(twoKeys, 'local/e1'), ['x'], rotated)).profile).toBe('SECOND_KEY');
    expect(rotated.events).toEqual(['key FIRST_KEY -> SECOND_KEY']);

    const silent = await server({ embeddings: { kind: 'hang' } });
    const slow = configFor(silent.url);
    const started = Date.now();
    const error = await failure(embed(resolveEmbeddingModel(slow, 'local/e1'), ['x'], options(slow)));
    expect(error.modelError.kind).toBe('timeout');
    expect(embeddingRequests(silent)).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('fails at once on an answer that is not one vector per text, and on a missing key', async () => {
    // A server that drops a text of the batch.
    const dropping = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ index: 0, embedding: [1, 0] }] })));
    await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve));
    try {
      const config = configFor(`http://127.0.0.1:${(dropping.address() as AddressInfo).port}/v1`);
      const wrong = await failure(embed(resolveEmbeddingModel(config, 'local/e1'), ['a', 'b'], options(config)));
      expect(wrong.modelError).toMatchObject({ kind: 'unknown', recoverable: false });
      expect(wrong.message).toMatch(/1 vectors .* for 2 texts/);
    } finally {
      await new Promise((resolve) => dropping.close(resolve));
    }
    const openai = PaiConfigSchema.parse({});
    const missing = await failure(embed(resolveEmbeddingModel(openai, 'openai/text-embedding-3-small'), ['x'], options(openai, {})));
    expect(missing.modelError).toMatchObject({ kind: 'auth', status: null });
    expect(missing.message).toBe('OPENAI_API_KEY is not set');
  });
});
