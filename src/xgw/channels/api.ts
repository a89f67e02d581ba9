import { createServer, type Server } from 'node:http';
import { ClawError } from '../../core/errors.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ApiChannelConfig, ChannelStatus, ConversationTarget, OutboundMessage } from '../types.js';
import { ApiAnswers } from './api-answers.js';
import { ApiRoutes } from './api-routes.js';
import { closeHttp, listenHttp } from './http-listen.js';

/**
 * The API for other programs: an OpenAI-compatible `POST /v1/chat/completions` and webhooks
 * (`POST /hooks/<name>`) over HTTP, on loopback by default. Each client holds a bearer token
 * (`xgw token add <name>`, api-tokens.ts) and is the peer `<name>` of the channel, so routes and
 * the agent's policy see it as `api:<instance>:<name>`. A request is one inbound message whose id
 * is the client's `Idempotency-Key` (else a fresh one); the answer is the agent's reply to it,
 * which arrives through `send` like any channel's (api-answers.ts matches the two).
 *
 * This module is the channel's life and what the gateway asks of it; the HTTP side is
 * api-routes.ts, the wire format api-openai.ts.
 */

/** A streamed answer grows at most this often. */
const DRAFT_INTERVAL_MS = 50;

export function createApiChannel(config: ApiChannelConfig, env: NodeJS.ProcessEnv): ChannelAdapter {
  return new ApiChannel(config, env);
}

class ApiChannel implements ChannelAdapter {
  readonly type = 'api' as const;
  readonly draftIntervalMs = DRAFT_INTERVAL_MS;
  private state: ChannelStatus['state'] = 'stopped';
  private detail: string | undefined;
  private server: Server | undefined;
  private port = 0;
  private readonly answers = new ApiAnswers();
  private nextId = 0;

  constructor(
    private readonly config: ApiChannelConfig,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    const { config } = this;
    if (this.state === 'running' || this.state === 'starting') throw new ClawError('conflict', `${config.id} is running already`, { suggestion: 'stop it first' });
    this.state = 'starting';
    this.detail = undefined;
    try {
      const routes = new ApiRoutes({ config, context, env: this.env, answers: this.answers });
      const http = createServer((req, res) => void routes.handle(req, res));
      this.server = http;
      http.on('clientError', (_error, socket) => socket.destroy());
      const port = await listenHttp(http, config);
      if (this.server !== http) {
        http.close();
        throw new ClawError('aborted', `${config.id} was stopped while starting`, { suggestion: 'start it again' });
      }
      http.on('error', (error) => context.logger.error(`${config.id}: ${error.message}`));
      this.port = port;
    } catch (error) {
      await this.close();
      const failure = error instanceof ClawError ? error : new ClawError('io', `${config.id} cannot start: ${String(error)}`, { cause: error });
      this.state = failure.kind === 'aborted' ? 'stopped' : 'error';
      this.detail = failure.kind === 'aborted' ? undefined : failure.message;
      throw failure;
    }
    this.state = 'running';
    context.logger.info(`${config.id}: listening on ${this.url()}`);
  }

  /** The agent's reply: the answer of the request it replies to, if one waits (a hook's conversation has none). */
  async send(message: OutboundMessage): Promise<{ messageIds: string[] }> {
    if (this.state !== 'running') throw new ClawError('io', `${this.config.id} is not running`, { suggestion: 'start it with: xgw start' });
    if (message.replyTo !== undefined) this.answers.answer(ApiAnswers.key(message.peerId, message.conversationId, message.replyTo), message.text);
    this.nextId += 1;
    return { messageIds: [`${Date.now()}-${this.nextId}`] };
  }

  async draft(target: ConversationTarget, replyTo: string, text: string): Promise<string> {
    this.answers.progress(ApiAnswers.key(target.peerId, target.conversationId, replyTo), text);
    return '';
  }

  status(): ChannelStatus {
    return { id: this.id, type: this.type, state: this.state, ...(this.detail ? { detail: this.detail } : {}), ...(this.state === 'running' ? { url: this.url() } : {}) };
  }

  async stop(): Promise<void> {
    await this.close();
    this.state = 'stopped';
    this.detail = undefined;
  }

  private url(): string {
    const host = this.config.host.includes(':') ? `[${this.config.host}]` : this.config.host;
    return `http://${host}:${this.port}/v1`;
  }

  private async close(): Promise<void> {
    const http = this.server;
    this.server = undefined;
    await closeHttp(http);
  }
}
