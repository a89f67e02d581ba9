import { appendFileSync, copyFileSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDir, createProposal } from '../agent/index.js';
import { agentStatus } from '../agent/lifecycle.js';
import { ensureDir } from '../core/home.js';
import { echoToolStep, startSystem, type System } from '../e2e/support.js';
import { artifactPath, CHROMIUM, hasChromium, launchChromium } from '../testing/browser.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { BWRAP, NEEDS_BWRAP, waitFor } from '../testing/index.js';
import { connectWebchat } from '../xgw/index.js';
import { usagePerDay } from './usage-days.js';

/**
 * The owner's control page in a real browser against the real system (xgw, notifier, admin in a
 * temp home; the page's actions run by theclaw's control runner, started by xgw): each action end
 * to end, and the refusal of everyone but the owner. Screenshots (desktop 1280 px, phone 390 px)
 * go to `.test-artifacts/` and, for a human to look at, /tmp/control-shots/.
 */
// Runs in the page (the project's tsconfig has no DOM types).
declare const document: { documentElement: { scrollWidth: number; clientWidth: number } };

const SHOTS = '/tmp/control-shots';
const GUEST = 'webchat:guest';

let s: System;
let browser: Browser;
/** Holds the port of the web chat `webchat:taken`, which therefore cannot start: a channel not running. */
let squatter: Server;
/** The owner's web chat's address (`http://127.0.0.1:<port>`) and token; the guest one's likewise. */
let owner: { origin: string; token: string };
let guest: { origin: string; token: string };

function shot(page: Page, name: string): Promise<unknown> {
  const path = artifactPath(name);
  return page.screenshot({ path, fullPage: true }).then(() => {
    ensureDir(SHOTS);
    copyFileSync(path, join(SHOTS, name));
  });
}

beforeAll(async () => {
  if (!hasChromium || !BWRAP) return;
  squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  const takenPort = (squatter.address() as { port: number }).port;
  // Telegram peer 777 is admitted, and its commands wait for the owner; any other gets a pairing code.
  s = await startSystem({
    llm: { defaultStep: echoToolStep },
    policy: '{ rules: [{ channel: telegram, bash: ask }] }',
    telegramAccess: 'pairing',
    telegramAllow: ['777'],
    maxTurnAttempts: 1,
    extraChannels: [`{ id: ${GUEST}, type: webchat, port: 0, access: pairing }`, `{ id: webchat:taken, type: webchat, port: ${takenPort}, access: pairing }`],
  });
  const channels = (await s.xgwStatus()).channels;
  const address = (id: string) => {
    const url = new URL(channels.find((channel) => channel.id === id)!.url!);
    return { origin: url.origin, token: url.searchParams.get('token')! };
  };
  appendFileSync(join(s.home, 'agents', 'admin', 'config.yaml'), 'budget: { daily_tokens: 1000000 }\n');
  owner = address('webchat:main');
  guest = address(GUEST);
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  squatter?.close();
});

