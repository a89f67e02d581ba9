import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AddressGuard } from '../web/index.js';
import { checkHost, type Resolve } from './request-guard.js';

/**
 * A browser's only way out: Chromium is started with this loopback HTTP proxy as its proxy
 * (`--proxy-server`; Playwright sends loopback through it too), so it never resolves a name or
 * opens a connection itself. Every connection a page makes — navigations, subresources, fetches,
 * https and WebSockets (CONNECT) — is opened here, to an address the web guard checked at that
 * moment (`checkHost`): a name whose DNS answer changes after an earlier check (rebinding) is
 * checked again at the connection, which goes to the checked address. A refused target gets a 403
 * and is told to `refused`. Anyone on this machine may use the proxy; it reaches only what the
 * guard allows, which local processes reach directly anyway.
 */

export interface GuardProxy {
  /** `http://127.0.0.1:<port>`, for Chromium's proxy setting. */
  server: string;
  close(): Promise<void>;
}

/** `refused(target, reason)`: target is the URL (plain HTTP) or the CONNECT target (`host:port`). */
export async function startGuardProxy(guard: () => AddressGuard, refused: (target: string, reason: string) => void, resolve?: Resolve): Promise<GuardProxy> {
  const tunnels = new Set<Duplex>();
  // Anything a local process sends ends its own connection at worst, never the service.
  const server = createServer((req, res) => void forward(req, res).catch(() => res.destroy()));
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    tunnels.add(client);
    client.on('close', () => tunnels.delete(client));
    void tunnel(req, client, head).catch(() => client.destroy());
  });
  server.on('clientError', (_error, socket) => socket.destroy());

  async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return void res.writeHead(400).end();
    }
    if (url.protocol !== 'http:') return void res.writeHead(400).end();
    const verdict = await checkHost(url.hostname.replace(/^\[(.*)\]$/, '$1'), guard(), resolve);
    if (!verdict.allowed) {
      refused(url.href, verdict.reason);
      return void res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end(`refused: ${verdict.reason}\n`);
    }
    const headers = { ...req.headers };
    for (const name of ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive']) delete headers[name];
    const upstream = request({ host: verdict.address, port: url.port || 80, method: req.method, path: `${url.pathname}${url.search}`, headers, agent: false }, (response) => {
      res.writeHead(response.statusCode ?? 502, response.statusMessage, response.headers);
      response.pipe(res);
    });
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  async function tunnel(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy());
    // host:port, an IPv6 address in brackets.
    const target = /^(?:\[([\da-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(req.url ?? '');
    const port = Number(target?.[3]);
    if (!target || port < 1 || port > 65_535) return void client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    const verdict = await checkHost((target[1] ?? target[2])!, guard(), resolve);
    if (!verdict.allowed) {
      refused(req.url!, verdict.reason);
      return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    }
    const upstream: Socket = connect({ host: verdict.address, port });
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client).on('error', () => {});
      client.pipe(upstream);
    });
    upstream.on('error', () => (connected ? client.destroy() : client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n')));
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of tunnels) socket.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
