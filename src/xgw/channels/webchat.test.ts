import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { isClawError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { createTestHome, startedInbox, waitFor, webchatCredential, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import type { ChannelContext } from '../channel.js';
import { showsToolProgress, XgwConfigSchema, type WebchatChannelConfig } from '../types.js';
import { webchatProtocols } from './webchat-http.js';
import { webchatTokenPath } from './webchat-token.js';
import { createWebchatChannel } from './webchat.js';
import { MAX_QUEUED_MESSAGES } from './webchat-sockets.js';
import { MAX_TEXT_BYTES, PAGE_SCRIPTS } from './webchat-protocol.js';
import { packageRoot } from '../../core/package.js';

/**
 * The web chat against its real neighbours: a Gateway with its SQLite state, an agent inbox
 * thread in a temp THECLAW_HOME, and the channel's HTTP and WebSocket server on loopback.
 */
interface Harness {
  testHome: TestHome;
  home: string;
  gateway: Gateway;
  state: GatewayState;
  channel: ReturnType<typeof createWebchatChannel>;
  config: WebchatChannelConfig;
  base: string;
  origin: string;
  token: string;
  port: number;
}

const running: Harness[] = [];

afterEach(async () => {
  for (const h of running.splice(0)) {
    await h.channel.stop();
    h.state.close();
    h.testHome.cleanup();
  }
});

/** `wrap` changes the context the channel starts with (e.g. to hold inbound messages back). */
async function startWebchat(channel: Record<string, unknown> = {}, wrap?: (context: ChannelContext) => ChannelContext): Promise<Harness> {
  const testHome = createTestHome();
  const home = testHome.home;
  startedInbox(home);
  const config = XgwConfigSchema.parse({
    channels: [{ id: 'webchat:main', type: 'webchat', port: 0, access: 'open', ...channel }],
    routes: [{ channel: '*', peer: '*', agent: 'admin' }],
  });
  const state = new GatewayState(home);
  const gateway = new Gateway({ home, config, state, logger: createLogger(join(home, 'logs', 'xgw.log')) });
  const webchatConfig = config.channels[0] as WebchatChannelConfig;
  const adapter = createWebchatChannel(webchatConfig);
  if (wrap) await adapter.start(wrap(gateway.context()));
  else await gateway.startChannel(adapter);
  const url = new URL(adapter.status().url!);
  const h: Harness = {
    testHome,
    home,
    gateway,
    state,
    channel: adapter,
    config: webchatConfig,
    base: `http://127.0.0.1:${url.port}`,
    origin: `http://127.0.0.1:${url.port}`,
    token: url.searchParams.get('token')!,
    port: Number(url.port),
  };
  running.push(h);
  return h;
}

const newPeer = (): string => Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');

interface Received {
  type: string;
  id?: string;
  credential?: string;
  text?: string;
  messages?: { id: number; role: string; text: string; reply_to: string | null }[];
  message?: { id: number; role: string; text: string; reply_to: string | null; created_at: string };
}

/** A WebSocket client that keeps every server message it received. */
class Client {
  readonly received: Received[] = [];
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.received.push(JSON.parse(String(data)) as Received));
  }
  send(payload: unknown): void {
    this.ws.send(typeof payload === 'string' ? payload : JSON.stringify(payload));
  }
  next(what: string, match: (message: Received) => boolean): Promise<Received> {
    return waitFor(() => this.received.find(match), what, 5_000);
  }
  close(): void {
    this.ws.close();
  }
}

type Opened = { client: Client } | { status: number };

