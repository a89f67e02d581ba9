import Anthropic from '@anthropic-ai/sdk';
import { stream, Type, type Api, type AssistantMessage, type Context, type Model, type StreamOptions } from '@mariozechner/pi-ai';
import OpenAI, { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import {
  embeddingRequests,
  estimateTokens,
  FAKE_EMBEDDING_DIMENSIONS,
  fakeEmbedding,
  startFakeAnthropic,
  startFakeOpenAI,
  transcriptionRequests,
  type FakeLlmOptions,
  type FakeLlmServer,
} from './fake-llm.js';

/** Servers started by a test; closed after it so no handle outlives the test. */
const servers: FakeLlmServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function openai(options?: FakeLlmOptions): Promise<FakeLlmServer> {
  const server = await startFakeOpenAI(options);
  servers.push(server);
  return server;
}

async function anthropic(options?: FakeLlmOptions): Promise<FakeLlmServer> {
  const server = await startFakeAnthropic(options);
  servers.push(server);
  return server;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected the request to fail'),
    (error: unknown) => error,
  );
}

const weatherArgs = { city: 'Paris', days: 3, units: { temperature: 'C' } };

describe('estimateTokens', () => {
  it('is ceil(length / 4)', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('abcd')).toBe(1);
    expect(estimateTokens('abcde')).toBe(2);
  });
});

