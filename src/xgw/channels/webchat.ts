import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { ClawError } from '../../core/errors.js';
import { agentEntry } from '../state.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, ConversationTarget, InboundFile, OutboundMessage, WebchatChannelConfig } from '../types.js';
import { closeHttp, listenHttp } from './http-listen.js';
import { PEER_ID, refuse } from './webchat-http.js';
import { WebchatInbound } from './webchat-inbound.js';
import { WebchatPeers } from './webchat-peers.js';
import { WebchatRoutes } from './webchat-routes.js';
import { loadPageScripts } from './webchat-scripts.js';
import { WebchatSockets } from './webchat-sockets.js';
import { loadWebchatPeerKey, loadWebchatToken, urlHost, webchatUrl } from './webchat-token.js';
import { WebchatUploads } from './webchat-uploads.js';

/**
 * The web chat: a small page and a WebSocket on loopback. Access needs the channel's token (kept
 * in `$THECLAW_HOME/xgw/webchat-<instance>.token`). The pages themselves hold no secret and are
 * served to anyone; the page takes the token from its URL (`/?token=T`) into localStorage
 * (which, unlike a cookie, no other port of this host can read) and offers it in the WebSocket
 * handshake, with the peer id the server issued it and the page keeps in localStorage, signed
 * (webchat-peers.ts: a client cannot pick its id, so people sharing the token cannot read each
 * other's chats). Each browser is one peer; every chat is a DM whose conversation id is the peer id. What the peer and the agent say is kept in the peer's mailbox
 * (GatewayState), so a reload, or a reply that arrives while the page is closed, shows it later.
 *
 * This module is the channel's life (start, stop, status) and what the gateway asks of it; the
 * HTTP side is webchat-routes.ts, the sockets webchat-sockets.ts, what a page sends
 * webchat-inbound.ts, and the protocol (JSON over `/ws`) webchat-protocol.ts.
 */

/** A streamed answer reaches the page at most this often. */
const DRAFT_INTERVAL_MS = 150;

export interface WebchatChannelOptions {
  /** Data root for the token file. Default: the home of the context the channel starts with. */
  home?: string;
}

export function createWebchatChannel(config: WebchatChannelConfig, options: WebchatChannelOptions = {}): ChannelAdapter {
  return new WebchatChannel(config, options);
}

class WebchatChannel implements ChannelAdapter {
  readonly type = 'webchat' as const;
  // The page shows the draft in place of the dots; the answer, stored as the only message, replaces it.
  readonly draftIntervalMs = DRAFT_INTERVAL_MS;
  private state: ChannelStatus['state'] = 'stopped';
  private detail: string | undefined;
  private context: ChannelContext | undefined;
  private server: Server | undefined;
  private sockets: WebchatSockets | undefined;
  private token = '';
  private port = 0;
  private readonly uploads: WebchatUploads;
  private readonly inbound: WebchatInbound;

  constructor(
    private readonly config: WebchatChannelConfig,
    private readonly options: WebchatChannelOptions,
  ) {
    this.uploads = new WebchatUploads(config.media.max_bytes);
    this.inbound = new WebchatInbound(config, this.uploads);
  }

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    const { config } = this;
    if (this.state === 'running' || this.state === 'starting') throw new ClawError('conflict', `${config.id} is running already`, { suggestion: 'stop it first' });
    this.context = context;
    this.state = 'starting';
    this.detail = undefined;
    let sockets: WebchatSockets;
    try {
      const home = this.options.home ?? context.home;
      this.token = loadWebchatToken(home, config.id);
      const peers = new WebchatPeers(loadWebchatPeerKey(home, config.id), config.id);
      const routes = new WebchatRoutes({ config, context, token: this.token, peers, scripts: loadPageScripts(), uploads: this.uploads, port: () => this.port });
      sockets = new WebchatSockets(config.id, context.logger, {
        message: (ws, peer, data, isBinary) => this.inbound.take(context, sockets, ws, peer, data, isBinary),
        history: (peer) => context.state.mailbox(config.id, peer),
      });
      this.sockets = sockets;
      sockets.start();
      const http = createServer((req, res) => routes.handle(req, res));
      this.server = http;
      http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        if (!sockets.open) return refuse(socket, 503, 'The chat is stopping');
        const admitted = routes.admit(req, socket);
        if (admitted !== undefined) sockets.accept(req, socket, head, admitted.peer, admitted.issued);
      });
      http.on('clientError', (_error, socket) => socket.destroy());
      const port = await listenHttp(http, config);
      if (this.server !== http) {
        http.close(); // stopped while it started
        throw new ClawError('aborted', `${config.id} was stopped while starting`, { suggestion: 'start it again' });
      }
      http.on('error', (error) => context.logger.error(`${config.id}: ${error.message}`));
      this.port = port;
    } catch (error) {
      await this.closeAll();
      const failure = error instanceof ClawError ? error : new ClawError('io', `${config.id} cannot start: ${String(error)}`, { cause: error });
      this.state = failure.kind === 'aborted' ? 'stopped' : 'error';
      this.detail = failure.kind === 'aborted' ? undefined : failure.message;
      throw failure;
    }
    sockets.keepAlive();
    this.state = 'running';
    context.logger.info(`${config.id}: listening on http://${urlHost(config.host)}:${this.port}/ (the URL with its token is in: xgw status)`);
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    const { config, context } = this;
    if (options.signal?.aborted) throw new ClawError('aborted', 'the delivery was cancelled', { suggestion: 'send it again' });
    if (options.sent?.length) return { messageIds: [...options.sent] }; // one part, sent before
    if (this.state !== 'running' || !context) throw new ClawError('io', `${config.id} is not running`, { suggestion: 'start it with: xgw start' });
    if (!PEER_ID.test(message.peerId)) {
      throw new ClawError('usage', `${JSON.stringify(message.peerId)} is not a web chat peer id`, {
        suggestion: 'web chat peers are 32 hex digits; take the peer id from the message being answered',
      });
    }
    if (message.conversationType !== 'dm' || message.conversationId !== message.peerId) {
      throw new ClawError('usage', 'web chat has only direct chats', { suggestion: 'send with conversation type dm and the peer id as conversation' });
    }
    const entry = context.state.addToMailbox(config.id, message.peerId, agentEntry(message, context.home), config.history_limit);
    this.sockets?.broadcast(message.peerId, { type: 'message', message: entry });
    return { messageIds: [String(entry.id)] };
  }

  async download(file: InboundFile): Promise<Buffer> {
    return this.uploads.data(file);
  }

  async typing(target: ConversationTarget): Promise<void> {
    this.sockets?.broadcast(target.peerId, { type: 'typing' });
  }

  async draft(target: ConversationTarget, replyTo: string, text: string): Promise<string> {
    this.sockets?.broadcast(target.peerId, { type: 'draft', reply_to: replyTo, text });
    return '';
  }

  async toolProgress(target: ConversationTarget, _replyTo: string | undefined, command: string): Promise<void> {
    this.sockets?.broadcast(target.peerId, { type: 'tool_progress', command });
  }

  status(): ChannelStatus {
    const url = this.state === 'running' ? webchatUrl(this.config.host, this.port, this.token) : undefined;
    return { id: this.id, type: this.type, state: this.state, ...(this.detail ? { detail: this.detail } : {}), ...(url ? { url } : {}) };
  }

  async stop(): Promise<void> {
    await this.closeAll();
    this.state = 'stopped';
    this.detail = undefined;
  }

  private async closeAll(): Promise<void> {
    await this.sockets?.close();
    const http = this.server;
    this.server = undefined;
    await closeHttp(http);
  }
}