function openSocket(port: number, headers: { protocols?: string[]; cookie?: string; origin?: string }, host = '127.0.0.1'): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${host}:${port}/ws`, headers.protocols ?? [], {
      headers: headers.cookie ? { Cookie: headers.cookie } : {},
      ...(headers.origin ? { origin: headers.origin } : {}),
    });
    ws.on('unexpected-response', (request, response) => {
      request.destroy();
      resolve({ status: response.statusCode ?? 0 });
    });
    ws.on('error', reject);
    ws.on('open', () => {
      const client = new Client(ws);
      clients.push(client);
      resolve({ client });
    });
  });
}

const clients: Client[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.ws.terminate();
});

/** What the page of `h` offers in its WebSocket handshake. */
function handshakeFor(h: Harness, peer = newPeer(), token = h.token): string[] {
  return webchatProtocols(token, webchatCredential(h.home, h.config.id, peer));
}

async function openPeer(h: Harness, peer: string): Promise<Client> {
  const opened = await openSocket(h.port, { protocols: handshakeFor(h, peer), origin: h.origin });
  if (!('client' in opened)) throw new Error(`the socket was refused with ${opened.status}`);
  await opened.client.next('history', (m) => m.type === 'history');
  return opened.client;
}

function inboxEvents(h: Harness) {
  const thread = openThread(join(h.home, 'agents', 'admin', 'inbox'), { home: h.home });
  try {
    return thread.peek();
  } finally {
    thread.close();
  }
}

describe('webchat access', () => {
  it('answers 401 to a wrong token in a page URL, and off the pages without the bearer token (a cookie is no token)', async () => {
    const h = await startWebchat();
    for (const [path, headers] of [
      ['/?token=0000', {}],
      ['/status?token=' + '0'.repeat(64), {}],
      ['/ws', {}],
      ['/ws', { Authorization: 'Bearer ' + '0'.repeat(64) }],
      ['/ws', { Cookie: `xgw_token_${h.port}=${h.token}` }],
      ['/status.json', { Cookie: `xgw_token_${h.port}=${h.token}` }],
      ['/favicon.ico', {}],
    ] as const) {
      const response = await fetch(h.base + path, { headers, redirect: 'manual' });
      expect(response.status, path).toBe(401);
      expect(await response.text()).toContain('xgw status');
    }
  });

  it('serves the pages (which hold no secret) without setting a cookie, deletes the cookies of older versions, and takes the bearer token', async () => {
    const h = await startWebchat();
    for (const address of [h.channel.status().url!, h.base + '/']) {
      const page = await fetch(address, { redirect: 'manual' });
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await page.text()).toContain('<textarea');
      expect(page.headers.get('set-cookie')).toBeNull();
    }
    const legacy = await fetch(h.base + '/', { headers: { Cookie: `xgw_token_${h.port}=${h.token}; xgw_peer_${h.port}=${newPeer()}; other=1` } });
    expect(legacy.headers.getSetCookie()).toEqual([`xgw_token_${h.port}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`, `xgw_peer_${h.port}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`]);
    const ws = await fetch(h.base + '/ws', { headers: { Authorization: `Bearer ${h.token}` } });
    expect(ws.status).toBe(426); // the page's access check: the token is right
  });

  it("runs no inline script: each page's script is the bundled module, served from the same origin without the token", async () => {
    const h = await startWebchat();
    for (const [path, script] of [
      ['/', PAGE_SCRIPTS.chat],
      ['/status', PAGE_SCRIPTS.status],
    ]) {
      const page = await fetch(h.base + path);
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self';");
      const html = await page.text();
      expect([...html.matchAll(/<script\b[^>]*>/g)].map(([tag]) => tag)).toEqual([`<script src="${script}">`]);
      const served = await fetch(h.base + script!);
      expect(served.status).toBe(200);
      expect(served.headers.get('content-type')).toMatch(/^text\/javascript/);
      expect(await served.text()).toBe(readFileSync(join(packageRoot(), 'dist', 'page', `${script!.slice('/assets/'.length, -'.js'.length)}.global.js`), 'utf8'));
    }
    expect((await fetch(`${h.base}/assets/other.js`)).status).toBe(401); // anything else needs the token
  });

  it('keeps the token in a 0600 file and reuses it after a restart', async () => {
    const h = await startWebchat();
    const path = webchatTokenPath(h.home, 'webchat:main');
    expect(path).toBe(join(h.home, 'xgw', 'webchat-main.token'));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await h.channel.stop();
    expect(h.channel.status()).toMatchObject({ state: 'stopped' });
    expect(h.channel.status().url).toBeUndefined();
    await h.channel.start(h.gateway.context());
    const url = new URL(h.channel.status().url!);
    expect(url.searchParams.get('token')).toBe(h.token);
    expect(h.channel.status()).toMatchObject({ id: 'webchat:main', type: 'webchat', state: 'running' });

    // A damaged file is replaced; a readable-by-others one is tightened.
    await h.channel.stop();
    writeFileSync(path, 'garbage\n');
    chmodSync(path, 0o644);
    await h.channel.start(h.gateway.context());
    const fresh = new URL(h.channel.status().url!).searchParams.get('token')!;
    expect(fresh).toMatch(/^[0-9a-f]{64}$/);
    expect(fresh).not.toBe(h.token);
    expect(readFileSync(path, 'utf8').trim()).toBe(fresh);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await h.channel.stop();
    chmodSync(path, 0o644);
    await h.channel.start(h.gateway.context());
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(h.home, 'xgw')).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('fails to start with a conflict when the port is taken, and says so in its status', async () => {
    const h = await startWebchat();
    const second = createWebchatChannel({ ...h.config, port: h.port });
    const error = await second.start(h.gateway.context()).catch((e: unknown) => e);
    expect(isClawError(error, 'conflict')).toBe(true);
    expect((error as Error).message).toContain('in use');
    expect(second.status()).toMatchObject({ state: 'error', detail: expect.stringContaining('in use') });
    expect(second.status().url).toBeUndefined();
  });

  it('refuses a WebSocket with a foreign or missing Origin, or without the right token', async () => {
    const h = await startWebchat();
    const peer = newPeer();
    const good = handshakeFor(h, peer);
    expect(await openSocket(h.port, { protocols: good, origin: 'http://evil.example' })).toEqual({ status: 403 });
    expect(await openSocket(h.port, { protocols: good, origin: `http://127.0.0.1:${h.port + 1}` })).toEqual({ status: 403 });
    expect(await openSocket(h.port, { protocols: good })).toEqual({ status: 403 });
    expect(await openSocket(h.port, { origin: h.origin })).toEqual({ status: 401 });
    expect(await openSocket(h.port, { cookie: `xgw_token_${h.port}=${h.token}; xgw_peer_${h.port}=${peer}`, origin: h.origin })).toEqual({ status: 401 });
    expect(await openSocket(h.port, { protocols: handshakeFor(h, peer, 'f'.repeat(64)), origin: h.origin })).toEqual({ status: 401 });

    for (const origin of [h.origin, `http://localhost:${h.port}`]) {
      const opened = await openSocket(h.port, { protocols: good, origin });
      expect('client' in opened, origin).toBe(true);
      if ('client' in opened) expect(await opened.client.next('history', (m) => m.type === 'history')).toEqual({ type: 'history', messages: [] });
    }
  });

  it('accepts only loopback hosts in the config', () => {
    const parse = (host: string) => XgwConfigSchema.safeParse({ channels: [{ id: 'webchat:main', type: 'webchat', host }] });
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) expect(parse(host).success, host).toBe(true);
    for (const host of ['0.0.0.0', '::', '', '192.168.1.2', '10.0.0.1', 'example.com', '127.0.0.1.example.com', '::ffff:127.0.0.1']) {
      const result = parse(host);
      expect(result.success, host).toBe(false);
      expect(result.error?.issues[0]?.message, host).toMatch(/must be a loopback address/);
    }
  });

  it('serves a page on another loopback address at that address, and takes its own origin only', async () => {
    const h = await startWebchat({ host: '127.0.0.2' });
    expect(h.channel.status().url).toMatch(/^http:\/\/127\.0\.0\.2:\d+\/\?token=/);
    const origin = `http://127.0.0.2:${h.port}`;
    const opened = await openSocket(h.port, { protocols: handshakeFor(h), origin }, '127.0.0.2');
    expect('client' in opened).toBe(true);
  });

  it('keeps two web chats on two ports apart: each takes only its own token', async () => {
    const a = await startWebchat();
    const b = await startWebchat();
    expect(a.token).not.toBe(b.token);
    for (const [h, other] of [
      [a, b],
      [b, a],
    ] as const) {
      expect('client' in (await openSocket(h.port, { protocols: handshakeFor(h), origin: h.origin }))).toBe(true);
      expect(await openSocket(h.port, { protocols: handshakeFor(other), origin: h.origin })).toEqual({ status: 401 });
    }
  });

  it('listens on 127.0.0.1 only', async () => {
    const h = await startWebchat();
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((info) => info !== undefined && !info.internal)
      .map((info) => info!.address);
    for (const address of [...others, '::1']) {
      const reached = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: address, port: h.port });
        socket.on('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
      expect(reached, `connected through ${address}`).toBe(false);
    }
  });
});