describe('fake OpenAI with the openai SDK', () => {
  const client = (server: FakeLlmServer, apiKey = 'k') => new OpenAI({ baseURL: server.url, apiKey, maxRetries: 0 });

  it('streams the default echo reply with usage', async () => {
    const server = await openai();
    const chunks = await client(server).chat.completions.create({
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hello there' }] },
      ],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let contentChunks = 0;
    for await (const chunk of chunks) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) {
        text += choice.delta.content;
        contentChunks++;
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('echo: hello there');
    expect(contentChunks).toBeGreaterThan(1);
    expect(finish).toBe('stop');
    const [request] = server.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/v1/chat/completions', answered: true });
    expect(request!.headers.authorization).toBe('Bearer k');
    expect(request!.body.stream).toBe(true);
    expect(usage).toEqual(expect.objectContaining({ prompt_tokens: Math.ceil(request!.bytes / 4), completion_tokens: estimateTokens(text) }));
    expect(usage!.total_tokens).toBe(usage!.prompt_tokens + usage!.completion_tokens);
  });

  it('answers non-streaming requests with a chat.completion', async () => {
    const server = await openai();
    server.enqueue({ kind: 'text', text: 'Hi!', usage: { input: 7, output: 3 } });
    const completion = await client(server).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('fake-model');
    expect(completion.choices[0]).toMatchObject({ finish_reason: 'stop', message: { role: 'assistant', content: 'Hi!' } });
    expect(completion.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  });

  it('streams a tool call in fragments, then sees the tool message in the follow-up request', async () => {
    const server = await openai();
    server.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: weatherArgs, id: 'call_1' });
    const sdk = client(server);
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'weather in Paris?' }];

    const first = await sdk.chat.completions.create({ model: 'fake-model', messages, tools, stream: true });
    let id = '';
    let name = '';
    let args = '';
    let fragmentsSeen = 0;
    let finish: string | null = null;
    for await (const chunk of first) {
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        expect(call.index).toBe(0);
        id ||= call.id ?? '';
        name ||= call.function?.name ?? '';
        if (call.function?.arguments) {
          args += call.function.arguments;
          fragmentsSeen++;
        }
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect({ id, name, finish }).toEqual({ id: 'call_1', name: 'get_weather', finish: 'tool_calls' });
    expect(fragmentsSeen).toBeGreaterThan(1);
    expect(JSON.parse(args)).toEqual(weatherArgs);

    messages.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name, arguments: args } }] });
    messages.push({ role: 'tool', tool_call_id: id, content: 'sunny, 21 C' });
    const second = await sdk.chat.completions.create({ model: 'fake-model', messages, tools });
    expect(second.choices[0]!.message.content).toBe('echo: weather in Paris?');
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.body.messages).toContainEqual({ role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 C' });
  });

  it('returns non-streaming tool calls', async () => {
    const server = await openai();
    server.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: weatherArgs, text: 'Let me check.' });
    const completion = await client(server).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Let me check.');
    const call = choice.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('get_weather');
    expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual(weatherArgs);
  });

  it('lists models and lets a function step see the request', async () => {
    const server = await openai();
    const models = await client(server).models.list();
    expect(models.data.map((model) => model.id)).toContain('fake-model');
    server.enqueue((request) => ({ kind: 'text', text: `${request.body.messages.length} messages` }));
    const completion = await client(server).chat.completions.create({
      model: 'm',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
        { role: 'user', content: 'c' },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('3 messages');
    expect(server.requests.map((request) => `${request.method} ${request.path}`)).toEqual(['GET /v1/models', 'POST /v1/chat/completions']);
  });

  it('reports 429 with Retry-After as an APIError', async () => {
    const server = await openai();
    server.enqueue({ kind: 'error', status: 429, retryAfterSeconds: 7 });
    const error = await rejection(client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(429);
    expect(apiError.headers?.get('retry-after')).toBe('7');
    expect(apiError.code).toBe('rate_limit_exceeded');
    expect(server.requests[0]!.answered).toBe(true);
  });

  it('transcribes audio sent as the SDK sends it, and answers an error in the provider format', async () => {
    const server = await openai({
      transcribe: (audio) => (audio.bytes.toString() === 'bad' ? { status: 400, message: 'Invalid file format.' } : { text: `heard ${audio.bytes.length} bytes as ${audio.model}` }),
    });
    const result = await client(server).audio.transcriptions.create({ file: await toFile(Buffer.from('OggS voice'), 'voice.ogg', { type: 'audio/ogg' }), model: 'whisper-1' });
    expect(result.text).toBe('heard 10 bytes as whisper-1');
    expect(transcriptionRequests(server)[0]!.body).toEqual({ model: 'whisper-1', response_format: null, file: { name: 'voice.ogg', mime_type: 'audio/ogg', bytes: Buffer.from('OggS voice') } });
    const error = await rejection(client(server).audio.transcriptions.create({ file: await toFile(Buffer.from('bad'), 'bad.ogg'), model: 'whisper-1' }));
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.APIError>).message).toContain('Invalid file format.');
  });

  it('rejects a wrong API key with 401 and accepts the right one', async () => {
    const server = await openai({ apiKey: 'secret' });
    const error = await rejection(client(server, 'wrong').chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
    const ok = await client(server, 'secret').chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.choices[0]!.message.content).toBe('echo: hi');
  });

  it('hangs until the client times out', async () => {
    const server = await openai();
    server.enqueue({ kind: 'hang' });
    const error = await rejection(client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { timeout: 300 }));
    expect(error).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    expect(server.requests[0]!.answered).toBe(false);
  });

  it('ends a hanging request on close()', async () => {
    const server = await startFakeOpenAI({ defaultStep: { kind: 'hang' } });
    const pending = rejection(client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    await expect.poll(() => server.requests.length).toBe(1);
    await server.close();
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
  });

  it('resets the connection', async () => {
    const server = await openai();
    server.enqueue({ kind: 'reset' });
    const error = await rejection(client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }));
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(error).not.toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
  });

  it('delays replies', async () => {
    const server = await openai({ defaultDelayMs: 150 });
    const started = Date.now();
    await client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('delays each reply by its own random time within { min, max }', async () => {
    const server = await openai({ defaultDelayMs: { min: 60, max: 120 } });
    const times = [];
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      await client(server).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
      times.push(Date.now() - started);
    }
    for (const ms of times) expect(ms).toBeGreaterThanOrEqual(55);
    expect(Math.min(...times)).toBeLessThan(1_000);
  });
});

