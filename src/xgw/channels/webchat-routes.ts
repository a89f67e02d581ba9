import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { isClawError } from '../../core/errors.js';
import { isOwnerWebchat, servesStatusPage } from '../config.js';
import type { ChannelContext } from '../channel.js';
import type { WebchatChannelConfig } from '../types.js';
import { isControlPath, WebchatControl } from './webchat-control.js';
import { bearerToken, expireLegacyCookies, readHandshake, refuse, safeEqual, sendJson, unauthorized } from './webchat-http.js';
import { webchatPage } from './webchat-page.js';
import type { WebchatPeers } from './webchat-peers.js';
import { FILE_NAME_HEADER, FILE_PATH, PEER_HEADER, UPLOAD_PATH } from './webchat-protocol.js';
import { statusPage } from './webchat-status-page.js';
import { urlHost } from './webchat-token.js';
import type { WebchatUploads } from './webchat-uploads.js';

/** The pages load nothing from elsewhere, run no inline script, and nothing may frame them. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

export interface WebchatSite {
  config: WebchatChannelConfig;
  context: ChannelContext;
  /** The channel's token (webchat-token.ts). */
  token: string;
  /** The peer ids it issues and checks (webchat-peers.ts). */
  peers: WebchatPeers;
  /** The pages' scripts by path (webchat-scripts.ts). */
  scripts: Record<string, string>;
  uploads: WebchatUploads;
  /** The port listened on, once known: an allowed origin names it. */
  port(): number;
}

/**
 * The web chat's HTTP side: the pages and their scripts (served to anyone: they hold no secret),
 * and, with the token, uploads, the files the agent sent a peer, the status page's data, and the
 * checks a WebSocket handshake must pass (token, origin) before it is accepted, and its peer id:
 * the one its credential names, or a new one.
 */
export class WebchatRoutes {
  private readonly pageHost: string;
  private readonly control: WebchatControl;
  /** The chat and status pages link to the control page where this web chat serves it. */
  private readonly pages: { chat: string; status: string };

  constructor(private readonly site: WebchatSite) {
    this.pageHost = urlHost(site.config.host);
    this.control = new WebchatControl({
      config: site.config,
      context: site.context,
      hasToken: (candidate) => this.hasToken(candidate),
      isAllowedOrigin: (origin) => this.isAllowedOrigin(origin),
      servePage: (req, res, html) => this.servePage(req, res, html),
    });
    const control = isOwnerWebchat(site.config);
    this.pages = { chat: webchatPage(control), status: statusPage(control) };
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const { config } = this.site;
    const url = new URL(req.url ?? '/', 'http://localhost');
    const script = Object.hasOwn(this.site.scripts, url.pathname) ? this.site.scripts[url.pathname] : undefined;
    if (script !== undefined) return void serveScript(req, res, script);
    if (isControlPath(url.pathname)) return void this.control.handle(req, res, url);
    if (url.pathname === UPLOAD_PATH && this.hasToken(bearerToken(req.headers.authorization))) return void this.upload(req, res);
    if (url.pathname === FILE_PATH && this.hasToken(bearerToken(req.headers.authorization))) return void this.file(req, res, url.searchParams.get('ref') ?? '');
    const isPage = url.pathname === '/' || url.pathname === '/status';
    // A page is served without the token (it holds none), but a wrong one in its URL is told at once.
    const queryToken = url.searchParams.get('token');
    if (isPage ? queryToken !== null && !this.hasToken(queryToken) : !this.hasToken(bearerToken(req.headers.authorization))) {
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
    if ((url.pathname === '/status' || url.pathname === '/status.json') && !servesStatusPage(config)) {
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end(`The status page is served only by a web chat with access: open (${config.id} has access: ${config.access})\n`);
    }
    if (url.pathname === '/status.json') return void this.systemStatus(res);
    if (!isPage) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Not found\n');
    }
    this.servePage(req, res, url.pathname === '/status' ? this.pages.status : this.pages.chat);
  }

  private servePage(req: IncomingMessage, res: ServerResponse, html: string): void {
    const headers: Record<string, string | string[]> = { ...PAGE_HEADERS };
    const expired = expireLegacyCookies(req.headers.cookie, this.site.port());
    if (expired.length > 0) headers['Set-Cookie'] = expired;
    res.writeHead(200, headers);
    res.end(html);
  }

