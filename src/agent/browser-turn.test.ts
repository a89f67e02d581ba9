import { userInfo } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { hasChromium } from '../testing/browser.js';
import { startFormSite, type FormSite } from '../testing/form-site.js';
import { BWRAP, createTestHome, NEEDS_BWRAP, runTool, startFakeOpenAI, writeFakePaiConfig, type LooseJson, type TestHome } from '../testing/index.js';
import { initAgent } from './lifecycle.js';
import { runAgent } from './run.js';
import { sendToAgent } from './send.js';

let t: TestHome;
let site: FormSite;

beforeEach(async () => {
  t = createTestHome();
  await initAgent(t.home, 'helper');
  mkdirSync(join(t.home, 'web'), { recursive: true });
  writeFileSync(join(t.home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
  site = await startFormSite();
});
afterEach(async () => {
  await runTool('browser', ['stop'], t.env);
  await site.close();
  t.cleanup();
});

describe('browser in a turn', { timeout: 180_000 }, () => {
  it.skipIf(!BWRAP || !hasChromium)(`opens a page and reads its snapshot from the sandboxed shell, through the run's socket to its own agent's browser (${NEEDS_BWRAP})`, async () => {
    const commands = [`browser open ${site.url('/form')}`, 'browser snapshot'];
    const server = await startFakeOpenAI({
      defaultStep: (request) => {
        const messages: LooseJson[] = request.body?.messages ?? [];
        const done = messages.filter((message) => message.role === 'tool').length;
        const command = commands[done];
        return command ? { kind: 'tool_call', name: 'bash_exec', arguments: { command } } : { kind: 'text', text: 'It is a booking form.' };
      },
    });
    try {
      writeFakePaiConfig(t.home, server, { contextWindow: 100_000 });
      const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });
      await sendToAgent(t.home, 'helper', { text: 'What is on the booking page?', source: owner });
      expect(await runAgent('helper', { home: t.home, env: t.env })).toMatchObject({ handled: 1, replied: 1 });
      const calls = server.requests.filter((request) => request.path === '/v1/chat/completions');
      // What the commands printed, as the model's last request carries it.
      const printed = (calls.at(-1)!.body.messages as LooseJson[])
        .filter((message) => message.role === 'tool')
        .map((message) => (JSON.parse(String(message.content)) as { stdout: string }).stdout)
        .join('\n');
      expect(printed).toContain(`Opened ${site.url('/form')}`);
      expect(printed).toMatch(/^\[web content from http:\/\/127\.0\.0\.1:\d+\/form: untrusted text/m);
      expect(printed).toContain('heading "Book a crossing"');
      expect(printed).toMatch(/textbox "Your name" \[ref=(f\d+)?e\d+\]/);
    } finally {
      await server.close();
    }
  });
});