describe('fake OpenAI embeddings', () => {
  const cosine = (a: number[], b: number[]) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);

  it('serves the openai SDK deterministic unit vectors, nearer for texts that share words and parts of words, without taking a completion step', async () => {
    const server = await openai();
    server.enqueue({ kind: 'text', text: 'for the chat' });
    const client = new OpenAI({ baseURL: server.url, apiKey: 'k', maxRetries: 0 });
    const texts = ['I learned to sail on Lake Constance', 'Where did I learn sailing?', 'The boiler was serviced in October'];
    const answer = await client.embeddings.create({ model: 'fake-embedding', input: texts, encoding_format: 'float' });
    const vectors = answer.data.map((item) => item.embedding);
    expect(answer.data.map((item) => item.index)).toEqual([0, 1, 2]);
    expect(vectors.map((vector) => vector.length)).toEqual([FAKE_EMBEDDING_DIMENSIONS, FAKE_EMBEDDING_DIMENSIONS, FAKE_EMBEDDING_DIMENSIONS]);
    for (const vector of vectors) expect(Math.hypot(...vector)).toBeCloseTo(1, 6);
    expect(vectors[0]).toEqual(fakeEmbedding(texts[0]!));
    expect(cosine(vectors[0]!, vectors[1]!)).toBeGreaterThan(cosine(vectors[2]!, vectors[1]!) + 0.1);
    expect(answer.usage.prompt_tokens).toBeGreaterThan(0);
    const chat = await client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]!.message.content).toBe('for the chat');
  });

  it('fails as told, and refuses an input that is not text', async () => {
    let down = true;
    const server = await openai({ embeddings: () => (down ? { kind: 'error', status: 503 } : { kind: 'vectors' }) });
    const client = new OpenAI({ baseURL: server.url, apiKey: 'k', maxRetries: 0 });
    expect(await rejection(client.embeddings.create({ model: 'e', input: 'x' }))).toMatchObject({ status: 503 });
    down = false;
    expect((await client.embeddings.create({ model: 'e', input: 'x' })).data).toHaveLength(1);
    expect(await rejection(client.embeddings.create({ model: 'e', input: [] }))).toMatchObject({ status: 400 });
    expect(embeddingRequests(server)).toHaveLength(3);
  });
});

