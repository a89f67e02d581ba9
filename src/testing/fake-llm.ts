// Over 400 lines: one fake of the model APIs that a test starts as one server (chat in OpenAI's and Anthropic's wire formats, embeddings, audio), its parts sharing the request log and the scripted steps.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDir } from '../core/home.js';

/**
 * Fake LLM provider servers on loopback that speak the real wire protocols (OpenAI chat completions
 * and embeddings, and Anthropic messages, streaming and not), so tests can drive the real SDKs — and
 * everything built on them — without a network. Each server records every request and answers from a queue of steps:
 *
 *   const llm = await startFakeOpenAI();
 *   llm.enqueue({ kind: 'tool_call', name: 'get_weather', arguments: { city: 'Paris' } }, { kind: 'text', text: 'Sunny.' });
 *   new OpenAI({ baseURL: llm.url, apiKey: 'k' });   // Anthropic: new Anthropic({ baseURL: llm.url, apiKey: 'k' })
 *   ...
 *   await llm.close();
 */

/** Provider JSON, read loosely (tests reach into arbitrary fields). */
// biome-ignore lint/suspicious/noExplicitAny: tests reach into provider JSON without declaring its shape.
export type LooseJson = any;

export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; undefined when the body was empty or not JSON. */
  body: LooseJson;
  /** Raw body length in bytes. */
  bytes: number;
  /** True once a complete response was handed to the socket (false for hang, reset, or a client that left). */
  answered: boolean;
}

export type FakeUsage = { input: number; output: number };

export type FakeStep =
  /** `streamMs`: a streamed answer comes word by word, this long apart (a model writing as it thinks). */
  | { kind: 'text'; text: string; delayMs?: number; usage?: FakeUsage; streamMs?: number }
  | { kind: 'tool_call'; name: string; arguments: Record<string, unknown>; id?: string; text?: string; delayMs?: number; usage?: FakeUsage }
  /** Several tool calls in one answer (one round), as models do for independent commands. */
  | { kind: 'tool_calls'; calls: { name: string; arguments: Record<string, unknown>; id?: string }[]; text?: string; delayMs?: number; usage?: FakeUsage }
  /** An HTTP error with a body in the provider's error format; `Retry-After` when retryAfterSeconds is given. */
  | { kind: 'error'; status: number; retryAfterSeconds?: number; message?: string; type?: string }
  /** Accepts the request and never answers, until the client disconnects or close() is called. */
  | { kind: 'hang' }
  /** Resets the connection without answering. */
  | { kind: 'reset' }
  /** Decides per request; may return another function. */
  | ((request: RecordedRequest) => FakeStep | Promise<FakeStep>);

/** What the embeddings endpoint (OpenAI's only) does with a request: vectors (fakeEmbedding), or fails. */
export type FakeEmbeddingStep =
  | { kind: 'vectors' }
  | { kind: 'error'; status: number; retryAfterSeconds?: number; message?: string }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | ((request: RecordedRequest) => FakeEmbeddingStep);

/** An audio file sent to the OpenAI fake's `/v1/audio/transcriptions`. */
export interface FakeAudio {
  model: string;
  /** The file's name in the form. */
  name: string;
  mime_type: string;
  bytes: Buffer;
}

/** What the fake answers a transcription: its text, or an HTTP error in the provider's format. */
export type FakeTranscription = { text: string } | { status: number; message?: string };