describe('webchat peer ids', () => {
  /** A browser on its first visit: no credential, or one it was not issued; the server issues a new peer id. */
  async function newBrowser(h: Harness, credential?: string): Promise<{ client: Client; peer: string; credential: string; history: Received }> {
    const opened = await openSocket(h.port, { protocols: webchatProtocols(h.token, credential), origin: h.origin });
    if (!('client' in opened)) throw new Error(`the socket was refused with ${opened.status}`);
    const issued = (await opened.client.next('the issued peer id', (m) => m.type === 'peer')).credential!;
    expect(issued).toMatch(/^[0-9a-f]{32}\.[0-9a-f]{64}$/);
    const history = await opened.client.next('history', (m) => m.type === 'history');
    return { client: opened.client, peer: issued.split('.')[0]!, credential: issued, history };
  }

  it("issues each browser a signed id: guests sharing the token who claim another's id get neither their history nor their answers", async () => {
    const h = await startWebchat({ access: 'pairing' }); // the README's guest web chat
    const a = await newBrowser(h);
    a.client.send({ type: 'message', id: 'a-1', text: 'my secret plan' });
    await a.client.next('ack', (m) => m.type === 'ack' && m.id === 'a-1');
    const b = await newBrowser(h);
    expect(b.peer).not.toBe(a.peer);

    // B offers A's id as it is, and with B's own signature: neither is taken.
    const claims = [await newBrowser(h, a.peer), await newBrowser(h, `${a.peer}.${b.credential.split('.')[1]}`)];
    for (const claim of claims) {
      expect(claim.peer).not.toBe(a.peer);
      expect(claim.history.messages).toEqual([]);
    }
    const upload = await fetch(`${h.base}/upload`, { method: 'POST', headers: { Authorization: `Bearer ${h.token}`, 'x-xgw-peer': a.peer }, body: 'x' });
    expect(upload.status).toBe(400);

    // An answer to A reaches A's sockets only: each claimant's own answer, sent after A's, arrives with nothing before it.
    await h.gateway.send({ channel: 'webchat:main', peer: a.peer, text: 'for A only' });
    expect((await a.client.next("A's answer", (m) => m.message?.text === 'for A only')).message?.role).toBe('agent');
    for (const claim of claims) {
      await h.gateway.send({ channel: 'webchat:main', peer: claim.peer, text: 'yours' });
      await claim.client.next('its own answer', (m) => m.message?.text === 'yours');
      expect(claim.client.received.filter((m) => m.type === 'message' && m.message?.text !== 'yours')).toEqual([]);
    }

    // A, offering its credential again, chats under its id and sees its history.
    const again = await openSocket(h.port, { protocols: webchatProtocols(h.token, a.credential), origin: h.origin });
    if (!('client' in again)) throw new Error(`the socket was refused with ${again.status}`);
    const history = await again.client.next('history', (m) => m.type === 'history');
    expect(history.messages!.map((m) => m.text)).toEqual(expect.arrayContaining(['my secret plan', 'for A only']));
    expect(again.client.received.some((m) => m.type === 'peer')).toBe(false);
  });
});

