import type { Browser, Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStep, LooseJson } from '../testing/fake-llm.js';
import { artifactPath, CHROMIUM, hasChromium, launchChromium } from '../testing/browser.js';
import { startSystem, type System } from './support.js';

/**
 * What the person sees in the web chat while a turn runs a command, through the whole system
 * (real notifier, runner, agent in its sandbox and xgw; fake model) in a real Chromium: the
 * command under the typing dots while it runs, then only the answer. A web chat with
 * `show_tool_progress: false` is sent none.
 */
const COMMAND = 'sleep 2; ls';
const ANSWER = 'Your directory is empty.';

/** One command, then the answer. */
const listStep: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  if (messages.at(-1)?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: COMMAND } };
  return { kind: 'text', text: ANSWER };
};

let system: System | undefined;
let browser: Browser | undefined;

afterEach(async () => {
  await browser?.close();
  browser = undefined;
  await system?.stop();
  system = undefined;
});

/** A page of the channel, and every frame its WebSocket received. */
async function openChat(b: Browser, url: string): Promise<{ page: Page; frames: LooseJson[] }> {
  const page = await (await b.newContext()).newPage();
  const frames: LooseJson[] = [];
  page.on('websocket', (ws) => ws.on('framereceived', (frame) => frames.push(JSON.parse(String(frame.payload)))));
  await page.goto(url);
  await page.locator('#status[data-state="online"]').waitFor();
  return { page, frames };
}

async function ask(page: Page, text: string): Promise<void> {
  await page.locator('#input').fill(text);
  await page.locator('#input').press('Enter');
}

const agentBubbles = (page: Page) => page.locator('.row.agent:not(.typing) .bubble');

describe.skipIf(!hasChromium)(`tool progress in the web chat (needs ${CHROMIUM})`, () => {
  it('shows the command under the dots while it runs, then only the answer; a web chat with show_tool_progress off is shown none', { timeout: 90_000 }, async () => {
    const s = await startSystem({
      logLevel: 'info',
      llm: { defaultStep: listStep },
      extraChannels: ['{ id: webchat:quiet, type: webchat, port: 0, access: open, show_tool_progress: false }'],
    });
    system = s;
    const channels = (await s.xgwStatus()).channels;
    const urlOf = (id: string) => channels.find((channel) => channel.id === id)!.url!;
    browser = await launchChromium();

    const { page, frames } = await openChat(browser, urlOf('webchat:main'));
    await ask(page, 'what is in my directory?');
    const line = page.locator('.row.typing .progress');
    await line.filter({ hasText: `running: ${COMMAND}` }).waitFor({ timeout: 30_000 }); // while the command sleeps
    expect(await page.locator('.row.typing i').count()).toBe(3); // under the dots
    await page.screenshot({ path: artifactPath('webchat-tool-progress.png') });
    await agentBubbles(page).filter({ hasText: ANSWER }).waitFor({ timeout: 30_000 });
    expect(await page.locator('.row.typing').count()).toBe(0);
    expect(await agentBubbles(page).allTextContents()).toEqual([ANSWER]);
    expect(await page.getByText('running:').count()).toBe(0);
    expect(frames.filter((frame) => frame.type === 'tool_progress')).toEqual([{ type: 'tool_progress', command: COMMAND }]);
    // Never stored: the history after a reload has the question and the answer only.
    await page.reload();
    await page.locator('#status[data-state="online"]').waitFor();
    expect(await agentBubbles(page).allTextContents()).toEqual([ANSWER]);
    expect(await page.getByText('running:').count()).toBe(0);

    const quiet = await openChat(browser, urlOf('webchat:quiet'));
    await ask(quiet.page, 'what is in my directory?');
    await agentBubbles(quiet.page).filter({ hasText: ANSWER }).waitFor({ timeout: 30_000 });
    expect(quiet.frames.some((frame) => frame.type === 'typing')).toBe(true); // it worked, with the dots
    expect(quiet.frames.filter((frame) => frame.type === 'tool_progress')).toEqual([]);
    expect(await quiet.page.getByText('running:').count()).toBe(0);
  });
});
