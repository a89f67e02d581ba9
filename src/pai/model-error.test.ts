import { afterEach, describe, expect, it } from 'vitest';
import { startFakeAnthropic, startFakeOpenAI, type FakeLlmServer } from '../testing/index.js';
import { chat } from './chat.js';
import { classify, ModelCallError, observeHttp, type ProviderErrorBody } from './model-error.js';
import { PaiConfigSchema } from './types.js';

const observation = (status: number | null, networkCode: string | null = null, retryAfterMs: number | null = null, errorBody: ProviderErrorBody | null = null) => ({
  status,
  networkCode,
  retryAfterMs,
  errorBody,
});
const body = (fields: Partial<ProviderErrorBody>): ProviderErrorBody => ({ code: null, type: null, message: null, ...fields });
const outcome = (obs: ReturnType<typeof observation>, message: string, extra: { aborted?: boolean; timedOut?: boolean } = {}) => ({
  observation: obs,
  aborted: extra.aborted ?? false,
  timedOut: extra.timedOut ?? false,
  message,
});

describe('classify', () => {
  it('decides by status and code, never by the message text', () => {
    // Messages that say the opposite of what the structure says.
    expect(classify(outcome(observation(429), 'invalid api key'))).toMatchObject({ kind: 'rate_limit', recoverable: true, status: 429 });
    expect(classify(outcome(observation(401), 'rate limit exceeded, try again'))).toMatchObject({ kind: 'auth', recoverable: false });
    expect(classify(outcome(observation(403), 'server overloaded'))).toMatchObject({ kind: 'auth', recoverable: false });
    expect(classify(outcome(observation(500), 'invalid request'))).toMatchObject({ kind: 'server', recoverable: true });
    expect(classify(outcome(observation(529), ''))).toMatchObject({ kind: 'server', recoverable: true });
    expect(classify(outcome(observation(400), 'timeout'))).toMatchObject({ kind: 'invalid_request', recoverable: false });
    expect(classify(outcome(observation(422), 'connection reset'))).toMatchObject({ kind: 'invalid_request', recoverable: false });
    expect(classify(outcome(observation(408), ''))).toMatchObject({ kind: 'timeout', recoverable: true });
    expect(classify(outcome(observation(null, 'ECONNRESET'), 'unauthorized'))).toMatchObject({ kind: 'network', recoverable: true, status: null });
    expect(classify(outcome(observation(null, 'ECONNREFUSED'), ''))).toMatchObject({ kind: 'network', recoverable: true });
    expect(classify(outcome(observation(200), 'stream ended'))).toMatchObject({ kind: 'network', recoverable: true, status: null });
    expect(classify(outcome(observation(null), 'no api key'))).toMatchObject({ kind: 'unknown', recoverable: false });
  });

  it("tells a context overflow by status 413 or the error body's code and type", () => {
    const overflow = { kind: 'context_length', recoverable: false };
    expect(classify(outcome(observation(413), ''))).toMatchObject({ ...overflow, status: 413 });
    expect(classify(outcome(observation(400, null, null, body({ code: 'context_length_exceeded', type: 'invalid_request_error' })), 'bad'))).toMatchObject({ ...overflow, status: 400 });
    expect(classify(outcome(observation(400, null, null, body({ type: 'exceed_context_size_error' })), ''))).toMatchObject(overflow);
    // Anthropic's, the one rule that reads text: that type, that opening, nothing looser.
    expect(classify(outcome(observation(400, null, null, body({ type: 'invalid_request_error', message: 'prompt is too long: 2100 tokens > 2000 maximum' })), ''))).toMatchObject(overflow);
    expect(classify(outcome(observation(400, null, null, body({ type: 'invalid_request_error', message: 'max_tokens: prompt is too long' })), ''))).toMatchObject({ kind: 'invalid_request' });
    expect(classify(outcome(observation(400, null, null, body({ type: 'api_error', message: 'prompt is too long' })), ''))).toMatchObject({ kind: 'invalid_request' });
    // The code only counts on a 400: a rate limit stays a rate limit.
    expect(classify(outcome(observation(429, null, null, body({ code: 'context_length_exceeded' })), ''))).toMatchObject({ kind: 'rate_limit' });
    // The message text alone decides nothing.
    expect(classify(outcome(observation(400), "This model's maximum context length is 8192 tokens"))).toMatchObject({ kind: 'invalid_request' });
  });

  it('puts our timeout and the caller abort before the status', () => {
    expect(classify(outcome(observation(null, 'ABORT_ERR'), 'aborted', { timedOut: true }))).toMatchObject({ kind: 'timeout', recoverable: true });
    expect(classify(outcome(observation(null, 'ABORT_ERR'), 'aborted', { aborted: true }))).toMatchObject({ kind: 'aborted', recoverable: false });
  });

  it('keeps Retry-After', () => {
    expect(classify(outcome(observation(429, null, 1500), '')).retryAfterMs).toBe(1500);
  });

  it('explains each failure with what happened and how to fix it', () => {
    const context = { provider: 'fake', baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'FAKE_KEY', attempts: 3 };
    const auth = new ModelCallError(classify(outcome(observation(401), 'bad key')), { ...context, attempts: 1 });
    expect(auth.kind).toBe('upstream');
    expect(auth.message).toMatch(/HTTP 401/);
    expect(auth.suggestion).toContain('FAKE_KEY');
    const rate = new ModelCallError(classify(outcome(observation(429), '')), context);
    expect(rate.message).toMatch(/after 3 attempts/);
    expect(rate.suggestion).toBeTruthy();
  });
});

