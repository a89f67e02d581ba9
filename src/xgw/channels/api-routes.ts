import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeIssue, OWN_WORDING } from '../../core/validate.js';
import type { ChannelContext } from '../channel.js';
import type { ApiChannelConfig, InboundMessage, InboundOutcome } from '../types.js';
import { type Answer, ApiAnswers } from './api-answers.js';
import { hasHookSecret, hookText } from './api-hooks.js';
import { type ApiError, type ChatCompletionRequest, ChatCompletionRequestSchema, chunkEvent, type CompletionIdentity, completionObject, DONE_EVENT, errorBody, lastUserText } from './api-openai.js';
import { clientOfToken, listApiClients } from './api-tokens.js';

/**
 * The API channel's HTTP side: who asks (a client's bearer token, a hook's secret), what it asks
 * (the body, size-capped and checked), and the answer in OpenAI's wire format. Nothing reaches an
 * agent before the caller is known and the body passed its checks.
 */

/** The conversation of a client that names none (`user`). */
const DEFAULT_CONVERSATION = 'main';
/** An `Idempotency-Key` longer than this is refused. */
const MAX_REQUEST_ID = 128;

export interface ApiRoutesOptions {
  config: ApiChannelConfig;
  context: ChannelContext;
  /** Where the hooks' secrets are. */
  env: NodeJS.ProcessEnv;
  answers: ApiAnswers;
}

/** Thrown inside a handler: answered as OpenAI's error object. */
class Refusal extends Error {
  constructor(readonly error: ApiError) {
    super(error.message);
  }
}

const refuse = (status: number, type: ApiError['type'], code: string | null, message: string): Refusal => new Refusal({ status, type, code, message });

export class ApiRoutes {
  constructor(private readonly options: ApiRoutesOptions) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://api.invalid').pathname;
    try {
      if (req.method === 'POST' && path === '/v1/chat/completions') return await this.completions(req, res);
      const hook = /^\/hooks\/([^/]+)$/.exec(path);
      if (req.method === 'POST' && hook) return await this.hook(req, res, decodeURIComponent(hook[1]!));
      throw refuse(404, 'invalid_request_error', 'unknown_url', `Unknown request: ${req.method} ${path}. This API serves POST /v1/chat/completions and POST /hooks/<name>.`);
    } catch (error) {
      if (!(error instanceof Refusal)) this.options.context.logger.error(`${this.options.config.id}: ${error instanceof Error ? error.message : String(error)}`);
      const refusal = error instanceof Refusal ? error.error : { status: 500, type: 'server_error' as const, code: null, message: 'The gateway failed to handle the request; see xgw.log.' };
      if (res.headersSent) {
        // A stream under way: the error is its last event.
        res.end(`data: ${JSON.stringify(errorBody(refusal))}\n\n`);
        return;
      }
      sendJson(res, refusal.status, errorBody(refusal));
    }
  }

  private async completions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { config, answers } = this.options;
    const client = this.client(req);
    const request = parseRequest(await this.body(req));
    const text = lastUserText(request)?.trim();
    if (!text) throw refuse(400, 'invalid_request_error', null, 'messages has no user message with text: the agent is asked the last user message');
    const conversationId = request.user ?? DEFAULT_CONVERSATION;
    // Scoped to the client, so two clients' keys never meet.
    const messageId = `${client}:${this.requestId(req)}`;
    const message: InboundMessage = { channelId: config.id, conversationType: 'dm', conversationId, peerId: client, peerName: client, messageId, text };
    const outcome = await this.receive(message, request.model);
    if (outcome.kind !== 'accepted') throw outcomeRefusal(outcome);
    const key = ApiAnswers.key(client, conversationId, messageId);
    if (outcome.agentStopped && !answers.isAnswered(key)) {
      throw refuse(
        503,
        'server_error',
        'agent_stopped',
        `The agent "${outcome.agent}" is stopped: the message waits in its inbox and is answered once it is started (agent start ${outcome.agent}); send the request again with the same Idempotency-Key to get the answer.`,
      );
    }
    const identity: CompletionIdentity = { id: `chatcmpl-${config.id.replace(':', '-')}-${outcome.eventId}`, created: Math.floor(Date.now() / 1000), model: outcome.agent };
    const signal = this.answerSignal(req, res);
    if (request.stream) return this.stream(res, key, identity, signal);
    const answer = await this.answer(key, { signal });
    sendJson(res, 200, completionObject({ ...identity, created: answer.created }, answer.text));
  }

  private async stream(res: ServerResponse, key: string, identity: CompletionIdentity, signal: AbortSignal): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(chunkEvent(identity, { role: 'assistant', content: '' }));
    let shown = '';
    // Drafts replace each other; only a draft that extends what was shown can go out as a delta.
    const show = (text: string): void => {
      if (!this.options.config.stream || !text.startsWith(shown) || text === shown) return;
      res.write(chunkEvent(identity, { content: text.slice(shown.length) }));
      shown = text;
    };
    const answer = await this.answer(key, { signal, onProgress: show });
    if (answer.text.startsWith(shown)) show(answer.text);
    else res.write(chunkEvent(identity, { content: `\n\n${answer.text}` })); // the answer took another turn than its drafts
    res.write(chunkEvent(identity, {}, true));
    res.end(DONE_EVENT);
  }

  private async answer(key: string, watch: Parameters<ApiAnswers['wait']>[1]): Promise<Answer> {
    try {
      return await this.options.answers.wait(key, watch);
    } catch {
      throw refuse(
        504,
        'server_error',
        'answer_timeout',
        `No answer within ${this.options.config.answer_timeout_seconds} s; send the request again with the same Idempotency-Key to get the answer when it comes.`,
      );
    }
  }

  /** Aborts at the answer timeout, or when the caller hangs up. */
  private answerSignal(req: IncomingMessage, res: ServerResponse): AbortSignal {
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    req.on('aborted', () => gone.abort());
    return AbortSignal.any([gone.signal, AbortSignal.timeout(this.options.config.answer_timeout_seconds * 1000)]);
  }

  private async hook(req: IncomingMessage, res: ServerResponse, name: string): Promise<void> {
    const { config, context, env } = this.options;
    const hook = config.hooks.find((candidate) => candidate.name === name);
    if (!hook) throw refuse(404, 'invalid_request_error', 'unknown_hook', `No hook named ${JSON.stringify(name)} is configured on ${config.id}.`);
    const body = await this.body(req);
    const secret = env[hook.secret_env];
    if (!secret) context.logger.warn(`${config.id}: hook ${name} refused a call: ${hook.secret_env} is not set in xgw's environment`);
    if (!hasHookSecret(secret, req.headers, body))
      throw refuse(401, 'authentication_error', 'invalid_hook_secret', `Wrong or missing secret for hook ${name}: send it in X-Hook-Secret, or the body's HMAC-SHA256 in X-Hook-Signature.`);
    const conversation = `hook-${name}`;
    const text = hookText(name, req.headers['content-type'], body);
    const message: InboundMessage = {
      channelId: config.id,
      conversationType: 'dm',
      conversationId: conversation,
      peerId: conversation,
      peerName: `hook ${name}`,
      messageId: this.requestId(req),
      text,
    };
    const outcome = await this.receive(message, hook.agent);
    if (outcome.kind !== 'accepted') throw outcomeRefusal(outcome);
    sendJson(res, 202, { id: outcome.eventId, agent: outcome.agent, duplicate: outcome.duplicate });
  }

  private async receive(message: InboundMessage, agent: string): Promise<InboundOutcome> {
    try {
      return await this.options.context.receive(message, agent);
    } catch {
      // An agent id that cannot be one (requireAgentId): no such agent, as for a missing one.
      return { kind: 'missing_agent', agent };
    }
  }

  /** The client of the request's bearer token; a request without a valid one is refused. */
  private client(req: IncomingMessage): string {
    const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    const client = match ? clientOfToken(listApiClients(this.options.context.home), match[1]!) : undefined;
    if (!client) throw refuse(401, 'invalid_request_error', 'invalid_api_key', 'Missing or wrong bearer token: send Authorization: Bearer <token>, a token from: xgw token add <name>.');
    return client;
  }

  private requestId(req: IncomingMessage): string {
    const key = req.headers['idempotency-key'];
    const given = Array.isArray(key) ? key[0] : key;
    if (given === undefined || given === '') return randomUUID();
    if (given.length > MAX_REQUEST_ID) throw refuse(400, 'invalid_request_error', null, `Idempotency-Key is longer than ${MAX_REQUEST_ID} characters.`);
    return given;
  }

  /** The body, refused (413) past max_body_bytes without reading the rest. */
  private async body(req: IncomingMessage): Promise<Buffer> {
    const limit = this.options.config.max_body_bytes;
    const tooLarge = (): Refusal => refuse(413, 'invalid_request_error', 'request_too_large', `The body is larger than ${limit} bytes (max_body_bytes of ${this.options.config.id}).`);
    if (Number(req.headers['content-length'] ?? 0) > limit) throw tooLarge();
    const parts: Buffer[] = [];
    let size = 0;
    for await (const part of req) {
      size += (part as Buffer).length;
      if (size > limit) throw tooLarge();
      parts.push(part as Buffer);
    }
    return Buffer.concat(parts);
  }
}

