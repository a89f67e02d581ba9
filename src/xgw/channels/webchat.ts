import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import * as z from 'zod/mini';
import { ClawError, errnoCode, isClawError } from '../../core/errors.js';
import { agentEntry } from '../state.js';
import type { ChannelAdapter, ChannelContext, ChannelSendOptions, ChannelStatus, InboundOutcome, OutboundMessage, WebchatChannelConfig } from '../types.js';
import { bearerToken, expireLegacyCookies, readHandshake, refuse, safeEqual, unauthorized, WEBCHAT_PROTOCOL } from './webchat-http.js';
import { WEBCHAT_PAGE } from './webchat-page.js';
import { deliveryOf, notPassedOn } from '../notices.js';
import { FILE_NAME_HEADER, FILE_PATH, MAX_TEXT_BYTES, PEER_HEADER, UPLOAD_PATH, type ClientMessage, type Delivery, type ServerMessage } from './webchat-protocol.js';
import { WebchatUploads } from './webchat-uploads.js';
import { loadPageScripts } from './webchat-scripts.js';
import { STATUS_PAGE } from './webchat-status-page.js';
import { loadWebchatToken, urlHost, webchatUrl } from './webchat-token.js';

/**
 * The web chat: a small page and a WebSocket on loopback. Access needs the channel's token (kept
 * in `$THECLAW_HOME/xgw/webchat-<instance>.token`). The pages themselves hold no secret and are
 * served to anyone; the page takes the token from its URL (`/?token=T`) into localStorage
 * (which, unlike a cookie, no other port of this host can read) and offers it in the WebSocket
 * handshake, with the peer id the page keeps in localStorage (see webchat-http.ts). Each browser
 * is one peer; every chat is a DM whose conversation id is the peer id. What the peer and the agent say is kept in the peer's mailbox
 * (GatewayState), so a reload, or a reply that arrives while the page is closed, shows it later.
 *
 * The protocol (JSON over `/ws`) is webchat-protocol.ts.
 */

/** Client messages one socket may have waiting to be handled; past that it is closed (1008). */
export const MAX_QUEUED_MESSAGES = 100;
// Frames larger than this are cut off by `ws` (close 1009); smaller oversize texts get a polite
// error. JSON escaping can make a frame up to 6x its text.
const MAX_FRAME_BYTES = 6 * MAX_TEXT_BYTES + 1024;
const PEER_ID = /^[0-9a-f]{32}$/;
/** Both pages load nothing from elsewhere, run no inline script, and nothing may frame them. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};
const PING_INTERVAL_MS = 30_000;
/** Files one message may carry. */
const MAX_FILES = 4;
/** A streamed answer reaches the page at most this often. */
const DRAFT_INTERVAL_MS = 150;
const STOP_GRACE_MS = 1_000;
/** Client message ids remembered per channel (with what became of them), so a resend after a reconnect is only acked. */
const RECENT_IDS = 2_000;

const ClientMessageSchema: z.ZodMiniType<ClientMessage> = z.object({
  type: z.literal('message'),
  id: z.string().check(z.regex(/^[A-Za-z0-9_-]{1,64}$/)),
  text: z.string(),
  files: z.optional(z.array(z.object({ id: z.string().check(z.regex(/^[0-9a-f]{32}$/)) })).check(z.maxLength(MAX_FILES))),
});

export interface WebchatChannelOptions {
  /** Data root for the token file. Default: the home of the context the channel starts with. */
  home?: string;
}

