import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completionRequests, type FakeStep, type LooseJson, type RecordedRequest } from '../testing/fake-llm.js';
import { startFakeBrave, type FakeSearchServer } from '../testing/fake-search.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { startFixtureSite, type FixtureSite } from '../testing/fixture-site.js';
import { artifactPath, CHROMIUM, hasChromium, launchChromium } from '../testing/browser.js';
import { BWRAP, NEEDS_BWRAP } from '../testing/index.js';
import { lastUserText, startSystem, until, type System } from './support.js';

/**
 * The web in an agent's turn, through the whole system (real xgw, notifier, agent in its default
 * bubblewrap sandbox, browser service and Chromium; fake model, Telegram and Brave; the loopback
 * fixture site, allowed through web/config.yaml's allow_private): what the agent reads with
 * `web fetch` and `browser` reaches the person, a screenshot it attaches is shown in the web chat
 * and sent as a photo on Telegram, a group allowed only `web *` runs `web fetch` and nothing else,
 * and `web search` with Brave works while the key stays out of the sandbox.
 *
 * The model is scripted: for each question, a list of commands, one per tool call (a command may
 * be made from what the previous one printed), then an answer made from what they printed.
 */

const KEY = 'BSA-e2e-secret-4711';
const GROUP = -100_2121;
const PEER = 2121;

interface Script {
  commands: ((printed: ToolResult[]) => string)[];
  answer: (printed: ToolResult[]) => string;
}
/** What the test reads of the page's <img> (the tests are compiled without the DOM's types). */
interface ShownImage {
  complete: boolean;
  naturalWidth: number;
  naturalHeight: number;
  src: string;
}
interface ToolResult {
  stdout: string;
  stderr: string;
  exit_code: number;
}

let s: System;
let site: FixtureSite;
let brave: FakeSearchServer;
let chromium: Browser | undefined;
const scripts = new Map<string, Script>();

