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
 * The web chat's cookie names. Cookies are shared by every port of a host: the names carry the
 * port, so two web chats (or another local service) never overwrite each other's.
 */
export function webchatCookieNames(port: number | string): { token: string; peer: string } {
  return { token: `xgw_token_${port}`, peer: `xgw_peer_${port}` };
}

export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    if (!cookies.has(name)) cookies.set(name, part.slice(at + 1).trim());
  }
  return cookies;
}

export function cookie(name: string, value: string, maxAgeSeconds?: number): string {
  return `${name}=${value}; HttpOnly; SameSite=Strict; Path=/${maxAgeSeconds === undefined ? '' : `; Max-Age=${maxAgeSeconds}`}`;
}

export function unauthorized(res: ServerResponse): void {
  res.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
  res.end(UNAUTHORIZED_PAGE);
}

/** Answers a refused upgrade with a plain HTTP response and closes the socket (as `ws` does). */
export function refuse(socket: Duplex, status: number, text: string): void {
  const body = `${text}\n`;
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