export interface FakeLlmOptions {
  /**
   * Answers `POST /v1/audio/transcriptions` (OpenAI only). Default: `{ text: 'fake transcript of
   * <file name>' }`. The request is recorded with `body: { model, response_format, file: {name, mime_type, bytes} }`.
   */
  transcribe?: (audio: FakeAudio) => FakeTranscription | Promise<FakeTranscription>;
  /** Step used when the queue is empty. Default: reply `echo: <text of the last user message>`. */
  defaultStep?: FakeStep;
  /**
   * Delay before answering (text, tool_call and error steps) when the step has no delayMs of its
   * own: a fixed number of ms, or `{ min, max }` for a delay drawn uniformly per request.
   */
  defaultDelayMs?: number | { min: number; max: number };
  /** When set, requests with another key (OpenAI: `Authorization: Bearer`, Anthropic: `x-api-key` or bearer) get 401. */
  apiKey?: string;
  /**
   * When set, a completion request over this many tokens (its body's bytes / 4, as in the fake usage) is refused
   * the way the provider refuses a context overflow — OpenAI: 400 with code
   * `context_length_exceeded`; Anthropic: 400 `invalid_request_error` "prompt is too long" —
   * before it takes a step from the queue.
   */
  contextWindow?: number;
  /** How `POST /v1/embeddings` answers (OpenAI only; it takes no completion step). Default: vectors. */
  embeddings?: FakeEmbeddingStep;
}

export interface FakeLlmServer {
  /** Base URL to give the client. */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Queue responses; each completion request takes the next step; when the queue is empty the default step is used. */
  enqueue(...steps: FakeStep[]): void;
  /**
   * Completion requests received and not answered yet (nor left by their client): how many calls
   * a client has at the model at once, counted rather than timed.
   */
  readonly inFlight: number;
  /** The most completion requests in flight at once so far. */
  readonly maxInFlight: number;
  /** Stops the server, ending hanging requests and open connections. */
  close(): Promise<void>;
}

/** Deterministic token estimate used for fake usage numbers: ceil(length / 4). */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

type FixedStep = Exclude<FakeStep, (request: RecordedRequest) => unknown>;

/** What a text or tool_call step becomes once ids and usage are settled. */
interface Reply {
  id: string;
  model: string;
  text: string;
  toolCalls: { id: string; name: string; arguments: Record<string, unknown> }[];
  usage: FakeUsage;
  /** Stream the text word by word, with this pause after each (the step's `streamMs`). */
  pause?: () => Promise<void>;
}

/** The parts that differ between providers. */
interface Protocol {
  /** Appended to `http://127.0.0.1:<port>` to form the client's base URL. */
  urlSuffix: string;
  completionPath: string;
  /** Where embeddings are served, for a protocol that has them. */
  embeddingsPath?: string;
  modelsPath: string;
  /** Speech to text, where the provider has it. */
  transcriptionPath?: string;
  requestIdHeader: string;
  idPrefixes: { response: string; toolCall: string };
  authorized(headers: IncomingHttpHeaders, apiKey: string): boolean;
  authError: { message: string; type: string };
  errorBody(status: number, message: string | undefined, type: string | undefined): unknown;
  /** The provider's 400 body for a request of `tokens` into a window of `max`. */
  overflowBody(tokens: number, max: number): unknown;
  models(): unknown;
  lastUserText(body: LooseJson): string;
  /** Writes a successful completion (streaming or JSON, as the request asked). */
  answer(res: ServerResponse, body: LooseJson, reply: Reply): void | Promise<void>;
}

const MODELS = ['fake-model', 'fake-model-large'];

// ---------------------------------------------------------------------------------------------
// OpenAI chat completions