// Each read and action of the page is a process of its own (the control runner): slow on a loaded machine.
describe.skipIf(!hasChromium || !BWRAP)(`the owner's control page (needs ${CHROMIUM}; ${NEEDS_BWRAP})`, { timeout: 120_000 }, () => {
  it('is linked from the chat and the status page, and stops, starts and creates agents, at desktop and phone width', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${owner.origin}/?token=${owner.token}`);
      await page.locator('#control-link').click();
      await page.waitForURL(`${owner.origin}/control`);
      const admin = page.locator('#agents [data-agent=admin]');
      await admin.locator('.pill', { hasText: 'started' }).waitFor();
      expect(await admin.locator('.detail').textContent()).toMatch(/^\(pai default\) · last activity never$/);

      await admin.getByRole('button', { name: 'Stop' }).click();
      await page.locator('#notice', { hasText: 'stopped admin' }).waitFor();
      await admin.locator('.pill', { hasText: 'stopped' }).waitFor();
      expect((await agentStatus(s.home, 'admin')).started).toBe(false);
      await admin.getByRole('button', { name: 'Start' }).click();
      await page.locator('#notice', { hasText: 'started admin' }).waitFor();
      await admin.locator('.pill', { hasText: 'started' }).waitFor();
      expect((await agentStatus(s.home, 'admin')).started).toBe(true);

      await page.locator('#new-name').fill('gardener');
      await page.locator('#new-purpose').fill('keeps the garden notes <b>and</b> the watering days');
      await page.locator('#create-button').click();
      await page.locator('#notice', { hasText: 'created gardener' }).waitFor();
      await page.locator('#agents [data-agent=gardener] .pill', { hasText: 'stopped' }).waitFor();
      expect(readFileSync(join(s.home, 'agents', 'gardener', 'IDENTITY.md'), 'utf8')).toContain('My purpose: keeps the garden notes <b>and</b> the watering days\n');
      expect(await page.locator('#new-name').inputValue()).toBe(''); // the form is ready for the next

      // A refusal is said on the page, and changes nothing.
      await page.locator('#new-name').fill('gardener');
      await page.locator('#new-purpose').fill('again');
      await page.locator('#create-button').click();
      await page.locator('#notice[data-tone=bad]', { hasText: 'agent gardener exists already' }).waitFor();
      expect(readFileSync(join(s.home, 'agents', 'gardener', 'IDENTITY.md'), 'utf8')).toContain('garden notes');

      await page.goto(`${owner.origin}/status`);
      await page.locator('header a[href="/control"]').waitFor();

      await page.setViewportSize({ width: 390, height: 844 });
      await page.goto(`${owner.origin}/control`);
      await page.locator('#agents [data-agent=gardener]').waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    } finally {
      await context.close();
    }
  });

  it('approves a waiting command and a pairing and denies a proposed change, as /approve, xgw pair approve and agent deny do', async () => {
    // The owner has a direct chat with admin: where a command's request goes.
    const chat = await connectWebchat(`${owner.origin}/?token=${owner.token}`);
    try {
      await chat.send('hello');
      expect((await chat.nextReply(AbortSignal.timeout(20_000))).text).toBe('reply to: hello');
    } finally {
      chat.close();
    }
    s.telegram.queueUpdate(textUpdate({ from: 777, text: 'make it so' }));
    s.telegram.queueUpdate(textUpdate({ from: 888, text: 'hi, it is Ann', firstName: 'Ann' }));
    await waitFor(() => s.telegram.sent.some((sent) => String(sent.chat_id) === '888'), 'the pairing code');
    const memory = join(s.home, 'agents', 'admin', 'memory', 'agent.md');
    const proposal = createProposal(agentDir(s.home, 'admin'), { file: 'memory/agent.md', summary: 'remember the watering days', text: '# admin\n- water on Mondays\n' });

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${owner.origin}/control?token=${owner.token}`);
      const rows = page.locator('#waiting .item');
      await waitFor(async () => (await rows.count()) === 3, 'the three waiting items on the page', 30_000);
      // biome-ignore lint/performance/useDomNodeTextContent: reads the text as rendered.
      const texts = await rows.evaluateAll((items) => items.map((item) => (item as unknown as { innerText: string }).innerText.replace(/\s+/g, ' ')));
      expect(texts[0]).toMatch(/^admin command echo handled-make it so · for peer-telegram\.main\.777 · until .* Approve Deny$/);
      expect(texts[1]).toBe('admin change of memory/agent.md remember the watering days (+2 -0 lines) Approve Deny');
      expect(texts[2]).toMatch(/^Ann \(888\) pairing asks to talk on telegram:main · code [A-Z2-9]{8} · until .* Approve Deny$/);
      await shot(page, 'control-page-desktop.png');
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await shot(page, 'control-page-phone.png');
      await page.setViewportSize({ width: 1280, height: 900 });

      await rows.nth(0).getByRole('button', { name: 'Approve' }).click();
      await page.locator('#notice', { hasText: 'approved: echo handled-make it so' }).waitFor();
      await waitFor(() => s.telegram.sent.some((sent) => sent.text === 'reply to: make it so'), "the peer's answer, once its command ran", 30_000);

      await page.locator('#waiting .item', { hasText: 'Ann' }).getByRole('button', { name: 'Approve' }).click();
      await page.locator('#notice', { hasText: 'approved 888 on telegram:main; they were told' }).waitFor();
      await waitFor(() => s.telegram.sent.some((sent) => String(sent.chat_id) === '888' && sent.text.startsWith('You are approved')), 'the welcome', 30_000);
      // Ann's first message was passed on, and its command waits for the owner in turn: denied, it does not run.
      const annsCommand = page.locator('#waiting .item', { hasText: 'echo handled-hi, it is Ann' });
      await annsCommand.getByRole('button', { name: 'Deny' }).click({ timeout: 30_000 });
      await page.locator('#notice', { hasText: 'denied: echo handled-hi, it is Ann' }).waitFor();

      await page.locator('#waiting .item', { hasText: 'watering' }).getByRole('button', { name: 'Deny' }).click();
      await page.locator('#notice', { hasText: `Dropped: proposal ${proposal.code} (admin's memory/agent.md); the file is unchanged.` }).waitFor();
      expect(readFileSync(memory, 'utf8')).not.toContain('water on Mondays');
      await page.locator('#waiting .empty', { hasText: 'nothing waits for you' }).waitFor();
    } finally {
      await context.close();
    }
  });

  it("charts the tokens per day and agent over 30 days, and what is left of today's budget", async () => {
    const today = new Date().toISOString().slice(0, 10);
    const used = async () => (await usagePerDay(s.home, 30)).find((u) => u.agent === 'admin' && u.day === today);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${owner.origin}/control?token=${owner.token}`);
      const bar = page.locator(`#spend svg rect[data-agent=admin][data-day="${today}"]`);
      await bar.waitFor();
      // The turns above may still be recording: the page, read again every few seconds, catches up.
      await waitFor(
        async () => {
          const u = await used();
          return u !== undefined && (await bar.getAttribute('data-tokens')) === String(u.input_tokens + u.output_tokens);
        },
        "today's bar with admin's tokens so far",
        30_000,
      );
      const u = (await used())!;
      const tokens = u.input_tokens + u.output_tokens;
      expect(await bar.locator('title').textContent()).toBe(
        `${today} admin: ${tokens.toLocaleString('en')} tokens (${u.input_tokens.toLocaleString('en')} in, ${u.output_tokens.toLocaleString('en')} out), ${u.calls} calls, $0.00`,
      );
      expect(await page.locator('#spend svg rect').count()).toBe(1); // one agent, one day with calls
      expect(await page.locator('#spend svg text').allTextContents()).toContain(today.slice(5));
      expect(await page.locator('#spend .legend').textContent()).toBe(`admin: ${tokens.toLocaleString('en')} tokens, $0.00`);
      expect(await page.locator('#budgets [data-agent=admin] .detail').textContent()).toBe(`${(1_000_000 - tokens).toLocaleString('en')} of 1,000,000 tokens left today (UTC)`);
    } finally {
      await context.close();
    }
  });

  it("lists every agent's conversations with their last messages and opens one read-only", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${owner.origin}/control?token=${owner.token}`);
      const ann = page.locator('[data-thread="admin/threads/peers/telegram.main.888"]');
      await ann.locator('.msg.person', { hasText: 'hi, it is Ann' }).waitFor();
      const peter = page.locator('[data-thread="admin/threads/peers/telegram.main.777"]');
      expect(await peter.locator('.last .msg .text').allTextContents()).toEqual(['make it so', 'reply to: make it so']);
      expect(await page.locator('#conversations [data-thread^="admin/threads/peers/webchat.main."]').count()).toBe(1);

      await peter.getByRole('button', { name: 'Open' }).click();
      const panel = page.locator('#conversation');
      await panel.locator('.msg').first().waitFor();
      expect(await panel.locator('.msg .text').allTextContents()).toEqual(['make it so', 'reply to: make it so']);
      expect(await panel.locator('.detail').textContent()).toBe('threads/peers/telegram.main.777 · read-only');
      expect(await panel.locator('input, textarea, form').count()).toBe(0);
      await panel.getByRole('button', { name: 'Close' }).click();
      await panel.waitFor({ state: 'hidden' });
    } finally {
      await context.close();
    }
    // Only a conversation of that agent is ever opened.
    const open = (query: string) => fetch(`${owner.origin}/control/conversation?${query}`, { headers: { Authorization: `Bearer ${owner.token}` } });
    expect((await open('agent=admin&thread=../../xgw')).status).toBe(404);
    expect((await open('agent=admin&thread=heartbeat')).status).toBe(404);
    expect((await open('agent=..&thread=inbox')).status).toBe(400);
    expect((await fetch(`${owner.origin}/control/conversation?agent=admin&thread=threads/peers/telegram.main.777`)).status).toBe(401);
  });

  it("lists what is wrong, each with its fix: a channel that cannot start, and the maintainer's report of a failing model", async () => {
    // The model refuses the key: the turn fails, the maintainer's sweep tells the owner, with what to do.
    s.llm.enqueue({ kind: 'error', status: 401, message: 'Incorrect API key provided' });
    const chat = await connectWebchat(`${owner.origin}/?token=${owner.token}`);
    try {
      await chat.send('and now?');
      await waitFor(
        async () => ((JSON.parse((await s.must('theclaw', ['maintain', '--json'])).stdout) as { reported: string[] }).reported.length > 0 ? true : undefined),
        "the maintainer's report",
        30_000,
      );
    } finally {
      chat.close();
    }

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${owner.origin}/control?token=${owner.token}`);
      const channel = page.locator('#problems .item', { hasText: 'webchat:taken is error' });
      await channel.waitFor();
      expect(await channel.locator('.detail').textContent()).toMatch(/^webchat:taken is error: .*in use/);
      expect(await channel.locator('.fix').textContent()).toMatch(/^Fix: xgw tries it again by itself; theclaw doctor checks the channel/);
      const report = page.locator('#problems .item', { hasText: 'could not answer a message' });
      expect(await report.locator('.name').textContent()).toBe('maintainer');
      expect(await report.locator('.detail').textContent()).toMatch(/^admin could not answer a message .*Check the provider key/);
    } finally {
      await context.close();
    }
  });

  it("refuses the page and every action to a guest web chat, to a request without the token, and to another site's page", async () => {
    const action = JSON.stringify({ action: 'agent_stop', agent: 'admin' });
    const post = (origin: string, headers: Record<string, string>) => fetch(`${origin}/control/action`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: action });
    const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

    // The guest web chat (access: pairing) shares its token with the people it pairs: no control page at all.
    expect((await fetch(`${guest.origin}/control?token=${guest.token}`)).status).toBe(404);
    expect((await fetch(`${guest.origin}/control.json`, { headers: bearer(guest.token) })).status).toBe(404);
    expect((await post(guest.origin, { ...bearer(guest.token), Origin: guest.origin })).status).toBe(404);
    expect(await (await fetch(`${guest.origin}/?token=${guest.token}`)).text()).not.toContain('/control');

    // The owner's: the page holds no secret, its data and actions need the token.
    const page = await fetch(`${owner.origin}/control`);
    expect(page.status).toBe(200);
    const chatPage = await fetch(`${owner.origin}/`);
    expect(page.headers.get('content-security-policy')).toBe(chatPage.headers.get('content-security-policy'));
    expect(await page.text()).not.toMatch(/<script>|<script [^>]*>[^<]/); // no inline script
    expect((await fetch(`${owner.origin}/control.json`)).status).toBe(401);
    expect((await post(owner.origin, { Origin: owner.origin })).status).toBe(401);
    expect((await post(owner.origin, { ...bearer(guest.token), Origin: owner.origin })).status).toBe(401);
    // The token with another origin, or none (not a browser's page), or not JSON: refused.
    expect((await post(owner.origin, { ...bearer(owner.token), Origin: 'http://evil.example' })).status).toBe(403);
    expect((await post(owner.origin, { ...bearer(owner.token), Origin: guest.origin })).status).toBe(403);
    expect((await post(owner.origin, bearer(owner.token))).status).toBe(403);
    expect((await fetch(`${owner.origin}/control/action`, { method: 'POST', headers: { 'Content-Type': 'text/plain', Origin: owner.origin, ...bearer(owner.token) }, body: action })).status).toBe(415);
    expect((await fetch(`${owner.origin}/control/action`, { headers: bearer(owner.token) })).status).toBe(405);
    expect((await agentStatus(s.home, 'admin')).started).toBe(true);

    // A hostile action is refused as a whole.
    const bad = await fetch(`${owner.origin}/control/action`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Origin: owner.origin, ...bearer(owner.token) },
      body: JSON.stringify({ action: 'agent_create', agent: '../../etc', purpose: 'x' }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/^invalid control action: agent: must be an agent id/);
  });
});
