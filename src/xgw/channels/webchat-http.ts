import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { UNAUTHORIZED_PAGE } from './webchat-page.js';

// The web chat's HTTP details: token comparison, cookies, and the refusals it answers with.

/** Compares in constant time; hashing first makes the lengths equal. */
export function safeEqual(a: string, b: string): boolean {
  const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
  return b !== '' && timingSafeEqual(digest(a), digest(b));
}

/**
 * How a client proves it may chat: the token and its peer credential (webchat-peers.ts; none on
 * its first visit) ride in the WebSocket handshake as subprotocols (`xgw`, `xgw-token.<token>`,
 * `xgw-peer.<credential>`; a browser's WebSocket can set no
 * other header), and the JSON endpoints take `Authorization: Bearer <token>`. Never a cookie:
 * cookies ignore ports, so any other server on this host would receive it.
 */
export const WEBCHAT_PROTOCOL = 'xgw';

/** A peer id as the server issues one (webchat-peers.ts): 16 random bytes in hex. */
export const PEER_ID = /^[0-9a-f]{32}$/;

/** The handshake's subprotocols: with the peer's credential, or without one to be issued a new id. */
export function webchatProtocols(token: string, credential?: string): string[] {
  return [WEBCHAT_PROTOCOL, `xgw-token.${token}`, ...(credential === undefined ? [] : [`xgw-peer.${credential}`])];
}

/** The token and peer a handshake's `Sec-WebSocket-Protocol` header offers. */
export function readHandshake(header: string | undefined): { token?: string; peer?: string } {
  const found: { token?: string; peer?: string } = {};
  for (const protocol of (header ?? '').split(',').map((part) => part.trim())) {
    if (protocol.startsWith('xgw-token.')) found.token ??= protocol.slice('xgw-token.'.length);
    if (protocol.startsWith('xgw-peer.')) found.peer ??= protocol.slice('xgw-peer.'.length);
  }
  return found;
}

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer ([^\s]+)$/.exec(header ?? '');
  return match?.[1];
}

/**
 * Set-Cookie values that delete the cookies older versions kept the token and peer in (named
 * `xgw_token_<port>`, `xgw_peer_<port>`), so a browser stops sending them to every port.
 */
export function expireLegacyCookies(header: string | undefined, port: number): string[] {
  const names = [`xgw_token_${port}`, `xgw_peer_${port}`];
  const present = (header ?? '').split(';').map((part) => part.split('=')[0]!.trim());
  return names.filter((name) => present.includes(name)).map((name) => `${name}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
}

export function unauthorized(res: ServerResponse): void {
  res.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
  res.end(UNAUTHORIZED_PAGE);
}

/** Answers a refused upgrade with a plain HTTP response and closes the socket (as `ws` does). */
export function refuse(socket: Duplex, status: number, text: string): void {
  const body = `${text}\n`;
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n` + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/** A JSON answer that no cache keeps and no browser sniffs as something else. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
  res.end(JSON.stringify(body));
}