describe('fake Anthropic with the @anthropic-ai/sdk', () => {
  const client = (server: FakeLlmServer, apiKey = 'k') => new Anthropic({ baseURL: server.url, apiKey, maxRetries: 0 });
  const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];

  it('answers non-streaming messages.create with the default echo', async () => {
    const server = await anthropic();
    const message = await client(server).messages.create({ model: 'fake-model', max_tokens: 100, messages: [{ role: 'user', content: 'hello there' }] });
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'fake-model', stop_reason: 'end_turn', content: [{ type: 'text', text: 'echo: hello there' }] });
    const [request] = server.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/v1/messages', answered: true });
    expect(request!.headers['x-api-key']).toBe('k');
    expect(message.usage).toMatchObject({ input_tokens: Math.ceil(request!.bytes / 4), output_tokens: estimateTokens('echo: hello there') });
  });

  it('streams text through messages.stream', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'text', text: 'The quick brown fox', usage: { input: 11, output: 5 } });
    const messageStream = client(server).messages.stream({ model: 'fake-model', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    const deltas: string[] = [];
    messageStream.on('text', (delta) => deltas.push(delta));
    const message = await messageStream.finalMessage();
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('The quick brown fox');
    expect(message.content).toEqual([{ type: 'text', text: 'The quick brown fox' }]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.usage).toMatchObject({ input_tokens: 11, output_tokens: 5 });
  });

  it('streams raw events for a tool_use round and records the tool_result', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: weatherArgs, id: 'toolu_1', text: 'Checking.' });
    const sdk = client(server);
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'weather in Paris?' }];

    const events = await sdk.messages.create({ model: 'fake-model', max_tokens: 100, messages, tools, stream: true });
    const types: string[] = [];
    let json = '';
    let stopReason: string | null = null;
    for await (const event of events) {
      types.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') json += event.delta.partial_json;
      if (event.type === 'message_delta') stopReason = event.delta.stop_reason;
    }
    expect(types[0]).toBe('message_start');
    expect(types.at(-1)).toBe('message_stop');
    expect(types.filter((type) => type === 'content_block_start')).toHaveLength(2);
    expect(JSON.parse(json)).toEqual(weatherArgs);
    expect(stopReason).toBe('tool_use');

    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: 'Checking.' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: weatherArgs },
      ],
    });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] });
    const second = await sdk.messages.stream({ model: 'fake-model', max_tokens: 100, messages, tools }).finalMessage();
    expect(second.content).toEqual([{ type: 'text', text: 'echo: weather in Paris?' }]);
    expect(server.requests[1]!.body.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] });
  });

  it('assembles tool_use input in messages.stream and non-streaming create', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: weatherArgs }, { kind: 'tool_call', name: 'get_weather', arguments: weatherArgs });
    const streamed = await client(server)
      .messages.stream({ model: 'fake-model', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], tools })
      .finalMessage();
    const plain = await client(server).messages.create({ model: 'fake-model', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], tools });
    for (const message of [streamed, plain]) {
      expect(message.stop_reason).toBe('tool_use');
      expect(message.content).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'get_weather', input: weatherArgs }]);
    }
  });

  it('reports 429 with Retry-After as an APIError', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'error', status: 429, retryAfterSeconds: 7, message: 'slow down' });
    const error = await rejection(client(server).messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    const apiError = error as InstanceType<typeof Anthropic.APIError>;
    expect(apiError.status).toBe(429);
    expect(apiError.headers?.get('retry-after')).toBe('7');
    expect(apiError.type).toBe('rate_limit_error');
    expect(apiError.error).toEqual({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } });
  });

  it('rejects a wrong API key with 401', async () => {
    const server = await anthropic({ apiKey: 'secret' });
    const error = await rejection(client(server, 'wrong').messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(401);
    const ok = await client(server, 'secret').messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.content).toEqual([{ type: 'text', text: 'echo: hi' }]);
  });

  it('hangs until the client times out', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'hang' });
    const error = await rejection(client(server).messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], stream: true }, { timeout: 300 }));
    expect(error).toBeInstanceOf(Anthropic.APIConnectionTimeoutError);
    expect(server.requests[0]!.answered).toBe(false);
  });

  it('resets the connection', async () => {
    const server = await anthropic();
    server.enqueue({ kind: 'reset' });
    const error = await rejection(client(server).messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(Anthropic.APIConnectionError);
    expect(error).not.toBeInstanceOf(Anthropic.APIConnectionTimeoutError);
  });
});

