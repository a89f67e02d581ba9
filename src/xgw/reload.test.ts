import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseAddress, type ExternalAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, runTool, startedInbox, startFakeTelegram, textUpdate, threadEvents, waitFor, type FakeTelegram, type LooseJson, type TestHome } from '../testing/index.js';
import { webchatProtocols } from './channels/webchat-http.js';
import { askXgw } from './client.js';
import type { XgwReloadResult, XgwStatus } from './protocol.js';

// `xgw reload` and the config commands against the real daemon (`xgw start`) and the real CLIs
// in a temp THECLAW_HOME; Telegram is the fake Bot API on loopback.

let t: TestHome;
let telegram: FakeTelegram;
const TOKEN_ENV = 'RELOAD_TEST_TG_TOKEN';

beforeEach(async () => {
  t = createTestHome();
  telegram = await startFakeTelegram();
  t.env[TOKEN_ENV] = telegram.token;
  mkdirSync(join(t.home, 'xgw'), { recursive: true });
  writeConfig(`# the owner's gateway
channels:
  - { id: webchat:main, type: webchat, port: 0, access: open }   # the page
  - { id: telegram:main, type: telegram, token_env: ${TOKEN_ENV}, api_root: "${telegram.apiRoot}", access: open }
routes:
  - { channel: "*", peer: "*", agent: admin }
`);
  startedInbox(t.home, 'admin');
  startedInbox(t.home, 'helper');
});

afterEach(async () => {
  await runTool('xgw', ['stop'], t.env);
  await telegram.close();
  t.cleanup();
});

const configFile = () => join(t.home, 'xgw', 'config.yaml');

function writeConfig(yaml: string): void {
  writeFileSync(configFile(), yaml);
}

async function xgw(args: string[], env = t.env) {
  return runTool('xgw', args, env);
}