export function createWebchatChannel(config: WebchatChannelConfig, options: WebchatChannelOptions = {}): ChannelAdapter {
  let state: ChannelStatus['state'] = 'stopped';
  let detail: string | undefined;
  let context: ChannelContext | undefined;
  let server: Server | undefined;
  let wss: WebSocketServer | undefined;
  let pinger: NodeJS.Timeout | undefined;
  let token = '';
  let pageScripts: Record<string, string> = {};
  const pageScript = (pathname: string): string | undefined => (Object.hasOwn(pageScripts, pathname) ? pageScripts[pathname] : undefined);
  let port = 0;
  const sockets = new Map<string, Set<WebSocket>>();
  const alive = new WeakSet<WebSocket>();
  const recentIds = new Map<string, Delivery>();
  const uploads = new WebchatUploads(config.media.max_bytes);

  const pageHost = urlHost(config.host);
  // Pages this server can have served: by the configured address, and by `localhost` where that
  // reaches it. Never by another name, which a foreign site could rebind to this machine.
  const isAllowedOrigin = (origin: string | undefined): boolean => {
    const names = config.host === 'localhost' ? ['localhost', '127.0.0.1', '[::1]'] : config.host === '127.0.0.1' || config.host === '::1' ? [pageHost, 'localhost'] : [pageHost];
    return origin !== undefined && names.some((name) => origin === `http://${name}:${port}`);
  };
  const hasToken = (candidate: string | undefined): boolean => candidate !== undefined && safeEqual(candidate, token);

  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const script = pageScript(url.pathname);
    if (script !== undefined) return void serveScript(req, res, script);
    if (url.pathname === UPLOAD_PATH && hasToken(bearerToken(req.headers.authorization))) return void handleUpload(req, res);
    if (url.pathname === FILE_PATH && hasToken(bearerToken(req.headers.authorization))) return void serveFile(req, res, url.searchParams.get('ref') ?? '');
    const isPage = url.pathname === '/' || url.pathname === '/status';
    // A page is served without the token (it holds none), but a wrong one in its URL is told at once.
    const queryToken = url.searchParams.get('token');
    if (isPage ? queryToken !== null && !hasToken(queryToken) : !hasToken(bearerToken(req.headers.authorization))) {
      unauthorized(res);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Method not allowed\n');
    }
    if (url.pathname === '/ws') {
      res.writeHead(426, { Upgrade: 'websocket', 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('This address takes WebSocket connections only\n');
    }
    if ((url.pathname === '/status' || url.pathname === '/status.json') && config.access !== 'open') {
      // Under pairing or an allowlist the token is shared with people the owner chats with; the
      // status page shows every conversation, so only the owner's open web chat serves it.
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end(`The status page is served only by a web chat with access: open (${config.id} has access: ${config.access})\n`);
    }
    if (url.pathname === '/status.json') return void serveSystemStatus(res);
    if (!isPage) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Not found\n');
    }
    const headers: Record<string, string | string[]> = { ...PAGE_HEADERS };
    const expired = expireLegacyCookies(req.headers.cookie, port);
    if (expired.length > 0) headers['Set-Cookie'] = expired;
    res.writeHead(200, headers);
    res.end(url.pathname === '/status' ? STATUS_PAGE : WEBCHAT_PAGE);
  }

  /** A file for the peer's next message (see WebchatUploads). */
  async function handleUpload(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const json = (status: number, body: object) => {
      res.writeHead(status, {
        'Content-Type': 'application/json; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Content-Type-Options': 'nosniff',
        ...(status === 413 ? { Connection: 'close' } : {}),
      });
      res.end(JSON.stringify(body));
    };
    const peer = req.headers[PEER_HEADER];
    if (req.method !== 'POST') return json(405, { error: 'upload with POST' });
    if (typeof peer !== 'string' || !PEER_ID.test(peer)) return json(400, { error: 'no peer id: reload the page' });
    let name: string;
    try {
      name = decodeURIComponent(String(req.headers[FILE_NAME_HEADER] ?? 'file'));
    } catch {
      name = 'file';
    }
    try {
      json(200, { id: await uploads.receive(req, peer, name) });
    } catch (error) {
      json(isClawError(error, 'usage') ? 413 : 500, { error: error instanceof Error ? error.message : String(error) });
    }
  }

  /** A file the agent sent this peer (and only such a file: the mailbox says which). */
  function serveFile(req: IncomingMessage, res: ServerResponse, ref: string): void {
    const peer = req.headers[PEER_HEADER];
    const refuse = (status: number, text: string) => {
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(`${text}\n`);
    };
    if (typeof peer !== 'string' || !PEER_ID.test(peer) || !context!.state.hasFile(config.id, peer, ref)) return void refuse(404, 'No such file in this chat');
    const path = join(context!.home, ref);
    let data: Buffer;
    try {
      data = readFileSync(path);
    } catch {
      return void refuse(410, 'The file is gone');
    }
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(ref.split('/').at(-1)!)}`,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    });
    res.end(data);
  }

  /** The pages' scripts, like the pages, hold no secret: served to anyone, read once. */
  function serveScript(req: IncomingMessage, res: ServerResponse, script: string): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Method not allowed\n');
    }
    res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
    res.end(req.method === 'HEAD' ? undefined : script);
  }

  async function serveSystemStatus(res: ServerResponse): Promise<void> {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
      res.end(JSON.stringify(body));
    };
    const source = context?.systemStatus;
    if (!source) return json(503, { error: 'this gateway has no status source' });
    try {
      json(200, await source());
    } catch (error) {
      context!.logger.warn(`${config.id}: status page: ${error instanceof Error ? error.message : String(error)}`);
      json(503, { error: error instanceof Error ? error.message : String(error) });
    }
  }

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const offered = readHandshake(req.headers['sec-websocket-protocol']);
    const log = context!.logger;
    if (!wss) {
      refuse(socket, 503, 'The chat is stopping');
      return;
    }
    if (url.pathname !== '/ws') {
      refuse(socket, 404, 'Not found');
      return;
    }
    if (!hasToken(offered.token)) {
      log.info(`${config.id}: refused a WebSocket without a valid token`);
      refuse(socket, 401, 'Unauthorized: open the URL printed by xgw status');
      return;
    }
    const origin = req.headers.origin;
    if (!isAllowedOrigin(origin)) {
      log.warn(`${config.id}: refused a WebSocket from origin ${JSON.stringify(origin ?? null)}`);
      refuse(socket, 403, 'Forbidden origin');
      return;
    }
    const peer = offered.peer;
    if (peer === undefined || !PEER_ID.test(peer)) {
      refuse(socket, 400, 'No peer id: reload the page');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, peer));
  }

  function onConnection(ws: WebSocket, peer: string): void {
    const { state: gatewayState, logger } = context!;
    let peerSockets = sockets.get(peer);
    if (!peerSockets) {
      peerSockets = new Set();
      sockets.set(peer, peerSockets);
    }
    peerSockets.add(ws);
    alive.add(ws);
    logger.debug(`${config.id}: peer ${peer} connected (${peerSockets.size} open)`);
    ws.on('pong', () => alive.add(ws));
    ws.on('error', (error) => logger.debug(`${config.id}: socket of peer ${peer}: ${error.message}`));
    ws.on('close', () => {
      peerSockets.delete(ws);
      if (peerSockets.size === 0) sockets.delete(peer);
      logger.debug(`${config.id}: peer ${peer} disconnected`);
    });
    // One message at a time per socket, so the mailbox keeps the order the peer wrote in; a
    // client that floods the queue is cut off (its page reconnects and resends what is unacked).
    let queue = Promise.resolve();
    let queued = 0;
    ws.on('message', (data, isBinary) => {
      if (ws.readyState !== ws.OPEN) return;
      if (queued >= MAX_QUEUED_MESSAGES) {
        logger.warn(`${config.id}: peer ${peer} sent more than ${MAX_QUEUED_MESSAGES} messages before they could be handled; closing its connection`);
        return ws.close(1008, 'too many messages at once');
      }
      queued += 1;
      queue = queue
        .then(() => onClientMessage(ws, peer, data, isBinary))
        .catch((error: unknown) => {
          logger.error(`${config.id}: message from peer ${peer} failed: ${error instanceof Error ? error.message : String(error)}`);
        })
        .finally(() => (queued -= 1));
    });
    sendJson(ws, { type: 'history', messages: gatewayState.mailbox(config.id, peer) });
  }

  async function onClientMessage(ws: WebSocket, peer: string, data: RawData, isBinary: boolean): Promise<void> {
    const { state: gatewayState } = context!;
    let json: unknown;
    try {
      json = isBinary ? undefined : JSON.parse(rawText(data));
    } catch {
      json = undefined;
    }
    const parsed = ClientMessageSchema.safeParse(json);
    if (!parsed.success) return sendJson(ws, { type: 'error', text: 'The page sent something the server does not understand. Reload it.' });
    const { id, text } = parsed.data;
    const files = (parsed.data.files ?? []).map((file) => uploads.find(peer, file.id));
    if (files.some((file) => file === undefined)) {
      return sendJson(ws, { type: 'error', id, text: 'A file of that message is no longer held (an upload waits 10 minutes). Attach it again.' });
    }
    const held = files as NonNullable<(typeof files)[number]>[];
    if (Buffer.byteLength(text) > MAX_TEXT_BYTES) {
      return sendJson(ws, { type: 'error', id, text: `That message is too long (the limit is ${MAX_TEXT_BYTES / 1024} KB). Split it or shorten it.` });
    }
    if (text.trim() === '' && held.length === 0) return sendJson(ws, { type: 'error', id, text: 'That message is empty.' });
    // Frames are UTF-8 (ws closes a connection that sends other bytes with 1007), but JSON can
    // still spell a lone surrogate ("\ud800"), which the mailbox (SQLite text) cannot keep as it is.
    if (!text.isWellFormed()) return sendJson(ws, { type: 'error', id, text: 'That message holds a broken character (a lone UTF-16 surrogate). Retype it.' });
    const key = `${peer}:${id}`;
    const known = recentIds.get(key);
    if (known) return sendJson(ws, { type: 'ack', id, delivery: known });

    let outcome: InboundOutcome;
    try {
      outcome = await context!.receive({ channelId: config.id, conversationType: 'dm', conversationId: peer, peerId: peer, messageId: id, text, ...(held.length ? { files: held } : {}) });
    } catch (error) {
      context!.logger.error(`${config.id}: could not take a message from peer ${peer}: ${error instanceof Error ? error.message : String(error)}`);
      return sendJson(ws, { type: 'error', id, text: 'The message could not be delivered. Try again in a moment; the owner can look at the xgw log.' });
    }
    const delivery = deliveryOf(outcome);
    remember(key, delivery);
    uploads.forget(held.map((file) => file.ref));
    if (!(outcome.kind === 'accepted' && outcome.duplicate)) {
      const shown = held.length ? { files: held.map((file) => ({ name: file.name, bytes: file.bytes })) } : {};
      const entry = gatewayState.addToMailbox(config.id, peer, { role: 'user', text, reply_to: null, message_id: id, ...shown }, config.history_limit);
      broadcast(peer, { type: 'message', message: entry }, ws); // the peer's other tabs
    }
    sendJson(ws, { type: 'ack', id, delivery });
    const notice = context!.noticeFor(outcome) ?? notPassedOn(outcome);
    if (notice !== null) {
      const entry = gatewayState.addToMailbox(config.id, peer, { role: 'system', text: notice, reply_to: null }, config.history_limit);
      broadcast(peer, { type: 'message', message: entry });
    }
  }

  function remember(key: string, delivery: Delivery): void {
    recentIds.set(key, delivery);
    if (recentIds.size > RECENT_IDS) recentIds.delete(recentIds.keys().next().value!);
  }

  function broadcast(peer: string, payload: ServerMessage, except?: WebSocket): void {
    for (const ws of sockets.get(peer) ?? []) if (ws !== except) sendJson(ws, payload);
  }

  return {
    id: config.id,
    type: 'webchat',

    async start(ctx) {
      if (state === 'running' || state === 'starting') throw new ClawError('conflict', `${config.id} is running already`, { suggestion: 'stop it first' });
      context = ctx;
      state = 'starting';
      detail = undefined;
      try {
        token = loadWebchatToken(options.home ?? ctx.home, config.id);
        pageScripts = loadPageScripts();
        wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, handleProtocols: () => WEBCHAT_PROTOCOL });
        const http = createServer(handleRequest);
        server = http;
        http.on('upgrade', handleUpgrade);
        http.on('clientError', (_error, socket) => socket.destroy());
        await new Promise<void>((resolve, reject) => {
          http.once('error', reject);
          http.listen(config.port, config.host, () => {
            http.off('error', reject);
            resolve();
          });
        });
        if (server !== http) {
          http.close(); // stopped while it started
          throw new ClawError('aborted', `${config.id} was stopped while starting`, { suggestion: 'start it again' });
        }
        http.on('error', (error) => ctx.logger.error(`${config.id}: ${error.message}`));
        port = (http.address() as AddressInfo).port;
      } catch (error) {
        await closeAll();
        const failure = startError(error, config);
        state = failure.kind === 'aborted' ? 'stopped' : 'error';
        detail = failure.kind === 'aborted' ? undefined : failure.message;
        throw failure;
      }
      pinger = setInterval(() => {
        for (const ws of wss?.clients ?? []) {
          if (!alive.has(ws)) ws.terminate();
          else {
            alive.delete(ws);
            ws.ping();
          }
        }
      }, PING_INTERVAL_MS);
      pinger.unref();
      state = 'running';
      ctx.logger.info(`${config.id}: listening on http://${pageHost}:${port}/ (the URL with its token is in: xgw status)`);
    },

    async send(message: OutboundMessage, options: ChannelSendOptions = {}) {
      if (options.signal?.aborted) throw new ClawError('aborted', 'the delivery was cancelled', { suggestion: 'send it again' });
      if (options.sent?.length) return { messageIds: [...options.sent] }; // one part, sent before
      if (state !== 'running' || !context) throw new ClawError('io', `${config.id} is not running`, { suggestion: 'start it with: xgw start' });
      if (!PEER_ID.test(message.peerId)) {
        throw new ClawError('usage', `${JSON.stringify(message.peerId)} is not a web chat peer id`, {
          suggestion: 'web chat peers are 32 hex digits; take the peer id from the message being answered',
        });
      }
      if (message.conversationType !== 'dm' || message.conversationId !== message.peerId) {
        throw new ClawError('usage', 'web chat has only direct chats', { suggestion: 'send with conversation type dm and the peer id as conversation' });
      }
      const entry = context.state.addToMailbox(config.id, message.peerId, agentEntry(message, context.home), config.history_limit);
      broadcast(message.peerId, { type: 'message', message: entry });
      return { messageIds: [String(entry.id)] };
    },

    async download(file) {
      return uploads.data(file);
    },

    async typing(target) {
      broadcast(target.peerId, { type: 'typing' });
    },

    // The page shows the draft in place of the dots; the answer, stored as the only message, replaces it.
    draftIntervalMs: DRAFT_INTERVAL_MS,
    async draft(target, replyTo, text) {
      broadcast(target.peerId, { type: 'draft', reply_to: replyTo, text });
      return '';
    },

    status() {
      const url = state === 'running' ? webchatUrl(config.host, port, token) : undefined;
      return { id: config.id, type: 'webchat', state, ...(detail ? { detail } : {}), ...(url ? { url } : {}) };
    },

    async stop() {
      await closeAll();
      state = 'stopped';
      detail = undefined;
    },
  };

  async function closeAll(): Promise<void> {
    clearInterval(pinger);
    pinger = undefined;
    const open = [...(wss?.clients ?? [])];
    await new Promise<void>((resolve) => {
      if (open.length === 0) return resolve();
      let pending = open.length;
      const done = (): void => void (--pending === 0 && finish());
      const timer = setTimeout(finish, STOP_GRACE_MS);
      function finish(): void {
        clearTimeout(timer);
        for (const ws of open) ws.terminate();
        resolve();
      }
      for (const ws of open) {
        ws.once('close', done);
        ws.close(1001, 'server stopping');
      }
    });
    sockets.clear();
    wss?.close();
    wss = undefined;
    const http = server;
    server = undefined;
    if (http?.listening) {
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    }
  }
}

function sendJson(ws: WebSocket, payload: ServerMessage): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(payload));
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
}

function startError(error: unknown, config: WebchatChannelConfig): ClawError {
  if (error instanceof ClawError) return error;
  const what = `${config.id} cannot listen on ${config.host}:${config.port}`;
  const code = errnoCode(error);
  if (code === 'EADDRINUSE') {
    return new ClawError('conflict', `${what}: the port is in use`, {
      suggestion: `set another port for ${config.id} in xgw/config.yaml (0 picks a free one), or stop the program that uses it`,
      cause: error,
    });
  }
  const reason = code === 'EADDRNOTAVAIL' ? 'no such address on this machine' : error instanceof Error ? error.message : String(error);
  return new ClawError('io', `${what}: ${reason}`, { suggestion: `check host and port of ${config.id} in xgw/config.yaml`, cause: error });
}