  /**
   * The peer of a WebSocket handshake that may chat: the one its credential names, or a new one
   * (`issued`, its credential, which the socket tells the page) where it offers none this channel
   * issued. Otherwise the handshake is answered with why not.
   */
  admit(req: IncomingMessage, socket: Duplex): { peer: string; issued?: string } | undefined {
    const { config, context } = this.site;
    const url = new URL(req.url ?? '/', 'http://localhost');
    const offered = readHandshake(req.headers['sec-websocket-protocol']);
    if (url.pathname !== '/ws') {
      refuse(socket, 404, 'Not found');
      return undefined;
    }
    if (!this.hasToken(offered.token)) {
      context.logger.info(`${config.id}: refused a WebSocket without a valid token`);
      refuse(socket, 401, 'Unauthorized: open the URL printed by xgw status');
      return undefined;
    }
    const origin = req.headers.origin;
    if (!this.isAllowedOrigin(origin)) {
      context.logger.warn(`${config.id}: refused a WebSocket from origin ${JSON.stringify(origin ?? null)}`);
      refuse(socket, 403, 'Forbidden origin');
      return undefined;
    }
    const peer = this.site.peers.verify(offered.peer);
    if (peer !== undefined) return { peer };
    // A client-chosen id (or one signed with a key since replaced) would let whoever shares the
    // token read another's chat: it is never taken, and the browser chats under a new one.
    if (offered.peer !== undefined) context.logger.info(`${config.id}: a page offered a peer id this channel did not issue; it gets a new one`);
    const fresh = this.site.peers.issue();
    return { peer: fresh.peer, issued: fresh.credential };
  }

  /** The peer whose credential a request's PEER_HEADER carries. */
  private peerOf(req: IncomingMessage): string | undefined {
    const header = req.headers[PEER_HEADER];
    return this.site.peers.verify(typeof header === 'string' ? header : undefined);
  }

  private hasToken(candidate: string | undefined): boolean {
    return candidate !== undefined && safeEqual(candidate, this.site.token);
  }

  // Pages this server can have served: by the configured address, and by `localhost` where that
  // reaches it. Never by another name, which a foreign site could rebind to this machine.
  private isAllowedOrigin(origin: string | undefined): boolean {
    const { host } = this.site.config;
    const names = host === 'localhost' ? ['localhost', '127.0.0.1', '[::1]'] : host === '127.0.0.1' || host === '::1' ? [this.pageHost, 'localhost'] : [this.pageHost];
    return origin !== undefined && names.some((name) => origin === `http://${name}:${this.site.port()}`);
  }

  /** A file for the peer's next message (see WebchatUploads). */
  private async upload(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const json = (status: number, body: object) => {
      res.writeHead(status, {
        'Content-Type': 'application/json; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Content-Type-Options': 'nosniff',
        ...(status === 413 ? { Connection: 'close' } : {}),
      });
      res.end(JSON.stringify(body));
    };
    const peer = this.peerOf(req);
    if (req.method !== 'POST') return json(405, { error: 'upload with POST' });
    if (peer === undefined) return json(400, { error: 'no peer id this chat issued: reload the page' });
    let name: string;
    try {
      name = decodeURIComponent(String(req.headers[FILE_NAME_HEADER] ?? 'file'));
    } catch {
      name = 'file';
    }
    try {
      json(200, { id: await this.site.uploads.receive(req, peer, name) });
    } catch (error) {
      json(isClawError(error, 'usage') ? 413 : 500, { error: error instanceof Error ? error.message : String(error) });
    }
  }

  /** A file the agent sent this peer (and only such a file: the mailbox says which). */
  private file(req: IncomingMessage, res: ServerResponse, ref: string): void {
    const { config, context } = this.site;
    const peer = this.peerOf(req);
    const refuse = (status: number, text: string) => {
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(`${text}\n`);
    };
    if (peer === undefined || !context.state.hasFile(config.id, peer, ref)) return void refuse(404, 'No such file in this chat');
    const path = join(context.home, ref);
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

  private async systemStatus(res: ServerResponse): Promise<void> {
    const { config, context } = this.site;
    const json = (status: number, body: unknown) => sendJson(res, status, body);
    const source = context.systemStatus;
    if (!source) return json(503, { error: 'this gateway has no status source' });
    try {
      json(200, await source());
    } catch (error) {
      context.logger.warn(`${config.id}: status page: ${error instanceof Error ? error.message : String(error)}`);
      json(503, { error: error instanceof Error ? error.message : String(error) });
    }
  }
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