const openaiProtocol: Protocol = {
  urlSuffix: '/v1',
  completionPath: '/v1/chat/completions',
  embeddingsPath: '/v1/embeddings',
  modelsPath: '/v1/models',
  transcriptionPath: '/v1/audio/transcriptions',
  requestIdHeader: 'x-request-id',
  idPrefixes: { response: 'chatcmpl-fake', toolCall: 'call_fake' },
  authorized: (headers, apiKey) => headers.authorization === `Bearer ${apiKey}`,
  authError: { message: 'Incorrect API key provided.', type: 'invalid_request_error' },
  errorBody(status, message, type) {
    const code = status === 401 ? 'invalid_api_key' : status === 429 ? 'rate_limit_exceeded' : null;
    const defaultType = status === 429 ? 'requests' : status >= 500 ? 'server_error' : 'invalid_request_error';
    return { error: { message: message ?? defaultMessage(status), type: type ?? defaultType, param: null, code } };
  },
  overflowBody: (tokens, max) => ({
    error: {
      message: `This model's maximum context length is ${max} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  }),
  models: () => ({ object: 'list', data: MODELS.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })) }),
  lastUserText(body) {
    const messages: LooseJson[] = Array.isArray(body?.messages) ? body.messages : [];
    const last = messages.findLast((message) => message?.role === 'user');
    return last ? textOf(last.content) : '';
  },
  async answer(res, body, reply) {
    const created = Math.floor(Date.now() / 1000);
    const finishReason = reply.toolCalls.length > 0 ? 'tool_calls' : 'stop';
    const usage = {
      prompt_tokens: reply.usage.input,
      completion_tokens: reply.usage.output,
      total_tokens: reply.usage.input + reply.usage.output,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    };
    const toolCalls = reply.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }));
    if (body.stream !== true) {
      const message = { role: 'assistant', content: toolCalls.length > 0 && !reply.text ? null : reply.text, refusal: null, ...(toolCalls.length > 0 && { tool_calls: toolCalls }) };
      sendJson(res, 200, { id: reply.id, object: 'chat.completion', created, model: reply.model, choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }], usage });
      return;
    }
    const includeUsage = body.stream_options?.include_usage === true;
    const base = { id: reply.id, object: 'chat.completion.chunk', created, model: reply.model, system_fingerprint: 'fp_fake' };
    const chunk = (delta: object, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage && { usage: null }) });
    const data = (value: unknown) => res.write(`data: ${JSON.stringify(value)}\n\n`);
    startSse(res);
    data(chunk({ role: 'assistant', content: '', refusal: null }));
    for (const piece of reply.pause ? words(reply.text) : fragments(reply.text)) {
      data(chunk({ content: piece }));
      await reply.pause?.();
    }
    toolCalls.forEach((toolCall, index) => {
      data(chunk({ tool_calls: [{ index, id: toolCall.id, type: 'function', function: { name: toolCall.function.name, arguments: '' } }] }));
      for (const piece of fragments(toolCall.function.arguments)) data(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    data(chunk({}, finishReason));
    if (includeUsage) data({ ...base, choices: [], usage });
    res.end('data: [DONE]\n\n');
  },
};

// ---------------------------------------------------------------------------------------------
// Anthropic messages

const anthropicErrorTypes: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

const anthropicProtocol: Protocol = {
  urlSuffix: '',
  completionPath: '/v1/messages',
  modelsPath: '/v1/models',
  requestIdHeader: 'request-id',
  idPrefixes: { response: 'msg_fake', toolCall: 'toolu_fake' },
  authorized: (headers, apiKey) => headers['x-api-key'] === apiKey || headers.authorization === `Bearer ${apiKey}`,
  authError: { message: 'invalid x-api-key', type: 'authentication_error' },
  errorBody(status, message, type) {
    const defaultType = anthropicErrorTypes[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    return { type: 'error', error: { type: type ?? defaultType, message: message ?? defaultMessage(status) } };
  },
  overflowBody: (tokens, max) => ({ type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${max} maximum` } }),
  models: () => ({
    data: MODELS.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
    has_more: false,
    first_id: MODELS[0],
    last_id: MODELS.at(-1),
  }),
  lastUserText(body) {
    // The last user message that carries text: a tool_result-only message is skipped, as OpenAI's `tool` role is.
    const messages: LooseJson[] = Array.isArray(body?.messages) ? body.messages : [];
    const last = messages.findLast((message) => message?.role === 'user' && textOf(message.content) !== '');
    return last ? textOf(last.content) : '';
  },
  answer(res, body, reply) {
    const stopReason = reply.toolCalls.length > 0 ? 'tool_use' : 'end_turn';
    const usage = { input_tokens: reply.usage.input, output_tokens: reply.usage.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    const blocks: object[] = [];
    if (reply.text || reply.toolCalls.length === 0) blocks.push({ type: 'text', text: reply.text });
    for (const call of reply.toolCalls) blocks.push({ type: 'tool_use', id: call.id, name: call.name, input: call.arguments });
    const message = { id: reply.id, type: 'message', role: 'assistant', model: reply.model, content: blocks, stop_reason: stopReason, stop_sequence: null, usage };
    if (body.stream !== true) return sendJson(res, 200, message);

    const event = (type: string, data: object) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    startSse(res);
    event('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } });
    event('ping', {});
    let index = 0;
    if (reply.text || reply.toolCalls.length === 0) {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      for (const text of fragments(reply.text)) event('content_block_delta', { index, delta: { type: 'text_delta', text } });
      event('content_block_stop', { index: index++ });
    }
    for (const { id, name, arguments: input } of reply.toolCalls) {
      event('content_block_start', { index, content_block: { type: 'tool_use', id, name, input: {} } });
      for (const partial_json of ['', ...fragments(JSON.stringify(input))]) event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } });
      event('content_block_stop', { index: index++ });
    }
    event('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage });
    event('message_stop', {});
    res.end();
  },
};

