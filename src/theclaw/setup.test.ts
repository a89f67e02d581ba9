import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliPath } from '../core/package.js';
import {
  createTestHome,
  PROVIDER_KEYS,
  runTool,
  startFakeDiscord,
  startFakeOpenAI,
  startFakeTelegram,
  waitFor,
  webchatOnFreePort,
  type FakeDiscord,
  type FakeLlmServer,
  type FakeTelegram,
  type TestHome,
} from '../testing/index.js';
import { textUpdate } from '../testing/fake-telegram.js';

let t: TestHome | undefined;
let llm: FakeLlmServer | undefined;
let telegram: FakeTelegram | undefined;
let discord: FakeDiscord | undefined;
afterEach(async () => {
  if (t) await runTool('theclaw', ['down'], t.env);
  await llm?.close();
  await telegram?.close();
  await discord?.close();
  t?.cleanup();
  t = llm = telegram = discord = undefined;
});

const KEY = 'sk-setup-test-7d1e9b4a0c';

/** Every file under the home whose text holds `secret`, relative to it. */
function filesHolding(home: string, secret: string): string[] {
  return readdirSync(home, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((file) => contents(file)?.includes(secret))
    .map((file) => file.slice(home.length + 1));
}

/** A file's bytes, or undefined when it went away since it was listed (a run's lock as the run ends). */
function contents(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function homeWithoutKeys(): TestHome {
  const home = createTestHome();
  for (const key of [...PROVIDER_KEYS, 'OPENAI_COMPATIBLE_API_KEY', 'TELEGRAM_BOT_TOKEN', 'DISCORD_BOT_TOKEN']) delete home.env[key];
  return home;
}

/** `theclaw setup` with `args`, `input` on its stdin, while the test plays the person (its output read as it comes). */
function startSetup(args: string[], input: string) {
  const child = spawn(process.execPath, [cliPath('theclaw'), 'setup', ...args], { env: t!.env });
  const output = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output.stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output.stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  child.stdin.end(input);
  return { output, exited };
}

/** `theclaw setup --<app>-token-stdin` with `<app>:main` configured already: only the token changes, and nobody is waited for. */
async function expectOnlyTokenReplaced(app: 'telegram' | 'discord', apiRoot: string, token: string): Promise<void> {
  expect((await runTool('xgw', ['channel', 'add', `${app}:main`, '--api-root', apiRoot], t!.env)).code).toBe(0);
  const xgw = readFileSync(join(t!.home, 'xgw', 'config.yaml'), 'utf8');
  const result = await runTool('theclaw', ['setup', `--${app}-token-stdin`, `--${app}-api-root`, apiRoot, `--${app}-wait-seconds`, '1'], t!.env, token);
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout).toContain(`${app}:main was configured already: only its token changed`);
  expect(result.stderr).not.toContain('Now send');
  expect(readFileSync(join(t!.home, 'xgw', 'config.yaml'), 'utf8')).toBe(xgw);
  expect(readFileSync(join(t!.home, 'secrets.env'), 'utf8')).toContain(`${app.toUpperCase()}_BOT_TOKEN=${token}`);
}

const chatCalls = (server: FakeLlmServer) => server.requests.filter((request) => request.path === '/v1/chat/completions');

describe('theclaw setup --provider', () => {
  it('lists the models, checks the key with one tiny call, and writes the default model to pai config and the key to secrets.env (0600) only', async () => {
    t = homeWithoutKeys();
    llm = await startFakeOpenAI();
    const result = await runTool('theclaw', ['setup', '--provider', 'openai-compatible', '--base-url', llm.url, '--api-key-stdin', '--json'], t.env, `${KEY}\n`);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).model).toMatchObject({ provider: 'openai-compatible', model: 'fake-model', key: 'stored' });
    expect(llm.requests.some((request) => request.method === 'GET' && request.path === '/v1/models')).toBe(true);
    expect(chatCalls(llm)).toHaveLength(1);
    expect(chatCalls(llm)[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    const config = readFileSync(join(t.home, 'pai', 'config.yaml'), 'utf8');
    expect(config).toContain('default: openai-compatible/fake-model');
    expect(config).toContain('api_key_env: OPENAI_COMPATIBLE_API_KEY');
    expect(statSync(join(t.home, 'secrets.env')).mode & 0o777).toBe(0o600);
    expect(filesHolding(t.home, KEY)).toEqual(['secrets.env']);
    expect(result.stdout + result.stderr).not.toContain(KEY);
  });

  it('run again with only --model, it changes the model and keeps the stored key and the server', async () => {
    t = homeWithoutKeys();
    llm = await startFakeOpenAI();
    expect((await runTool('theclaw', ['setup', '--provider', 'openai-compatible', '--base-url', llm.url, '--model', 'fake-model', '--api-key-stdin'], t.env, KEY)).code).toBe(0);
    const secrets = readFileSync(join(t.home, 'secrets.env'), 'utf8');
    const again = await runTool('theclaw', ['setup', '--provider', 'openai-compatible', '--model', 'fake-model-large'], t.env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('openai-compatible/fake-model-large answered');
    expect(chatCalls(llm).at(-1)!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(chatCalls(llm).at(-1)!.body.model).toBe('fake-model-large');
    const config = readFileSync(join(t.home, 'pai', 'config.yaml'), 'utf8');
    expect(config).toContain('default: openai-compatible/fake-model-large');
    expect(config).toContain(llm.url);
    expect(readFileSync(join(t.home, 'secrets.env'), 'utf8')).toBe(secrets);
  });

  it('a key the provider refuses changes nothing, and the error does not show it', async () => {
    t = homeWithoutKeys();
    llm = await startFakeOpenAI();
    llm.enqueue({ kind: 'error', status: 401, message: 'Incorrect API key provided' });
    const result = await runTool('theclaw', ['setup', '--provider', 'openai-compatible', '--base-url', llm.url, '--model', 'fake-model', '--api-key-stdin'], t.env, KEY);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Error: openai-compatible\/fake-model did not answer the check, so nothing was changed: .* - check the key/m);
    expect(result.stderr).not.toContain(KEY);
    expect(filesHolding(t.home, KEY)).toEqual([]);
    expect(readdirSync(t.home)).not.toContain('secrets.env');
  });

  it('says what is missing: a provider that needs a key, an unknown provider, nothing to do', async () => {
    t = homeWithoutKeys();
    const noKey = await runTool('theclaw', ['setup', '--provider', 'openai', '--yes'], t.env);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('Error: openai needs an API key - pass it on stdin with --api-key-stdin');
    expect((await runTool('theclaw', ['setup', '--provider', 'gemini'], t.env)).stderr).toContain(
      'Error: unknown provider "gemini" - use one of: openai, anthropic, openrouter, ollama, openai-compatible, mock',
    );
    expect((await runTool('theclaw', ['setup'], t.env)).stderr).toContain('Error: nothing to set up - pass --provider');
  });

  it('after setup, theclaw up gives the agents the key: their model calls carry it, and neither a process list nor a command an agent runs shows it', async () => {
    t = homeWithoutKeys();
    llm = await startFakeOpenAI();
    expect((await runTool('theclaw', ['setup', '--provider', 'openai-compatible', '--base-url', llm.url, '--model', 'fake-model', '--api-key-stdin'], t.env, KEY)).code).toBe(0);
    llm.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo ENV-START; env; cat "$THECLAW_HOME/secrets.env"; cat /proc/$PPID/environ' } }, { kind: 'text', text: 'done' });
    webchatOnFreePort(t.home);
    const up = await runTool('theclaw', ['up'], t.env);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toContain('model     openai-compatible/fake-model');
    expect((await runTool('agent', ['send', 'admin', '--text', 'show me your environment'], t.env)).code).toBe(0);
    const toolResult = await waitFor(() => chatCalls(llm!).find((request) => JSON.stringify(request.body).includes('ENV-START')), 'the command output reaching the model', 60_000);
    expect(toolResult.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(JSON.stringify(toolResult.body)).toContain('PATH=');
    expect(JSON.stringify(toolResult.body)).not.toContain(KEY);
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(KEY);
    expect(filesHolding(t.home, KEY)).toEqual(['secrets.env']);
  });
});

describe('theclaw setup --telegram-token-stdin', () => {
  it('checks the token with getMe, makes the first person to message the bot its owner, routes the channel to admin, and keeps the token in secrets.env only', async () => {
    t = homeWithoutKeys();
    telegram = await startFakeTelegram();
    const { output, exited } = startSetup(['--telegram-token-stdin', '--telegram-api-root', telegram.apiRoot, '--telegram-wait-seconds', '30'], `${telegram.token}\n`);
    await waitFor(() => output.stderr.includes('Now send /start to @theclaw_test_bot'), 'the prompt to message the bot');
    expect(telegram.calls.map((call) => call.method)).toContain('getMe');
    telegram.queueUpdate(textUpdate({ from: 424242, text: '/start' }));
    expect(await exited, output.stderr).toBe(0);
    expect(output.stdout).toContain('owner telegram:main:424242');
    expect(readFileSync(join(t.home, 'agents', 'admin', 'config.yaml'), 'utf8')).toMatch(/owners:\s*\n\s*- telegram:main:424242/);
    const xgw = readFileSync(join(t.home, 'xgw', 'config.yaml'), 'utf8');
    expect(xgw).toMatch(/id: telegram:main, type: telegram, access: allowlist, allow: \[ "?424242"? \]/);
    expect(xgw).toMatch(/\{ channel: telegram:main, peer: "\*", agent: admin \}/);
    expect(telegram.sent.at(-1)).toMatchObject({ chat_id: 424242, text: expect.stringContaining('owner') });
    expect(filesHolding(t.home, telegram.token)).toEqual(['secrets.env']);
    expect(output.stdout + output.stderr).not.toContain(telegram.token);
  });

  it('run again with the channel configured, a new token replaces the old one and nothing else changes, with no wait', async () => {
    t = homeWithoutKeys();
    telegram = await startFakeTelegram();
    await expectOnlyTokenReplaced('telegram', telegram.apiRoot, telegram.token);
  });

  it('a token Telegram refuses is said so, and nothing is written', async () => {
    t = homeWithoutKeys();
    telegram = await startFakeTelegram();
    const result = await runTool('theclaw', ['setup', '--telegram-token-stdin', '--telegram-api-root', telegram.apiRoot], t.env, '123:wrong-token-value\n');
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('Error: Telegram refused the token (getMe: HTTP 401) - copy the token BotFather gave again');
    expect(result.stderr).not.toContain('wrong-token-value');
    expect(readdirSync(t.home)).not.toContain('secrets.env');
  });
});

describe('theclaw setup --discord-token-stdin', () => {
  it('checks the token with GET /users/@me, makes the first person to write to the bot directly its owner, routes the channel to admin, keeps the token in secrets.env only, and theclaw up then answers the owner on Discord', async () => {
    t = homeWithoutKeys();
    discord = await startFakeDiscord();
    const { output, exited } = startSetup(['--discord-token-stdin', '--discord-api-root', discord.apiRoot, '--discord-wait-seconds', '30'], `${discord.token}\n`);
    await waitFor(() => output.stderr.includes('Now send @theclaw-test a direct message in Discord'), 'the prompt to message the bot');
    expect(output.stderr).toContain(`https://discord.com/oauth2/authorize?client_id=${discord.bot.id}&scope=bot&permissions=`);
    expect(discord.calls).toContainEqual({ method: 'GET', route: '/users/@me', body: {} });
    discord.queueMessage({ from: '555', guild: '777', text: 'hello all' }); // in a server: not a direct message
    discord.queueMessage({ from: '666', text: 'beep', bot: true });
    discord.queueMessage({ from: '424242', text: 'hi' });
    expect(await exited, output.stderr).toBe(0);
    expect(output.stdout).toContain('owner discord:main:424242');
    expect(readFileSync(join(t.home, 'agents', 'admin', 'config.yaml'), 'utf8')).toMatch(/owners:\s*\n\s*- discord:main:424242/);
    const xgw = readFileSync(join(t.home, 'xgw', 'config.yaml'), 'utf8');
    expect(xgw).toMatch(/id: discord:main, type: discord, access: allowlist, allow: \[ "?424242"? \]/);
    expect(xgw).toMatch(/\{ channel: discord:main, peer: "\*", agent: admin \}/);
    expect(discord.sent.at(-1)).toMatchObject({ channel_id: discord.dmChannel('424242'), content: expect.stringContaining('owner') });
    expect(filesHolding(t.home, discord.token)).toEqual(['secrets.env']);
    expect(output.stdout + output.stderr).not.toContain(discord.token);

    // The token reaches xgw from secrets.env alone, and the owner is admitted.
    webchatOnFreePort(t.home);
    const up = await runTool('theclaw', ['up'], t.env);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stderr).not.toContain('discord:main is not running');
    const greeted = discord.sent.length;
    discord.queueMessage({ from: '424242', text: 'are you there?' });
    await waitFor(() => discord!.sent.length > greeted, "admin's answer on Discord", 60_000);
    expect(discord.sent.at(-1)!.channel_id).toBe(discord.dmChannel('424242'));
  });

  it('run again with the channel configured, a new token replaces the old one and nothing else changes, with no wait', async () => {
    t = homeWithoutKeys();
    discord = await startFakeDiscord();
    await expectOnlyTokenReplaced('discord', discord.apiRoot, discord.token);
  });

  it('a token Discord refuses, or a bot whose Message Content intent is off, is said so with the fix, and nothing is written', async () => {
    t = homeWithoutKeys();
    discord = await startFakeDiscord({ refuseMessageContent: true });
    const wrong = await runTool('theclaw', ['setup', '--discord-token-stdin', '--discord-api-root', discord.apiRoot], t.env, 'wrong.token-value\n');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('Error: Discord refused the token (GET /users/@me: HTTP 401) - copy the token from the Discord developer portal again');
    expect(wrong.stderr).not.toContain('wrong.token-value');
    const intents = await runTool('theclaw', ['setup', '--discord-token-stdin', '--discord-api-root', discord.apiRoot, '--discord-wait-seconds', '30'], t.env, discord.token);
    expect(intents.code).toBe(1);
    expect(intents.stderr).toContain('Error: Discord refused the gateway intents (close 4014): the bot may not read message content - enable "Message Content Intent"');
    expect(readdirSync(t.home)).not.toContain('secrets.env');
    expect(readdirSync(t.home)).not.toContain('xgw');
  });
});