async function must(args: string[]) {
  const result = await xgw(args);
  expect(result.code, `xgw ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result;
}

async function status(): Promise<XgwStatus> {
  return JSON.parse((await must(['status', '--json'])).stdout) as XgwStatus;
}

/** The texts that reached an agent's inbox. */
function inboxTexts(agent: string): string[] {
  return threadEvents(t.home, join(t.home, 'agents', agent, 'inbox')).map((event) => parseMessageContent(event.content).text);
}

/** A web chat connection as the page makes one; `closed` turns true if the server drops it. */
async function openPage(channelId = 'webchat:main') {
  const url = new URL((await status()).channels.find((channel) => channel.id === channelId)!.url!);
  const base = `http://127.0.0.1:${url.port}`;
  const ws = new WebSocket(`ws://127.0.0.1:${url.port}/ws`, webchatProtocols(url.searchParams.get('token')!, randomBytes(16).toString('hex')), { origin: base });
  const received: LooseJson[] = [];
  const page = { ws, received, closed: false };
  ws.on('message', (data) => received.push(JSON.parse(String(data))));
  ws.on('close', () => (page.closed = true));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  await waitFor(() => received.some((m) => m.type === 'history'), 'the history');
  return page;
}

async function say(page: Awaited<ReturnType<typeof openPage>>, id: string, text: string): Promise<void> {
  page.ws.send(JSON.stringify({ type: 'message', id, text }));
  await waitFor(() => page.received.some((m) => m.type === 'ack' && m.id === id), `the ack of ${id}`);
}

/** A page on `channelId` that said something, and the conversation it said it in (from admin's inbox). */
async function pageInConversation(channelId: string, text: string) {
  const page = await openPage(channelId);
  await say(page, `said-${text}`, text);
  await waitFor(() => inboxTexts('admin').includes(text), `${text} at admin`);
  const event = threadEvents(t.home, join(t.home, 'agents', 'admin', 'inbox')).find((e) => parseMessageContent(e.content).text === text)!;
  const address = parseAddress(event.source) as ExternalAddress;
  const conversation = { channel: channelId, peer: address.peerId, conversation_type: address.conversationType, conversation: address.conversationId };
  let markers = 0;
  /** Asks xgw to show `command` as a turn's tool progress; returns the commands the page was shown by then. */
  const progress = async (command: string): Promise<string[]> => {
    await askXgw(t.home, { op: 'tool_progress', ...conversation, reply_to: `said-${text}`, command });
    // A socket keeps the order it is sent in: once a draft sent after it arrives, so has the progress.
    const marker = `marker-${++markers}`;
    await askXgw(t.home, { op: 'draft', ...conversation, reply_to: marker, text: marker });
    await waitFor(() => page.received.some((m) => m.type === 'draft' && m.reply_to === marker), `the draft ${marker}`);
    return page.received.filter((m) => m.type === 'tool_progress').map((m) => m.command as string);
  };
  return { page, progress };
}

/** Telegram's calls that only a start of the channel makes (a restart would make them again). */
const startCalls = () => telegram.calls.filter((call) => call.method === 'getMe' || call.method === 'deleteWebhook').length;

describe('xgw reload', () => {
  it("applies a route change to the next message while the web chat's socket and Telegram's long poll stay up; status says the file changed until then", async () => {
    await must(['start']);
    const page = await openPage();
    await say(page, 'm1', 'before');
    await waitFor(() => inboxTexts('admin').includes('before'), 'the first message at admin');
    const calls = startCalls();
    expect(calls).toBeGreaterThan(0);

    writeFileSync(configFile(), `${readFileSync(configFile(), 'utf8')}  - { channel: webchat:main, agent: helper }\n`);
    expect((await must(['status'])).stdout).toContain(`${configFile()} changed since xgw loaded it - apply it with: xgw reload`);
    const reload = await must(['reload', '--json']);
    expect(JSON.parse(reload.stdout) as XgwReloadResult).toMatchObject({ started: [], restarted: [], stopped: [], updated: [], routes: true, warnings: [] });
    expect((await must(['status'])).stdout).not.toContain('changed since');
    expect((await status()).routes).toEqual([
      { channel: '*', peer: '*', agent: 'admin' },
      { channel: 'webchat:main', peer: '*', agent: 'helper' },
    ]);

    await say(page, 'm2', 'after');
    await waitFor(() => inboxTexts('helper').includes('after'), 'the next message at helper');
    expect(inboxTexts('admin')).toEqual(['before']);
    expect(page.closed).toBe(false);
    expect(page.ws.readyState).toBe(WebSocket.OPEN);
    expect(startCalls()).toBe(calls); // the long poll went on: Telegram was not started again
    // Telegram's messages follow the routes too: the * route still sends them to admin.
    telegram.queueUpdate(textUpdate({ from: 42, text: 'from telegram' }));
    await waitFor(() => inboxTexts('admin').includes('from telegram'), 'the Telegram message at admin');
    page.ws.close();
  });

  it('starts a channel that xgw channel add writes, restarts one whose settings change, applies an allow list in place, and stops one removed', async () => {
    await must(['start']);
    const added = await must(['channel', 'add', 'webchat:guests', '--port', '0', '--access', 'pairing']);
    expect(added.stdout).toMatch(
      /^added channel webchat:guests to .*config\.yaml\nxgw reloaded .*: started webchat:guests\n {2}webchat:guests: running {2}http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}\n$/,
    );
    expect(statSync(configFile()).mode & 0o777).toBe(0o600);
    expect(readFileSync(configFile(), 'utf8')).toBe(`# the owner's gateway
channels:
  - { id: webchat:main, type: webchat, port: 0, access: open } # the page
  - { id: telegram:main, type: telegram, token_env: ${TOKEN_ENV}, api_root: "${telegram.apiRoot}", access: open }
  - { id: webchat:guests, type: webchat, access: pairing, port: 0 }
routes:
  - { channel: "*", peer: "*", agent: admin }
`);
    const guests = (await status()).channels.find((channel) => channel.id === 'webchat:guests')!;
    expect(guests.state).toBe('running');
    expect((await fetch(new URL('/', guests.url!))).status).toBe(200);

    // An allow list is the gateway's alone: applied without touching the channel.
    const page = await openPage();
    const calls = startCalls();
    writeFileSync(configFile(), readFileSync(configFile(), 'utf8').replace(`${telegram.apiRoot}", access: open }`, `${telegram.apiRoot}", access: open, allow: ["7"] }`));
    expect(JSON.parse((await must(['reload', '--json'])).stdout)).toMatchObject({ updated: ['telegram:main'], restarted: [], started: [], stopped: [] });
    expect(startCalls()).toBe(calls);
    // A setting the channel itself reads restarts it, and only it.
    writeFileSync(configFile(), readFileSync(configFile(), 'utf8').replace('access: open, allow: ["7"] }', 'access: open, allow: ["7"], stream: false }'));
    expect(JSON.parse((await must(['reload', '--json'])).stdout)).toMatchObject({ restarted: ['telegram:main'], updated: [] });
    await waitFor(() => startCalls() > calls, 'Telegram started again');
    expect(page.closed).toBe(false);

    const removed = await must(['channel', 'remove', 'webchat:guests']);
    expect(removed.stdout).toContain('stopped webchat:guests');
    expect((await status()).channels.map((channel) => channel.id)).toEqual(['webchat:main', 'telegram:main']);
    await expect(fetch(new URL('/', guests.url!))).rejects.toThrow(); // nothing listens there any more
    page.ws.close();
  });

  it('shows tool progress by the config in force: none once a reload turns show_tool_progress off, and in a web chat a reload added', async () => {
    await must(['start']);
    const before = await pageInConversation('webchat:main', 'before');
    expect(await before.progress('ls before')).toEqual(['ls before']);
    before.page.ws.close();

    writeFileSync(configFile(), readFileSync(configFile(), 'utf8').replace('access: open }   # the page', 'access: open, show_tool_progress: false }   # the page'));
    await must(['reload']);
    const off = await pageInConversation('webchat:main', 'off');
    expect(await off.progress('ls off')).toEqual([]);
    off.page.ws.close();

    await must(['channel', 'add', 'webchat:added', '--port', '0', '--access', 'open']);
    const added = await pageInConversation('webchat:added', 'added');
    expect(await added.progress('ls added')).toEqual(['ls added']);
    added.page.ws.close();
  });

  it('refuses a config with a problem with the message of xgw config check, and runs on with the old one', async () => {
    await must(['start']);
    const page = await openPage();
    writeConfig(`${readFileSync(configFile(), 'utf8')}  - { channel: telegram:other, agent: helper }\n`);
    const check = await xgw(['config', 'check']);
    const reload = await xgw(['reload']);
    expect(reload.code).toBe(1);
    expect(reload.stderr).toMatch(
      /^Error: invalid .*config\.yaml: routes\.1\.channel: no channel telegram:other is configured - fix the listed entries; xgw config check shows them without starting\n$/,
    );
    expect(reload.stderr).toBe(check.stderr);
    expect((await must(['status'])).stdout).toContain('changed since xgw loaded it');

    // A channel whose token variable the running xgw lacks: refused the same way, in both.
    writeConfig(
      readFileSync(configFile(), 'utf8')
        .replace('  - { channel: telegram:other, agent: helper }\n', '')
        .replace('routes:', '  - { id: telegram:second, type: telegram, token_env: RELOAD_TEST_UNSET }\nroutes:'),
    );
    const tokenReload = await xgw(['reload']);
    expect(tokenReload.code).toBe(1);
    expect(tokenReload.stderr).toContain(
      'telegram:second: RELOAD_TEST_UNSET is not set in the environment of the running xgw, so xgw cannot start it (start xgw again with RELOAD_TEST_UNSET set: export RELOAD_TEST_UNSET=<the bot token>, then theclaw down && theclaw up)',
    );
    // config check looks in the running xgw's environment too, not this shell's.
    expect((await xgw(['config', 'check'], { ...t.env, RELOAD_TEST_UNSET: 'set-here-only' })).stderr).toBe(tokenReload.stderr);

    // The old config keeps working: the channels it had, its routes.
    await say(page, 'm1', 'still here');
    await waitFor(() => inboxTexts('admin').includes('still here'), 'the message at admin');
    expect((await status()).channels.map((channel) => [channel.id, channel.state])).toEqual([
      ['webchat:main', 'running'],
      ['telegram:main', 'running'],
    ]);
    expect(page.closed).toBe(false);
    page.ws.close();
  });

  it('takes back an edit the running xgw refuses, and writes it with --no-reload', async () => {
    await must(['start']);
    const before = readFileSync(configFile(), 'utf8');
    const refused = await xgw(['channel', 'add', 'discord:team', '--token-env', 'RELOAD_TEST_UNSET']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^Error: xgw refused the change, so it was not written: invalid .*: discord:team: RELOAD_TEST_UNSET is not set in the environment of the running xgw/);
    expect(readFileSync(configFile(), 'utf8')).toBe(before);

    const written = await must(['channel', 'add', 'discord:team', '--token-env', 'RELOAD_TEST_UNSET', '--no-reload']);
    expect(written.stdout).toContain('not applied yet (--no-reload): apply it with xgw reload');
    expect(written.stdout).toContain('problem: discord:team: RELOAD_TEST_UNSET is not set in the environment of the running xgw');
    expect(readFileSync(configFile(), 'utf8')).toContain('discord:team');
    expect((await must(['status'])).stdout).toContain('changed since xgw loaded it');
    expect((await status()).channels.map((channel) => channel.id)).toEqual(['webchat:main', 'telegram:main']);
  });
});
