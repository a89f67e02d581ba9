import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { cliPath } from '../core/package.js';
import { commandRuns, createTestHome, PROVIDER_KEYS, startFakeDiscord, startFakeOpenAI, waitFor, type FakeDiscord, type FakeLlmServer, type TestHome } from '../testing/index.js';

/**
 * `theclaw setup` on a real terminal: tmux gives it a pseudo-terminal, the test types into it
 * (send-keys) and reads the screen (capture-pane), as a person would.
 */
const hasTmux = commandRuns('tmux', ['-V']);

let t: TestHome | undefined;
let llm: FakeLlmServer | undefined;
let discord: FakeDiscord | undefined;
let socket: string | undefined;
afterEach(async () => {
  if (socket) commandRuns('tmux', ['-L', socket, 'kill-server']); // ends the session's setup too, wherever the test stopped
  await llm?.close();
  await discord?.close();
  t?.cleanup();
  t = llm = discord = socket = undefined;
});

const KEY = 'sk-typed-in-the-terminal-3c8e1f';

describe('theclaw setup on a terminal', () => {
  it.skipIf(!hasTmux)('asks for the provider, the server, the hidden key and the model from its list, checks it, then connects Discord, and writes what the flags would', async () => {
    t = createTestHome();
    for (const key of [...PROVIDER_KEYS, 'OPENAI_COMPATIBLE_API_KEY', 'DISCORD_BOT_TOKEN']) delete t.env[key];
    llm = await startFakeOpenAI();
    discord = await startFakeDiscord();
    socket = `theclaw-setup-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket!, ...args], { env: t!.env, encoding: 'utf8' });
    const command = `${joinCommand([process.execPath, cliPath('theclaw'), 'setup', '--discord-api-root', discord.apiRoot])}; echo "setup exited $?"; read done`;
    tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'setup', '-x', '120', '-y', '40', command);
    const screen = () => tmux('capture-pane', '-p', '-t', 'setup');
    const when = (text: string) => waitFor(() => screen().includes(text), `"${text}" on the screen`, 20_000);
    const keys = (...names: string[]) => tmux('send-keys', '-t', 'setup', ...names);
    const type = (text: string) => tmux('send-keys', '-t', 'setup', '-l', text);

    await when('What do you want to set up?');
    keys('Down', 'Down', 'Space', 'Enter'); // the model (picked already) and Discord
    await when('Which provider should the agents use?');
    keys('Down', 'Down', 'Down', 'Down', 'Enter'); // openai-compatible
    await when("The server's URL");
    type(llm.url);
    keys('Enter');
    await when('Paste the API key');
    type(KEY);
    keys('Enter');
    await when('Which model?');
    expect(screen()).toContain('fake-model-large'); // the server's list
    keys('Enter'); // its first: fake-model
    await when('Paste the bot token');
    expect(screen()).toContain('openai-compatible/fake-model answered');
    type(discord.token);
    keys('Enter');
    await when('Now send @theclaw-test a direct message');
    expect(screen()).toContain('https://discord.com/oauth2/authorize'); // the invite
    discord.queueMessage({ from: '424242', text: 'hi' });
    await when('Run theclaw up now?');
    expect(screen()).toContain('owner discord:main:424242');
    keys('Right', 'Enter'); // no
    await when('setup exited 0');
    expect(screen()).toContain('Next: theclaw up');
    expect(screen()).not.toContain(KEY);
    expect(screen()).not.toContain(discord.token);

    expect(readFileSync(join(t.home, 'pai', 'config.yaml'), 'utf8')).toContain('default: openai-compatible/fake-model');
    expect(readFileSync(join(t.home, 'secrets.env'), 'utf8')).toContain(`OPENAI_COMPATIBLE_API_KEY=${KEY}`);
    expect(readFileSync(join(t.home, 'secrets.env'), 'utf8')).toContain(`DISCORD_BOT_TOKEN=${discord.token}`);
    const check = llm.requests.filter((request) => request.path === '/v1/chat/completions');
    expect(check).toHaveLength(1);
    expect(check[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });
});
