import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDir } from '../agent/agent-dir.js';
import { conversationThreads } from '../agent/lifecycle.js';
import { artifactPath, CHROMIUM, hasChromium, launchChromium } from '../testing/browser.js';
import { createTestHome, runTool, startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import { connectWebchat, type WebchatClient } from '../xgw/index.js';
import type { UpResult } from './system.js';

/**
 * The status page in a real browser against the real system: `theclaw up` in a temp home (the
 * xgw daemon serving the page runs `theclaw status` for its data), a loopback OpenAI-compatible
 * model with prices, and messages sent through the web chat. The screenshot goes to
 * `.test-artifacts/status-page.png` for a human to look at.
 */
// Runs in the page (the project's tsconfig has no DOM types).
declare function getComputedStyle(element: unknown): { backgroundColor: string };
declare const localStorage: { getItem(key: string): string | null };

/** A message that would run script if the page ever put content into HTML. */
const HOSTILE = 'what is on my calendar? <img src=x onerror="document.title=\'pwned\'">';

let t: TestHome;
let llm: FakeLlmServer;
let browser: Browser;
let chat: WebchatClient;
let statusUrl: string;

beforeAll(async () => {
  if (!hasChromium) return;
  t = createTestHome();
  for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY']) delete t.env[key];
  mkdirSync(join(t.home, 'xgw'));
  writeFileSync(join(t.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n');
  llm = await startFakeOpenAI();
  writeFakePaiConfig(t.home, llm, { modelFields: 'cost: { input: 3, output: 15 }', maxAttempts: 1 });
  const up = await runTool('theclaw', ['up', '--json'], t.env);
  expect(up.code, up.stderr).toBe(0);
  const url = new URL((JSON.parse(up.stdout) as UpResult).xgw.channels[0]!.url!);
  url.pathname = '/status';
  statusUrl = url.toString();
  chat = await connectWebchat((JSON.parse(up.stdout) as UpResult).xgw.channels[0]!.url!);
  browser = await launchChromium();
});

afterAll(async () => {
  if (!hasChromium) return;
  chat?.close();
  await browser?.close();
  await runTool('theclaw', ['down'], t.env);
  await llm?.close();
  t?.cleanup();
});

/** Every event of admin's (one) conversation thread. */
function threadEvents() {
  const [path] = conversationThreads(agentDir(t.home, 'admin'));
  if (!path) return [];
  const thread = openThread(path, { home: t.home });
  try {
    return thread.peek({ limit: 1_000 });
  } finally {
    thread.close();
  }
}

describe.skipIf(!hasChromium)(`status page in a browser (needs ${CHROMIUM})`, () => {
  it('shows components, agents, usage and cost per day, and the newest events first with errors highlighted; refreshes itself', async () => {
    llm.enqueue({ kind: 'text', text: 'The calendar is empty today.', usage: { input: 1_000, output: 200 } });
    await chat.send(HOSTILE);
    expect((await chat.nextReply(AbortSignal.timeout(20_000))).text).toBe('The calendar is empty today.');
    llm.enqueue({ kind: 'error', status: 401, message: 'Incorrect API key provided' });
    await chat.send('and tomorrow?');
    await waitFor(() => threadEvents().some((e) => e.subtype === 'error'), 'the error record');

    // Without the token there is nothing to see: the page itself holds no data.
    const statusJson = statusUrl.replace(/\/status\?token=.*/, '/status.json');
    expect((await fetch(statusJson)).status).toBe(401);
    expect((await fetch(statusUrl.replace(/\?token=.*/, '?token=' + '0'.repeat(64)))).status).toBe(401);
    expect((await fetch(statusJson, { headers: { Authorization: `Bearer ${new URL(statusUrl).searchParams.get('token')}` } })).status).toBe(200);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(statusUrl);
      expect(new URL(page.url()).pathname).toBe('/status'); // the token kept by the page, out of the URL bar
      expect(new URL(page.url()).search).toBe('');
      await page.locator('#agents td').first().waitFor();

      // biome-ignore lint/performance/useDomNodeTextContent: reads the text as rendered: line breaks, and cells apart by tabs.
      const rows = async (id: string) => page.locator(`#${id} tr`).evaluateAll((trs) => trs.map((tr) => (tr as unknown as { innerText: string }).innerText.split('\t').map((cell) => cell.trim())));
      const components = await rows('components');
      expect(components.slice(1).map((r) => r.slice(0, 2))).toEqual([
        ['notifier', 'running'],
        ['xgw', 'running'],
      ]);
      expect(components[1]![4]).toMatch(/^\d+ MB$/);
      expect((await rows('agents')).slice(1).map((r) => r[0])).toEqual(['admin', 'evolver', 'maintainer', 'warden']);
      const today = new Date().toISOString().slice(0, 10);
      // One call answered (1,000 in, 200 out at $3 / $15 per million tokens) and one refused.
      expect((await rows('usage')).slice(1)).toEqual([[today, 'admin', '1', '1000', '200', '0.0060']]);

      const section = page.locator('#events h3').first();
      expect(await section.textContent()).toMatch(/^admin \/ threads\/peers\/webchat\.main\.[0-9a-f]{32}$/);
      const events = page.locator('#events table').first().locator('tr');
      const newest = events.nth(1);
      expect(await newest.getAttribute('class')).toBe('error');
      // biome-ignore lint/performance/useDomNodeTextContent: reads the text as rendered: line breaks, and cells apart by tabs.
      expect(await newest.innerText()).toMatch(/record\/error.*llm: .*401/s);
      const errorBackground = await newest
        .locator('td')
        .first()
        .evaluate((td) => getComputedStyle(td).backgroundColor);
      const plainBackground = await events
        .nth(2)
        .locator('td')
        .first()
        .evaluate((td) => getComputedStyle(td).backgroundColor);
      expect(errorBackground).not.toBe(plainBackground);
      const kinds = await events.evaluateAll((trs) => trs.slice(1).map((tr) => (tr as unknown as { children: { textContent: string }[] }).children[2]!.textContent));
      // The refusal's record, then its notice to the person, the question, the first answer, its
      // usage, the turns' attempt records, the first question.
      expect(kinds).toEqual(['record/error', 'message', 'record/attempt', 'message', 'message', 'record/usage', 'record/attempt', 'message']);
      expect(await events.last().locator('td').last().textContent()).toBe(HOSTILE); // shown as text, never run
      expect(await page.title()).toBe('TheClaw status');
      // The data behind the page holds no channel URL: those carry each channel's token.
      const json = await page.evaluate(() => fetch('/status.json', { headers: { Authorization: `Bearer ${localStorage.getItem('xgw_token')}` } }).then((r) => r.text()));
      expect(json).toContain('"channels":[{');
      expect(json).not.toContain('token=');
      await page.screenshot({ path: artifactPath('status-page.png'), fullPage: true });

      // It refreshes itself: a new exchange shows up without a reload.
      llm.enqueue({ kind: 'text', text: 'Tomorrow you have a dentist appointment.' });
      await chat.send('try again: tomorrow?');
      await chat.nextReply(AbortSignal.timeout(20_000));
      await page.locator('#events', { hasText: 'Tomorrow you have a dentist appointment.' }).waitFor({ timeout: 15_000 });
    } finally {
      await context.close();
    }
  });
});