describe('observeHttp', () => {
  const servers: FakeLlmServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  it('records status and Retry-After of the fetches made inside it', async () => {
    const server = await startFakeOpenAI();
    servers.push(server);
    server.enqueue({ kind: 'error', status: 429, retryAfterSeconds: 2 });
    const seen = await observeHttp(async (obs) => {
      await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }).then((response) => response.text());
      return { ...obs };
    });
    expect(seen).toEqual({ status: 429, retryAfterMs: 2000, networkCode: null, errorBody: { code: 'rate_limit_exceeded', type: 'requests', message: expect.any(String) } });
  });

  it.each([
    ['openai-completions', startFakeOpenAI],
    ['anthropic-messages', startFakeAnthropic],
  ])('classifies the overflow a %s server reports, through pi-ai and the SDK', async (api, start) => {
    const server = await start({ contextWindow: 200 });
    servers.push(server);
    const config = PaiConfigSchema.parse({ default: 'fake/m1', providers: { fake: { api, base_url: server.url, models: [{ id: 'm1' }] } }, retry: { max_attempts: 3, initial_delay_ms: 20 } });
    const error = (await chat({ input: 'x'.repeat(2000), config, env: { PATH: process.env.PATH }, tools: false }).catch((e: unknown) => e)) as ModelCallError;
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.modelError).toMatchObject({ kind: 'context_length', status: 400, recoverable: false });
    expect(error.message).toMatch(/too long for the model's context window \(HTTP 400\)/);
    // Not retried: the same request would be refused again.
    expect(server.requests).toHaveLength(1);
    // A request that fits is answered.
    expect((await chat({ input: 'hi', config, env: { PATH: process.env.PATH }, tools: false })).text).toBe('echo: hi');
  });

  it('keeps concurrent model calls apart', async () => {
    // The failing call starts first and is answered last, after the other call's 200.
    const failing = await startFakeOpenAI({ defaultStep: { kind: 'error', status: 401 }, defaultDelayMs: 100 });
    const working = await startFakeOpenAI({ defaultStep: { kind: 'text', text: 'fine' } });
    servers.push(failing, working);
    const config = (url: string) =>
      PaiConfigSchema.parse({
        default: 'fake/m1',
        providers: { fake: { api: 'openai-completions', base_url: url, models: [{ id: 'm1' }] } },
        retry: { max_attempts: 3, initial_delay_ms: 20 },
        timeout_seconds: 5,
      });
    const env = { PATH: process.env.PATH };
    const [bad, good] = await Promise.allSettled([chat({ input: 'a', config: config(failing.url), env, tools: false }), chat({ input: 'b', config: config(working.url), env, tools: false })]);
    expect(bad.status).toBe('rejected');
    expect(((bad as PromiseRejectedResult).reason as ModelCallError).modelError.kind).toBe('auth');
    expect(good).toMatchObject({ status: 'fulfilled', value: { text: 'fine' } });
    expect(failing.requests).toHaveLength(1);
    expect(working.requests).toHaveLength(1);
  });
});