describe('through pi-ai', () => {
  const model = (api: Api, baseUrl: string): Model<Api> => ({
    id: 'fake-model',
    name: 'fake',
    api,
    provider: 'fake',
    baseUrl,
    reasoning: false,
    input: ['text'],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 128000,
    maxTokens: 4096,
  });
  const context = (): Context => ({
    systemPrompt: 'You are terse.',
    messages: [{ role: 'user', content: 'What is the weather in Paris?', timestamp: Date.now() }],
    tools: [{ name: 'get_weather', description: 'Weather for a city', parameters: Type.Object({ city: Type.String(), days: Type.Number() }) }],
  });
  async function run(api: Api, server: FakeLlmServer, ctx: Context, options: StreamOptions = {}): Promise<{ events: string[]; message: AssistantMessage }> {
    const s = stream(model(api, server.url), ctx, { apiKey: 'k', ...options });
    const events: string[] = [];
    for await (const event of s) events.push(event.type);
    return { events, message: await s.result() };
  }

  const cases = [
    { api: 'openai-completions' as const, start: openai, toolMessage: { role: 'tool', tool_call_id: 'call_fake_1', content: 'sunny' } },
    {
      api: 'anthropic-messages' as const,
      start: anthropic,
      toolMessage: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_fake_1', content: 'sunny', is_error: false, cache_control: { type: 'ephemeral' } }] },
    },
  ];

  describe.each(cases)('$api', ({ api, start, toolMessage }) => {
    it('runs a tool round and a text reply', async () => {
      const server = await start();
      server.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: { city: 'Paris', days: 2 } });
      const ctx = context();

      const first = await run(api, server, ctx);
      expect(first.events).toContain('toolcall_delta');
      expect(first.events.at(-1)).toBe('done');
      expect(first.message.stopReason).toBe('toolUse');
      const call = first.message.content.find((block) => block.type === 'toolCall');
      expect(call).toMatchObject({ name: 'get_weather', arguments: { city: 'Paris', days: 2 } });
      expect(first.message.usage.input).toBeGreaterThan(0);
      expect(first.message.usage.input).toBe(Math.ceil(server.requests[0]!.bytes / 4));

      ctx.messages.push(first.message, {
        role: 'toolResult',
        toolCallId: call!.type === 'toolCall' ? call!.id : '',
        toolName: 'get_weather',
        content: [{ type: 'text', text: 'sunny' }],
        isError: false,
        timestamp: Date.now(),
      });
      const second = await run(api, server, ctx);
      expect(second.message.stopReason).toBe('stop');
      expect(second.message.content).toEqual([{ type: 'text', text: 'echo: What is the weather in Paris?' }]);
      expect(second.message.usage.output).toBe(estimateTokens('echo: What is the weather in Paris?'));
      expect(server.requests[1]!.body.messages).toContainEqual(toolMessage);
      expect(server.requests[1]!.body.stream).toBe(true);
    });

    it('surfaces errors as stopReason "error" with the SDK message', async () => {
      const server = await start({ apiKey: 'k' });
      const fail = async (options: StreamOptions) => {
        const { events, message } = await run(api, server, context(), { maxRetries: 0, ...options });
        expect(events).toEqual(['error']);
        return [message.stopReason, message.errorMessage];
      };
      const body = (type: string, message: string) => `{"type":"error","error":{"type":"${type}","message":"${message}"}}`;
      const apiMessage = (status: number, type: string, message: string) => `${status} ${api === 'openai-completions' ? message : body(type, message)}`;

      server.enqueue({ kind: 'error', status: 429, retryAfterSeconds: 1, message: 'slow down' });
      expect(await fail({})).toEqual(['error', apiMessage(429, 'rate_limit_error', 'slow down')]);
      expect(await fail({ apiKey: 'wrong' })).toEqual(['error', apiMessage(401, 'authentication_error', api === 'openai-completions' ? 'Incorrect API key provided.' : 'invalid x-api-key')]);
      server.enqueue({ kind: 'hang' });
      expect(await fail({ timeoutMs: 300 })).toEqual(['error', 'Request timed out.']);
      server.enqueue({ kind: 'reset' });
      expect(await fail({})).toEqual(['error', 'Connection error.']);
      server.enqueue({ kind: 'hang' });
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const aborted = await run(api, server, context(), { maxRetries: 0, signal: controller.signal });
      expect([aborted.message.stopReason, aborted.message.errorMessage]).toEqual(['aborted', 'Request was aborted.']);
    });

    it('retries 429 twice by default when maxRetries is not given', async () => {
      const server = await start();
      server.enqueue(...Array.from({ length: 3 }, () => ({ kind: 'error' as const, status: 429, retryAfterSeconds: 0 })));
      const { message } = await run(api, server, context());
      expect(message.stopReason).toBe('error');
      expect(server.requests.map((request) => request.headers['x-stainless-retry-count'])).toEqual(['0', '1', '2']);
    });
  });
});
