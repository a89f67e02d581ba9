import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small site for `browser` on 127.0.0.1, and a second listener on 127.0.0.2 (on the same port
 * number where it is free) that a page asks for things: the browser tests allow only 127.0.0.1,
 * so anything the 127.0.0.2 listener hears got past the guard.
 *
 *   /form       a booking form (name, a slot to choose, a button) that POSTs to /book
 *   /book       answers "Booked <name> at <slot>" and records the body in `posts`
 *   /other      another page (refs of /form are stale there)
 *   /leak       a page whose image, frame and fetch go to the 127.0.0.2 listener
 *   /hang       never answers (a navigation that times out)
 */
export interface FormSite {
  url(path: string): string;
  /** The bodies POSTed to /book, as form fields. */
  posts: Record<string, string>[];
  /** `http://127.0.0.2:<port>` */
  refusedOrigin: string;
  /** Every request the 127.0.0.2 listener got. */
  refusedHits: string[];
  close(): Promise<void>;
}

const FORM = `<!doctype html><html><head><title>Ferry booking</title></head><body>
<h1>Book a crossing</h1>
<form method="post" action="/book">
<label>Your name <input name="name"></label>
<label>Slot <select name="slot"><option value="06:30">06:30</option><option value="07:45">07:45</option></select></label>
<button type="submit">Book</button>
</form></body></html>`;

export async function startFormSite(): Promise<FormSite> {
  const posts: Record<string, string>[] = [];
  const refusedHits: string[] = [];
  const refused = createServer((req, res) => {
    refusedHits.push(req.url ?? '/');
    res.end('secret of the internal network');
  });
  await listen(refused, '127.0.0.2', 0);
  const refusedOrigin = `http://127.0.0.2:${(refused.address() as AddressInfo).port}`;
  const site = createServer((req, res) => void answer(req, res, posts, refusedOrigin));
  await listen(site, '127.0.0.1', 0);
  const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  return {
    url: (path) => `${origin}${path}`,
    posts,
    refusedOrigin,
    refusedHits,
    close: async () => {
      site.closeAllConnections();
      refused.closeAllConnections();
      await Promise.all([new Promise((resolve) => site.close(resolve)), new Promise((resolve) => refused.close(resolve))]);
    },
  };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
}

async function answer(req: IncomingMessage, res: ServerResponse, posts: Record<string, string>[], refusedOrigin: string): Promise<void> {
  const html = (body: string) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(body);
  };
  const path = new URL(req.url ?? '/', 'http://fixture').pathname;
  if (path === '/form') return html(FORM);
  if (path === '/book' && req.method === 'POST') {
    let body = '';
    for await (const chunk of req) body += chunk;
    const fields = Object.fromEntries(new URLSearchParams(body));
    posts.push(fields);
    return html(`<!doctype html><title>Booked</title><p>Booked ${escapeHtml(fields.name ?? '')} at ${escapeHtml(fields.slot ?? '')}</p>`);
  }
  if (path === '/other') return html('<!doctype html><title>Other</title><p>Another page</p><a href="/form">Back to the form</a>');
  if (path === '/hang') return; // held open until the site closes
  if (path === '/leak') {
    return html(`<!doctype html><title>Leak</title><p>A page that asks the internal network</p>
<img src="${refusedOrigin}/pixel.png"><iframe src="${refusedOrigin}/frame"></iframe>
<script>fetch('${refusedOrigin}/api').catch(() => {});</script>`);
  }
  res.writeHead(404).end('not found');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (char) => `&#${char.charCodeAt(0)};`);
}
