import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { BrowserContext, Route, WebSocketRoute } from 'playwright-core';
import { checkAddress, type AddressGuard, type Verdict } from '../web/index.js';

/**
 * The web tool's SSRF guard for everything a browser page asks for: each request (navigations,
 * frames, scripts, images, fetches) and each WebSocket is intercepted, its host resolved and
 * every address checked with `checkAddress`; a refused one is aborted before it is sent, with its
 * reason at hand for the navigation's error. URLs that reach no network (data:, blob:, about:)
 * pass; any other scheme is refused. Chromium connects only through the guard proxy
 * (guard-proxy.ts), which checks the host again at the connection: a DNS answer that changed since
 * this check (rebinding) is caught there.
 */

const LOCAL_SCHEMES = new Set(['data:', 'blob:', 'about:']);

/** A name's addresses (DNS); tests stand in their own. */
export type Resolve = (host: string) => Promise<string[]>;

const resolveAll: Resolve = async (host) => (await lookup(host, { all: true })).map((entry) => entry.address);

/** A host's verdict and, when it is allowed, the address it was checked at: the one to connect to. */
export type HostVerdict = { allowed: true; address: string } | { allowed: false; reason: string };

/** Whether `host` (a name or an IP) may be connected to: every address it resolves to must pass. */
export async function checkHost(host: string, guard: AddressGuard, resolve: Resolve = resolveAll): Promise<HostVerdict> {
  if (isIP(host)) {
    const verdict = checkAddress(host, guard);
    return verdict.allowed ? { allowed: true, address: host } : verdict;
  }
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch {
    return { allowed: false, reason: `${host} does not resolve` };
  }
  if (addresses.length === 0) return { allowed: false, reason: `${host} has no address` };
  for (const address of addresses) {
    const verdict = checkAddress(address, guard, host);
    if (!verdict.allowed) return verdict;
  }
  return { allowed: true, address: addresses[0]! };
}

/** Whether the page may ask for `text`. */
export async function checkRequest(text: string, guard: AddressGuard, resolve?: Resolve): Promise<Verdict> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { allowed: false, reason: 'not a URL' };
  }
  if (LOCAL_SCHEMES.has(url.protocol)) return { allowed: true };
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) return { allowed: false, reason: `${url.protocol} URLs are not opened` };
  const verdict = await checkHost(url.hostname.replace(/^\[(.*)\]$/, '$1'), guard, resolve);
  return verdict.allowed ? { allowed: true } : verdict;
}

/**
 * Routes every request and WebSocket of `context` through the guard of the moment (`guard()`,
 * so that a changed allow_private applies at once); `refused` hears each refusal.
 */
export async function guardContext(context: BrowserContext, guard: () => AddressGuard, refused: (url: string, reason: string) => void, resolve?: Resolve): Promise<void> {
  await context.route('**/*', async (route: Route) => {
    const url = route.request().url();
    const verdict = await checkRequest(url, guard(), resolve);
    if (verdict.allowed) return route.fallback();
    refused(url, verdict.reason);
    return route.abort('blockedbyclient');
  });
  await context.routeWebSocket(/.*/, async (socket: WebSocketRoute) => {
    const verdict = await checkRequest(socket.url(), guard(), resolve);
    if (verdict.allowed) return void socket.connectToServer();
    refused(socket.url(), verdict.reason);
    await socket.close({ code: 1008, reason: 'refused' });
  });
}