describe('webchat messages', () => {
  it('pushes a message into the routed inbox, acks it, and delivers the reply to every tab of the peer', async () => {
    const h = await startWebchat();
    const peer = newPeer();
    const tab1 = await openPeer(h, peer);
    const tab2 = await openPeer(h, peer);
    tab1.send({ type: 'message', id: 'c-1', text: 'hello there' });
    await tab1.next('ack', (m) => m.type === 'ack' && m.id === 'c-1');
    expect((await tab2.next('user echo', (m) => m.type === 'message')).message).toMatchObject({ role: 'user', text: 'hello there' });

    const [event] = inboxEvents(h);
    expect(event!.source).toBe(`external:webchat:main:dm:${peer}:${peer}`);
    const content = parseMessageContent(event!.content);
    expect(content.text).toBe('hello there');
    expect(content.reply_context).toEqual({
      kind: 'external',
      channel_id: 'webchat:main',
      conversation_type: 'dm',
      conversation_id: peer,
      peer_id: peer,
      message_id: 'c-1',
    });

    const result = await h.gateway.send({ channel: 'webchat:main', peer, text: 'line one\nline two', replyTo: 'c-1' });
    for (const tab of [tab1, tab2]) {
      const reply = await tab.next('reply', (m) => m.type === 'message' && m.message?.role === 'agent');
      expect(reply.message).toMatchObject({ role: 'agent', text: 'line one\nline two', reply_to: 'c-1' });
      expect(result.message_ids).toEqual([String(reply.message!.id)]);
    }
    expect(h.state.mailbox('webchat:main', peer).map((m) => m.role)).toEqual(['user', 'agent']);
  });

  it('keeps a reply for a peer whose page is closed (or never opened) and shows it as history', async () => {
    const h = await startWebchat();
    const peer = newPeer();
    await h.gateway.send({ channel: 'webchat:main', peer, text: 'while you were away' });
    const client = await openPeer(h, peer);
    const history = client.received.find((m) => m.type === 'history')!;
    expect(history.messages).toMatchObject([{ role: 'agent', text: 'while you were away' }]);
  });

  it("marks the agent's notices as such, live and in the history, so the page can tell them from answers", async () => {
    const h = await startWebchat();
    const peer = newPeer();
    await h.gateway.send({ channel: 'webchat:main', peer, text: 'Sorry for the wait', notice: 'delayed' });
    const client = await openPeer(h, peer);
    expect(client.received.find((m) => m.type === 'history')!.messages).toEqual([expect.objectContaining({ role: 'agent', text: 'Sorry for the wait', notice: 'delayed' })]);
    await h.gateway.send({ channel: 'webchat:main', peer, text: 'I could not answer', notice: 'error' });
    const live = await client.next('the notice', (m) => m.type === 'message');
    expect(live.message).toMatchObject({ role: 'agent', text: 'I could not answer', notice: 'error' });
  });

  it('keeps only the newest history_limit messages per peer', async () => {
    const h = await startWebchat({ history_limit: 3 });
    const peer = newPeer();
    for (let i = 1; i <= 5; i++) await h.gateway.send({ channel: 'webchat:main', peer, text: `reply ${i}` });
    const client = await openPeer(h, peer);
    expect(client.received[0]!.messages!.map((m) => m.text)).toEqual(['reply 3', 'reply 4', 'reply 5']);
  });

  it('refuses an oversize message politely and keeps the connection', async () => {
    const h = await startWebchat();
    const client = await openPeer(h, newPeer());
    client.send({ type: 'message', id: 'big', text: 'x'.repeat(MAX_TEXT_BYTES + 1) });
    const error = await client.next('error', (m) => m.type === 'error');
    expect(error).toMatchObject({ id: 'big', text: expect.stringContaining('too long') });
    client.send({ type: 'message', id: 'small', text: 'short' });
    await client.next('ack', (m) => m.type === 'ack' && m.id === 'small');
    expect(inboxEvents(h)).toHaveLength(1);
  });

  it('answers malformed client messages with an error instead of crashing', async () => {
    const h = await startWebchat();
    const client = await openPeer(h, newPeer());
    client.send('not json');
    client.send({ type: 'message', id: '../../etc', text: 'x' });
    await waitFor(() => client.received.filter((m) => m.type === 'error').length === 2, 'two errors', 5_000);
    expect(client.ws.readyState).toBe(WebSocket.OPEN);
    expect(inboxEvents(h)).toHaveLength(0);
  });

  it('closes the socket of a client that floods it faster than its messages are handled, and drops the excess', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The peer's rate limit is raised above the queue's: this is about the queue.
    const h = await startWebchat({ rate_limit: { messages: 10 * MAX_QUEUED_MESSAGES, per_seconds: 60 } }, (context) => ({
      ...context,
      receive: async (message) => {
        await held;
        return context.receive(message);
      },
    }));
    const client = await openPeer(h, newPeer());
    const closed = new Promise<number>((resolve) => client.ws.on('close', (code) => resolve(code)));
    for (let i = 0; i <= MAX_QUEUED_MESSAGES; i++) client.send({ type: 'message', id: `flood-${i}`, text: `message ${i}` });
    expect(await closed).toBe(1008);
    release();
    await waitFor(() => inboxEvents(h).length === MAX_QUEUED_MESSAGES, 'the queued messages handled');
    expect(
      inboxEvents(h)
        .map((event) => parseMessageContent(event.content).text)
        .at(-1),
    ).toBe(`message ${MAX_QUEUED_MESSAGES - 1}`);
  });

  it('acks a resent message again without pushing or storing it twice', async () => {
    const h = await startWebchat();
    const peer = newPeer();
    const client = await openPeer(h, peer);
    client.send({ type: 'message', id: 'again', text: 'once' });
    client.send({ type: 'message', id: 'again', text: 'once' });
    await waitFor(() => client.received.filter((m) => m.type === 'ack').length === 2, 'two acks', 5_000);
    expect(inboxEvents(h)).toHaveLength(1);
    expect(h.state.mailbox('webchat:main', peer)).toHaveLength(1);
  });

  it('tells an unknown peer its pairing code as a system message under pairing access', async () => {
    const h = await startWebchat({ access: 'pairing' });
    const peer = newPeer();
    const client = await openPeer(h, peer);
    client.send({ type: 'message', id: 'p-1', text: 'hi' });
    const notice = await client.next('notice', (m) => m.type === 'message' && m.message?.role === 'system');
    const [request] = h.state.pendingPairings();
    expect(notice.message!.text).toContain(request!.code);
    expect(inboxEvents(h)).toHaveLength(0);
    expect(h.state.mailbox('webchat:main', peer).map((m) => m.role)).toEqual(['user', 'system']);
  });

  it('shows a command a turn runs to the peer it answers only, until its answer; not where show_tool_progress is off', async () => {
    const h = await startWebchat();
    const peer = newPeer();
    const other = newPeer();
    const [mine, theirs] = [await openPeer(h, peer), await openPeer(h, other)];
    const target = (who: string) => ({ peerId: who, conversationType: 'dm', conversationId: who });
    // What a socket got before a draft sent after it (a socket keeps the order it is sent in).
    let markers = 0;
    const progressSeen = async (client: Client, who: string, gateway = h.gateway) => {
      const marker = `marker-${++markers}`;
      gateway.draft('webchat:main', target(who), marker, marker);
      await client.next(marker, (m) => m.type === 'draft' && (m as { reply_to?: string }).reply_to === marker);
      return client.received.filter((m) => m.type === 'tool_progress');
    };
    h.gateway.toolProgress('webchat:main', target(peer), 'c-1', 'sleep 2; ls');
    expect(await progressSeen(mine, peer)).toEqual([{ type: 'tool_progress', command: 'sleep 2; ls' }]);
    expect(await progressSeen(theirs, other)).toEqual([]);
    expect(h.state.mailbox('webchat:main', peer)).toEqual([]); // never stored

    // A request that comes after the answer is not shown below it.
    await h.gateway.send({ channel: 'webchat:main', peer, text: 'done', replyTo: 'c-1' });
    h.gateway.toolProgress('webchat:main', target(peer), 'c-1', 'late');
    expect(await progressSeen(mine, peer)).toHaveLength(1);

    const quiet = await startWebchat({ show_tool_progress: false });
    const client = await openPeer(quiet, peer);
    quiet.gateway.toolProgress('webchat:main', target(peer), 'c-2', 'ls');
    expect(await progressSeen(client, peer, quiet.gateway)).toEqual([]);
  });

  it('shows tool progress by default only in the owner web chat (access: open)', () => {
    const parse = (channel: object) => XgwConfigSchema.parse({ channels: [{ id: 'webchat:x', type: 'webchat', ...channel }] }).channels[0]!;
    expect(showsToolProgress(parse({ access: 'open' }))).toBe(true);
    expect(showsToolProgress(parse({ access: 'pairing' }))).toBe(false);
    expect(showsToolProgress(parse({ access: 'allowlist', show_tool_progress: true }))).toBe(true);
    expect(showsToolProgress(parse({ access: 'open', show_tool_progress: false }))).toBe(false);
  });

  it('rejects a send to something that is not a web chat peer id', async () => {
    const h = await startWebchat();
    const error = await h.gateway.send({ channel: 'webchat:main', peer: '../etc/passwd', text: 'x' }).catch((e: unknown) => e);
    expect(isClawError(error, 'usage')).toBe(true);
    const group = await h.gateway.send({ channel: 'webchat:main', peer: newPeer(), conversationType: 'group', conversation: 'g', text: 'x' }).catch((e: unknown) => e);
    expect(isClawError(group, 'usage')).toBe(true);
  });

  it('closes every socket and the port on stop', async () => {
    const h = await startWebchat();
    const client = await openPeer(h, newPeer());
    const closed = new Promise<number>((resolve) => client.ws.on('close', (code) => resolve(code)));
    await h.channel.stop();
    expect(await closed).toBe(1001);
    await expect(fetch(h.base + '/')).rejects.toThrow();
  });
});