// ---------------------------------------------------------------------------------------------
// The shared server

export function startFakeOpenAI(options: FakeLlmOptions = {}): Promise<FakeLlmServer> {
  return startFakeServer(openaiProtocol, options);
}

export function startFakeAnthropic(options: FakeLlmOptions = {}): Promise<FakeLlmServer> {
  return startFakeServer(anthropicProtocol, options);
}

async function startFakeServer(protocol: Protocol, options: FakeLlmOptions): Promise<FakeLlmServer> {
  const requests: RecordedRequest[] = [];
  const queue: FakeStep[] = [];
  const sockets = new Set<Socket>();
  const pendingDelays = new Set<() => void>();
  let counter = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let closing: Promise<void> | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        pendingDelays.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      pendingDelays.add(done);
    });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let gone = false;
    res.on('close', () => (gone = true));
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const record: RecordedRequest = { method: req.method ?? 'GET', path, headers: req.headers, body: parseJson(raw), bytes: raw.length, answered: false };
    requests.push(record);
    res.on('finish', () => (record.answered = true));
    res.setHeader(protocol.requestIdHeader, `req_fake_${requests.length}`);
    const fail = (status: number, message?: string, type?: string, headers: Record<string, string> = {}) => sendJson(res, status, protocol.errorBody(status, message, type), headers);

    if (options.apiKey !== undefined && !protocol.authorized(req.headers, options.apiKey)) {
      return fail(401, protocol.authError.message, protocol.authError.type);
    }
    if (record.method === 'GET' && path === protocol.modelsPath) return sendJson(res, 200, protocol.models());
    if (record.method === 'POST' && path === protocol.embeddingsPath) return answerEmbeddings(req, res, record, options.embeddings ?? { kind: 'vectors' }, fail);
    if (record.method === 'POST' && path === protocol.transcriptionPath) {
      const form = await new Response(raw, { headers: { 'content-type': req.headers['content-type'] ?? '' } }).formData().catch(() => null);
      const file = form?.get('file');
      if (!form || !(file instanceof Blob)) return fail(400, 'Send the audio as multipart/form-data with a file field.');
      const audio: FakeAudio = { model: String(form.get('model') ?? ''), name: (file as File).name ?? 'file', mime_type: file.type, bytes: Buffer.from(await file.arrayBuffer()) };
      record.body = { model: audio.model, response_format: form.get('response_format'), file: { name: audio.name, mime_type: audio.mime_type, bytes: audio.bytes } };
      const answer = await (options.transcribe ?? ((a: FakeAudio) => ({ text: `fake transcript of ${a.name}` })))(audio);
      return 'text' in answer ? sendJson(res, 200, { text: answer.text }) : fail(answer.status, answer.message);
    }
    if (record.method !== 'POST' || path !== protocol.completionPath) return fail(404, `Unknown endpoint ${record.method} ${path}`);
    if (typeof record.body !== 'object' || record.body === null) return fail(400, 'The request body is not valid JSON.');
    const tokens = Math.ceil(record.bytes / 4);
    if (options.contextWindow !== undefined && tokens > options.contextWindow) return sendJson(res, 400, protocol.overflowBody(tokens, options.contextWindow));

    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.on('close', () => inFlight--);
    let step = queue.shift() ?? options.defaultStep ?? { kind: 'text', text: `echo: ${protocol.lastUserText(record.body)}` };
    while (typeof step === 'function') step = await step(record);
    const fixed: FixedStep = step;

    if (fixed.kind === 'hang') return; // answered by nobody; the socket ends when the client leaves or close() runs
    if (fixed.kind === 'reset') {
      req.socket.resetAndDestroy();
      return;
    }
    const delayMs = ('delayMs' in fixed ? fixed.delayMs : undefined) ?? defaultDelay(options.defaultDelayMs);
    if (delayMs > 0) await sleep(delayMs);
    if (gone || closing) return;

    if (fixed.kind === 'error') {
      const headers: Record<string, string> = fixed.retryAfterSeconds === undefined ? {} : { 'retry-after': String(fixed.retryAfterSeconds) };
      return fail(fixed.status, fixed.message, fixed.type, headers);
    }
    const n = ++counter;
    const text = fixed.kind === 'text' ? fixed.text : (fixed.text ?? '');
    const calls = fixed.kind === 'tool_call' ? [fixed] : fixed.kind === 'tool_calls' ? fixed.calls : [];
    const toolCalls = calls.map((call, i) => ({ id: call.id ?? `${protocol.idPrefixes.toolCall}_${n}${i ? `_${i}` : ''}`, name: call.name, arguments: call.arguments }));
    const replyChars = text.length + toolCalls.reduce((sum, call) => sum + call.name.length + JSON.stringify(call.arguments).length, 0);
    const usage = fixed.usage ?? { input: Math.ceil(record.bytes / 4), output: Math.ceil(replyChars / 4) };
    const model = typeof record.body.model === 'string' ? record.body.model : MODELS[0]!;
    const streamMs = fixed.kind === 'text' ? fixed.streamMs : undefined;
    await protocol.answer(res, record.body, { id: `${protocol.idPrefixes.response}_${n}`, model, text, toolCalls, usage, ...(streamMs ? { pause: () => sleep(streamMs) } : {}) });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, protocol.errorBody(500, `fake server error: ${String(error)}`, undefined));
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}${protocol.urlSuffix}`,
    requests,
    enqueue: (...steps) => void queue.push(...steps),
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const wake of [...pendingDelays]) wake();
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Embeddings

/** Dimensions of fakeEmbedding's vectors. */
export const FAKE_EMBEDDING_DIMENSIONS = 256;

/**
 * The fake server's embedding of a text: its words and their character trigrams (of the word with
 * a space either side), each hashed (FNV-1a) to a dimension with a sign, L2-normalised. Texts that
 * share words or parts of words ("sail", "sailing") come out close; it knows no meaning, so
 * "sister" is no nearer "brother" than any other word. Deterministic: a figure measured with it is
 * the same on every run. Not a real model's embedding.
 */
export function fakeEmbedding(text: string, dimensions = FAKE_EMBEDDING_DIMENSIONS): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const add = (feature: string, weight: number) => {
    const hash = fnv1a(feature);
    vector[hash % dimensions]! += hash & 0x80000000 ? -weight : weight;
  };
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    add(`w:${word}`, 1);
    const padded = ` ${word} `;
    for (let i = 0; i + 3 <= padded.length; i++) add(`t:${padded.slice(i, i + 3)}`, 0.5);
  }
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((value) => value / norm);
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

async function answerEmbeddings(
  req: IncomingMessage,
  res: ServerResponse,
  record: RecordedRequest,
  behaviour: FakeEmbeddingStep,
  fail: (status: number, message?: string, type?: string, headers?: Record<string, string>) => void,
): Promise<void> {
  let step = behaviour;
  while (typeof step === 'function') step = step(record);
  if (step.kind === 'hang') return;
  if (step.kind === 'reset') return void req.socket.resetAndDestroy();
  if (step.kind === 'error') return fail(step.status, step.message, undefined, step.retryAfterSeconds === undefined ? {} : { 'retry-after': String(step.retryAfterSeconds) });
  const input: unknown = record.body?.input;
  const texts = typeof input === 'string' ? [input] : Array.isArray(input) && input.every((item) => typeof item === 'string') ? (input as string[]) : null;
  if (texts === null || texts.length === 0) return fail(400, "'input' must be a string or a non-empty list of strings");
  const tokens = texts.reduce((sum, text) => sum + estimateTokens(text), 0);
  sendJson(res, 200, {
    object: 'list',
    data: texts.map((text, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(text) })),
    model: typeof record.body.model === 'string' ? record.body.model : 'fake-embedding',
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}

/** The embeddings requests a server received. */
export function embeddingRequests(server: FakeLlmServer): RecordedRequest[] {
  return server.requests.filter((request) => request.path === openaiProtocol.embeddingsPath);
}

// ---------------------------------------------------------------------------------------------
// Helpers

function defaultDelay(delay: FakeLlmOptions['defaultDelayMs']): number {
  if (delay === undefined || typeof delay === 'number') return delay ?? 0;
  return delay.min + Math.random() * (delay.max - delay.min);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
}

function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Text of a message's content: a string, or the text parts/blocks of an array joined by newlines. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part): part is { type: 'text'; text: string } => part?.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text)
    .join('\n');
}

/** Splits text into its words, each with the space before it. */
function words(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [text];
}

/** Splits text into up to `parts` pieces (by code point), the way streamed deltas arrive. */
function fragments(text: string, parts = 3): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / parts));
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(''));
  return pieces;
}

function defaultMessage(status: number): string {
  if (status === 429) return 'Rate limit reached for requests. Please try again later.';
  if (status === 529) return 'Overloaded';
  if (status >= 500) return 'The server had an error while processing your request.';
  return `Fake error ${status}`;
}

/** The chat completion requests an OpenAI server received (not its model listings). */
export function completionRequests(server: FakeLlmServer): RecordedRequest[] {
  return server.requests.filter((request) => request.path === openaiProtocol.completionPath);
}

/** The transcription requests an OpenAI server received. */
export function transcriptionRequests(server: FakeLlmServer): RecordedRequest[] {
  return server.requests.filter((request) => request.path === openaiProtocol.transcriptionPath);
}

/** An OpenAI request's system prompt. */
export function systemPromptOf(request: RecordedRequest): string {
  return String(chatMessages(request).find((message) => message.role === 'system')?.content ?? '');
}

/** The text of an OpenAI request's other messages, in order. */
export function conversationOf(request: RecordedRequest): string[] {
  return chatMessages(request)
    .filter((message) => message.role !== 'system')
    .map((message) => String(message.content ?? ''));
}

function chatMessages(request: RecordedRequest): LooseJson[] {
  return Array.isArray(request.body?.messages) ? request.body.messages : [];
}

export interface FakePaiConfigOptions {
  /** Default: openai-completions. */
  api?: string;
  /** Default: 100,000. */
  contextWindow?: number;
  /** More fields of the model entry, e.g. `cost: { input: 1, output: 2 }`. */
  modelFields?: string;
  /** Default: 3. */
  maxAttempts?: number;
  /** Default: 2. */
  timeoutSeconds?: number;
  /** More fields of the provider entry, e.g. `, api_key_env: FAKE_KEY` (with the leading comma). */
  providerFields?: string;
}

/** Writes `$home/pai/config.yaml` so that `fake/m1` (the default model) is this server. */
export function writeFakePaiConfig(home: string, server: FakeLlmServer, options: FakePaiConfigOptions = {}): void {
  const model = [`id: m1`, `context_window: ${options.contextWindow ?? 100_000}`, ...(options.modelFields ? [options.modelFields] : [])].join(', ');
  ensureDir(join(home, 'pai'));
  writeFileSync(
    join(home, 'pai', 'config.yaml'),
    [
      'default: fake/m1',
      'providers:',
      `  fake: { api: ${options.api ?? 'openai-completions'}, base_url: "${server.url}", models: [{ ${model} }]${options.providerFields ?? ''} }`,
      `retry: { max_attempts: ${options.maxAttempts ?? 3}, initial_delay_ms: 20 }`,
      `timeout_seconds: ${options.timeoutSeconds ?? 2}`,
      '',
    ].join('\n'),
  );
}
