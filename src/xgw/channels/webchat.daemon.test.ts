import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { artifactPath, hasChromium, launchChromium } from '../../testing/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAddress } from '../../core/address.js';
import { parseMessageContent } from '../../core/message.js';
import { createTestHome, startedInbox, runTool, waitFor, type TestHome } from '../../testing/index.js';
import { openThread } from '../../thread/index.js';
import type { XgwStatus } from '../protocol.js';

/**
 * The web chat as a person meets it: the real `xgw start` daemon, the URL that `xgw status`
 * prints, a real browser (Debian's chromium), and a reply sent with the real `xgw send` CLI.
 */

let t: TestHome;
let browser: Browser;

beforeAll(async () => {
  if (!hasChromium) return;
  t = createTestHome();
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeFileSync(join(t.home, 'xgw', 'config.yaml'), 'channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\nroutes:\n  - { agent: admin }\n');
  startedInbox(t.home);
  browser = await launchChromium();
});

afterAll(async () => {
  if (!hasChromium) return;
  await browser?.close();
  await runTool('xgw', ['stop'], t.env);
  t.cleanup();
});

describe.skipIf(!hasChromium)('web chat through the xgw daemon', () => {
  it('takes a typed message into the inbox and shows a reply sent with xgw send', async () => {
    expect((await runTool('xgw', ['start'], t.env)).code).toBe(0);
    const status = JSON.parse((await runTool('xgw', ['status', '--json'], t.env)).stdout) as XgwStatus;
    const url = status.channels.find((channel) => channel.id === 'webchat:main')!.url!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}$/);

    const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    await page.goto(url);
    expect(page.url()).not.toContain('token='); // the page keeps it in localStorage
    await page.locator('#status[data-state="online"]').waitFor();
    await page.locator('#input').fill('hello from the browser');
    await page.locator('#input').press('Enter');

    const inbox = openThread(join(t.home, 'agents', 'admin', 'inbox'), { home: t.home });
    const [event] = await waitFor(() => {
      const events = inbox.peek();
      return events.length > 0 ? events : undefined;
    }, 'the message in the inbox');
    inbox.close();
    const source = parseAddress(event!.source);
    expect(source).toMatchObject({ kind: 'external', channelType: 'webchat', instance: 'main', conversationType: 'dm' });
    const peer = (source as { peerId: string }).peerId;
    const content = parseMessageContent(event!.content);
    expect(content.text).toBe('hello from the browser');

    const sent = await runTool(
      'xgw',
      ['send', '--channel', 'webchat:main', '--peer', peer, '--reply-to', (content.reply_context as { message_id: string }).message_id, '--text', 'first line\nsecond line'],
      t.env,
    );
    expect(sent.code, sent.stderr).toBe(0);
    const bubble = page.locator('.row.agent:not(.typing) .bubble').first();
    await bubble.waitFor();
    // biome-ignore lint/performance/useDomNodeTextContent: reads the text as rendered, with its line break.
    expect(await bubble.innerText()).toBe('first line\nsecond line');
    await page.screenshot({ path: artifactPath('webchat-daemon.png') });
  });
});