function parseRequest(body: Buffer): ChatCompletionRequest {
  let raw: unknown;
  try {
    raw = JSON.parse(body.toString('utf8'));
  } catch {
    throw refuse(400, 'invalid_request_error', null, 'The body is not JSON: send a chat completion request, e.g. {"model": "admin", "messages": [{"role": "user", "content": "hi"}]}.');
  }
  const parsed = ChatCompletionRequestSchema.safeParse(raw, OWN_WORDING);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Refusal({ status: 400, type: 'invalid_request_error', code: null, message: `Invalid request: ${describeIssue(issue)}.`, param: issue.path.map(String).join('.') });
  }
  return parsed.data;
}

/** Why a message did not reach an agent, as the caller is told. */
function outcomeRefusal(outcome: Exclude<InboundOutcome, { kind: 'accepted' }>): Refusal {
  switch (outcome.kind) {
    case 'missing_agent':
      return refuse(404, 'invalid_request_error', 'model_not_found', `The model "${outcome.agent}" does not exist: the model names an agent (agent list shows them).`);
    case 'no_route':
      return refuse(404, 'invalid_request_error', 'model_not_found', 'No agent takes messages from this client.');
    case 'rate_limited':
      return refuse(429, 'rate_limit_error', 'rate_limit_exceeded', `More than ${outcome.limit} requests in ${outcome.per_seconds} s; try again in ${outcome.retry_after_seconds} s.`);
    case 'refused':
      return refuse(413, 'invalid_request_error', 'request_too_large', `The message is too long for an agent's inbox (${outcome.limit_bytes} bytes at most).`);
    case 'pairing':
      return refuse(403, 'invalid_request_error', 'pairing_required', `This client is not admitted yet: the owner approves it with: xgw pair approve ${outcome.code}.`);
    case 'denied':
      return refuse(403, 'invalid_request_error', 'not_admitted', `This client is not admitted (${outcome.reason}).`);
    case 'unsupported':
    case 'file_failed':
    case 'kept': // only a group's messages are kept, and an API client writes in none
      return refuse(400, 'invalid_request_error', null, 'The request holds something an agent cannot take.');
  }
}

function sendJson(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}