/** The path `browser screenshot`/`browser pdf` printed it saved the file at, for `agent attach`. */
const savedPath = (printed: ToolResult[]) => /Saved (\S+) \(/.exec(printed.at(-1)?.stdout ?? '')?.[1] ?? 'nothing-saved';
/** The fact of the fixture's article, as the agent read it, or what it lacked. */
const ferryFact = (text: string) => /leaves at (\d\d:\d\d) from (pier \d)/.exec(text)?.slice(1).join(' from ') ?? 'unknown';

/** The results of the tool calls since the person's last message. */
function toolResults(request: RecordedRequest): ToolResult[] {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const since = messages.findLastIndex((message) => message.role === 'user');
  return messages
    .slice(since + 1)
    .filter((message) => message.role === 'tool')
    .map((message) => JSON.parse(String(message.content)) as ToolResult);
}

const scriptedStep: FakeStep = (request) => {
  const script = scripts.get(lastUserText(request).split('\n')[0]!.trim());
  if (!script) return { kind: 'text', text: 'I have no script for that.' };
  const printed = toolResults(request);
  const next = script.commands[printed.length];
  return next ? { kind: 'tool_call', name: 'bash_exec', arguments: { command: next(printed) } } : { kind: 'text', text: script.answer(printed) };
};

beforeAll(async () => {
  [site, brave] = await Promise.all([startFixtureSite(), startFakeBrave({ key: KEY })]);
  s = await startSystem({
    logLevel: 'info',
    llm: { defaultStep: scriptedStep },
    // Every process has the key, as the owner's shell would: notifier and the agent's runs too.
    env: { BRAVE_API_KEY: KEY },
    telegramRequireMention: false,
    policy: '{ rules: [{ channel: telegram, conversation: group, bash: { allow: ["web *"], otherwise: deny } }, { bash: allow }] }',
  });
  mkdirSync(join(s.home, 'web'), { recursive: true });
  writeFileSync(join(s.home, 'web', 'config.yaml'), `allow_private: ["127.0.0.1"]\nsearch: { provider: brave, api_root: "${brave.apiRoot}" }\n`);
}, 60_000);

afterAll(async () => {
  await chromium?.close();
  await s?.run('browser', ['stop']);
  await s?.stop();
  await Promise.all([site?.close(), brave?.close()]);
});

const toPeer = (chat: number) => s.telegram.sent.filter((sent) => Number(sent.chat_id) === chat);

describe.skipIf(!BWRAP || !hasChromium)(`the web in a turn (${NEEDS_BWRAP}; ${CHROMIUM})`, { timeout: 180_000 }, () => {
  it('answers in the web chat with what web fetch and browser read, and shows the screenshot it attached as an image', async () => {
    const question = 'When does the Brest ferry leave, and what does its page look like?';
    scripts.set(question, {
      commands: [
        () => `web fetch ${site.url('/article')}`,
        () => `browser open ${site.url('/article')}`,
        () => 'browser snapshot',
        () => 'browser screenshot',
        (printed) => `agent attach ${savedPath(printed)}`,
      ],
      answer: (printed) => `It leaves at ${ferryFact(printed[0]!.stdout)}; the page is headed "${/heading "([^"]+)"/.exec(printed[2]!.stdout)?.[1] ?? 'unknown'}". Here is a screenshot.`,
    });
    chromium = await launchChromium();
    const page = await (await chromium.newContext()).newPage();
    await page.goto((await s.xgwStatus()).channels.find((channel) => channel.id === 'webchat:main')!.url!);
    await page.locator('#status[data-state="online"]').waitFor();
    await page.locator('#input').fill(question);
    await page.locator('#input').press('Enter');

    const answer = page.locator('.row.agent:not(.typing) .bubble').filter({ hasText: 'Here is a screenshot.' });
    await answer.waitFor({ timeout: 120_000 });
    const printed = toolResults(completionRequests(s.llm).at(-1)!);
    expect(
      printed.map((result) => result.exit_code),
      JSON.stringify(printed),
    ).toEqual([0, 0, 0, 0, 0]);
    // The facts came from the commands' output: the article's text, and the browser's snapshot of it.
    expect(await answer.textContent()).toContain('It leaves at 07:45 from pier 3; the page is headed "Brest ferry timetable".');
    // The screenshot is shown in the message, as a decoded PNG of the page's size.
    const image = answer.locator('img.image');
    await image.waitFor();
    const shown = () =>
      image.evaluate((element) => {
        const img = element as unknown as ShownImage;
        return img.complete ? { width: img.naturalWidth, height: img.naturalHeight, src: img.src } : null;
      });
    await until(async () => ((await shown())?.width ?? 0) > 0, 'the screenshot to be shown');
    expect(await shown()).toEqual({ width: expect.toSatisfy((n: number) => n >= 800), height: expect.toSatisfy((n: number) => n >= 600), src: expect.stringMatching(/^blob:/) });
    expect(await answer.locator('button.file').textContent()).toMatch(/^screenshot-.*\.png · \d+ KB$/);
    await page.screenshot({ path: artifactPath('webchat-screenshot-reply.png') });
  });

  it('sends the screenshot it attached as a photo on Telegram, and a PDF as a document', async () => {
    const question = 'Send me the timetable page as a picture and as a PDF';
    scripts.set(question, {
      commands: [
        () => `browser open ${site.url('/article')}`,
        () => 'browser screenshot',
        (printed) => `agent attach ${savedPath(printed)}`,
        () => 'browser pdf',
        (printed) => `agent attach ${savedPath(printed)}`,
      ],
      answer: () => 'Here they are.',
    });
    s.telegram.queueUpdate(textUpdate({ from: PEER, text: question }));
    const filesSent = () => toPeer(PEER).flatMap((sent) => (sent.file ? [sent.file] : []));
    // The answer's text first (the draft that showed it as it was written), then its files.
    await until(() => filesSent().length === 2, 'the answer and its two files on Telegram', 120_000);
    expect(toPeer(PEER).map((sent) => sent.text)).toEqual(['Here they are.', '', '']);
    const files = filesSent();
    expect(files.map((file) => [file.kind, file.name.split('.').at(-1)])).toEqual([
      ['photo', 'png'],
      ['document', 'pdf'],
    ]);
    expect(files[0]!.bytes.subarray(1, 4).toString()).toBe('PNG');
    expect(files[1]!.bytes.subarray(0, 5).toString()).toBe('%PDF-');
    expect(s.telegram.calls.filter((call) => call.method === 'sendPhoto' || call.method === 'sendDocument').map((call) => call.method)).toEqual(['sendPhoto', 'sendDocument']);
  });

  it('runs web fetch in a Telegram group whose policy allows only `web *`, refuses ls there (exit 126), and answers with what it read', async () => {
    const question = 'When does the Brest ferry leave?';
    scripts.set(question, {
      commands: [() => `web fetch ${site.url('/article')}`, () => 'ls'],
      answer: (printed) => `It leaves at ${ferryFact(printed[0]!.stdout)} (ls exited ${printed[1]!.exit_code}).`,
    });
    s.telegram.queueUpdate(textUpdate({ from: PEER + 1, chat: GROUP, chatType: 'group', text: question }));
    // Written as a draft that is edited until the whole answer is there.
    const answer = 'It leaves at 07:45 from pier 3 (ls exited 126).';
    await until(() => toPeer(GROUP).some((sent) => /\(ls exited \d+\)\.$/.test(sent.text)), 'the answer in the group', 120_000);
    expect(toPeer(GROUP).map((sent) => sent.text)).toEqual([answer]);
    const printed = toolResults(completionRequests(s.llm).at(-1)!);
    expect(printed.map((result) => result.exit_code)).toEqual([0, 126]);
  });

  it('searches with Brave from a turn through the run, the key never in the sandbox: not in its environment, nor in what the model is given', async () => {
    const question = 'Search the web for the brest ferry';
    scripts.set(question, {
      commands: [() => 'web search brest ferry --count 2', () => 'env'],
      answer: (printed) => `First result: ${/^1\. (.+)$/m.exec(printed[0]!.stdout)?.[1] ?? 'none'}; ${/daily at \d\d:\d\d/.exec(printed[0]!.stdout)?.[0] ?? 'no time'}.`,
    });
    s.telegram.queueUpdate(textUpdate({ from: PEER, text: question }));
    const answer = 'First result: brest ferry - timetable (2026-11-20T08:00:00); daily at 07:45.';
    await until(() => toPeer(PEER).some((sent) => sent.text === answer || sent.text.startsWith('First result: none')), 'the search answer', 120_000);
    const printed = toolResults(completionRequests(s.llm).at(-1)!);
    expect(printed[0]!.exit_code, printed[0]!.stderr).toBe(0);
    expect(toPeer(PEER).at(-1)!.text).toBe(answer);
    expect(brave.requests.at(-1)!.headers['x-subscription-token']).toBe(KEY);
    // The sandbox's environment has the run's search socket, and no key.
    expect(printed[1]!.stdout).toMatch(/^THECLAW_WEB_SEARCH_SOCKET=/m);
    expect(printed[1]!.stdout).not.toContain('BRAVE_API_KEY');
    for (const request of s.llm.requests) expect(JSON.stringify(request.body)).not.toContain(KEY);
  });
});
