import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { encodedForms } from '../core/secrets.js';
import { createTestHome, runToolAlone, startFakeOpenAI, type FakeStep, type LooseJson, type RecordedRequest } from '../testing/index.js';
import { startFakeTelegram, textUpdate, type FakeTelegram } from '../testing/fake-telegram.js';
import { startSystem, telegramThread, TELEGRAM_TOKEN_ENV, until, untilAnswered, type System } from './support.js';

/**
 * Secrets (a provider key, the bot token) never reach a file under THECLAW_HOME, a record, the
 * model, or the environment of a command the model runs — not even when the model goes looking
 * for them: it runs `env`, reads the configs, and reads the environment of the process that
 * started it (/proc/$PPID/environ, which holds every secret), raw, base64- and URL-encoded.
 * Every file is scanned as bytes, SQLite databases and their WAL included (deleted rows too).
 */

/** What the model runs, one command per tool round, before it answers. */
function snoopCommands(): string[] {
  const node = JSON.stringify(process.execPath);
  return [
    'env',
    'cat "$THECLAW_HOME/pai/config.yaml" "$THECLAW_HOME/xgw/config.yaml"; tr "\\0" "\\n" < /proc/$PPID/environ',
    `base64 -w0 /proc/$PPID/environ; echo; ${node} -e 'process.stdout.write(encodeURIComponent(require("fs").readFileSync(process.argv[1], "utf8")))' /proc/$PPID/environ`,
  ];
}

/** A model that snoops (see snoopCommands) on every message, then answers `done: <text>`. */
function snoopingModel(commands: string[]): FakeStep {
  return (request) => {
    const messages: LooseJson[] = request.body?.messages ?? [];
    const lastUser = messages.findLastIndex((message) => message?.role === 'user');
    const rounds = messages.slice(lastUser + 1).filter((message) => message?.role === 'tool').length;
    if (rounds < commands.length) return { kind: 'tool_call', name: 'bash_exec', arguments: { command: commands[rounds]! } };
    return { kind: 'text', text: `done: ${String(messages[lastUser]?.content ?? '').slice(0, 40)}` };
  };
}

/** Every regular file under `root` (symlinks are not followed: .bin links to the CLIs). */
function filesUnder(root: string): string[] {
  return readdirSync(root).flatMap((name) => {
    const path = join(root, name);
    const stat = lstatSync(path);
    if (stat.isDirectory()) return filesUnder(path);
    return stat.isFile() ? [path] : [];
  });
}

/** `where: form` for every file (or text) holding a secret in any of its forms. */
function findSecrets(secrets: Record<string, string>, places: [string, Buffer | string][]): string[] {
  const found: string[] = [];
  for (const [where, data] of places) {
    const buffer = Buffer.isBuffer(data) ? data : Buffer.from(data);
    for (const [name, secret] of Object.entries(secrets)) {
      for (const form of encodedForms(secret)) if (buffer.includes(form)) found.push(`${where}: ${name} (${form === secret ? 'raw' : `as ${form}`})`);
    }
  }
  return found;
}

/**
 * What the model was told each command printed, whole (a toolcall record keeps only the first
 * 4,000 characters, and where a line falls in it depends on the size of the test's environment),
 * from the request that carried the most tool results.
 */
function toolOutputsSent(requests: RecordedRequest[]): string[] {
  const sent = requests.map((request): string[] =>
    ((request.body?.messages ?? []) as LooseJson[]).filter((message) => message?.role === 'tool').map((message) => (JSON.parse(String(message.content)) as { stdout: string }).stdout),
  );
  return sent.reduce((most, outputs) => (outputs.length > most.length ? outputs : most), []);
}

function requestBodies(requests: RecordedRequest[]): [string, string][] {
  return requests.map((request, index) => [`model request ${index + 1}`, JSON.stringify(request.body)]);
}

let system: System | undefined;
let revived: FakeTelegram | undefined;
let cleanups: (() => unknown)[] = [];

afterEach(async () => {
  await system?.stop();
  await revived?.close();
  for (const cleanup of cleanups) await cleanup();
  system = undefined;
  revived = undefined;
  cleanups = [];
});

describe('secrets', () => {
  it('never reach THECLAW_HOME, the records, the model or bash_exec, while the model hunts for them through the whole pipeline', async () => {
    const apiKey = `sk-test-SECRET-${randomBytes(16).toString('hex')}`;
    const commands = snoopCommands();
    const s = await startSystem({
      llm: { apiKey, defaultStep: snoopingModel(commands) },
      apiKeyEnv: 'OPENAI_API_KEY',
      env: { OPENAI_API_KEY: apiKey },
    });
    system = s;
    const secrets = { OPENAI_API_KEY: apiKey, [TELEGRAM_TOKEN_ENV]: s.telegram.token };

    // Telegram goes away and comes back: grammY's network errors name the URL, which holds the token.
    const { port } = new URL(s.telegram.apiRoot);
    await s.telegram.close();
    await until(() => readFileSync(join(s.home, 'logs', 'xgw.log'), 'utf8').includes('polling failed'), 'a failed poll in the xgw log');
    revived = await startFakeTelegram({ token: s.telegram.token, port: Number(port) });
    revived.queueUpdate(textUpdate({ from: 111, text: 'first' }));
    revived.queueUpdate(textUpdate({ from: 111, text: 'second' }));
    await s.must('agent', ['send', 'admin', '--text', 'from the terminal']);
    await until(() => revived!.sent.length >= 2, 'the two Telegram replies', 30_000);
    await untilAnswered(s);

    // The model was really called with the key, and ran every command for every message.
    expect(s.llm.requests.every((request) => request.headers.authorization === `Bearer ${apiKey}`)).toBe(true);
    const toolcalls = s
      .events(telegramThread(s.home, 111))
      .filter((event) => event.subtype === 'toolcall')
      .map((event) => JSON.parse(event.content) as { command: string; output: string });
    expect(toolcalls.map((call) => call.command)).toEqual([...commands, ...commands]);
    expect(revived.sent.map((sent) => sent.text)).toEqual(['done: first', 'done: second']);

    // bash_exec's environment has neither secret, by value or by name; the rest of it is there.
    const env = toolcalls[0]!.output;
    expect(env).toContain(`THECLAW_HOME=${s.home}`);
    expect(env).not.toMatch(/^(OPENAI_API_KEY|E2E_TELEGRAM_TOKEN)=/m);
    // In the sandbox (admin's default profile) the configs are hidden and the parent is the
    // sandbox's init, whose environment is as clean: not even the names are there to redact.
    expect(toolcalls[1]!.output).not.toMatch(/OPENAI_API_KEY|E2E_TELEGRAM_TOKEN|api_key_env|token_env/);
    expect(toolcalls[1]!.output).toContain(`THECLAW_HOME=${s.home}`);

    const places: [string, Buffer | string][] = [
      ...filesUnder(s.home).map((file): [string, Buffer] => [file.slice(s.home.length + 1), readFileSync(file)]),
      ...requestBodies(s.llm.requests),
      ...revived.sent.map((sent, index): [string, string] => [`Telegram message ${index + 1}`, sent.text]),
    ];
    expect(places.length).toBeGreaterThan(40);
    expect(findSecrets(secrets, places)).toEqual([]);
    // The log did see the failure it was provoked into (and wrote it without the token).
    expect(readFileSync(join(s.home, 'logs', 'xgw.log'), 'utf8')).toMatch(/polling failed: .*\/bot\[redacted\]\/getUpdates/);
  });

  it('keep a bot token and a key in variables not named like secrets (token_env, api_key_env) out of everything, provider errors quoting the key included', async () => {
    const apiKey = `plain-SECRET-${randomBytes(16).toString('hex')}`;
    const commands = snoopCommands();
    // `none`: the commands read the configs and the daemon's environment, where the secrets are;
    // what they print must be redacted (the first test shows the sandbox hides them instead).
    const s = await startSystem({
      llm: { apiKey, defaultStep: snoopingModel(commands) },
      apiKeyEnv: 'MODEL_CREDENTIAL',
      telegramTokenEnv: 'TG_BOT',
      env: { MODEL_CREDENTIAL: apiKey },
      sandbox: 'none',
    });
    system = s;
    const secrets = { MODEL_CREDENTIAL: apiKey, TG_BOT: s.telegram.token };
    s.telegram.queueUpdate(textUpdate({ from: 111, text: 'first' }));
    await until(() => s.telegram.sent.length >= 1, 'the first reply', 30_000);
    // The provider refuses the next call and quotes the key, as some do.
    s.llm.enqueue({ kind: 'error', status: 401, message: `Incorrect API key provided: ${apiKey}` });
    s.telegram.queueUpdate(textUpdate({ from: 111, text: 'second' }));
    await until(() => s.telegram.sent.length >= 2, 'the error notice', 30_000);
    await untilAnswered(s);

    const toolcalls = s
      .events(telegramThread(s.home, 111))
      .filter((event) => event.subtype === 'toolcall')
      .map((event) => JSON.parse(event.content) as { command: string; output: string });
    expect(toolcalls.map((call) => call.command)).toEqual(commands);
    const outputs = toolOutputsSent(s.llm.requests);
    expect(outputs).toHaveLength(commands.length);
    expect(outputs[0]).toContain(`THECLAW_HOME=${s.home}`);
    expect(outputs[0]).not.toMatch(/^(MODEL_CREDENTIAL|TG_BOT)=/m);
    expect(outputs[1]).toContain('TG_BOT=[redacted]');
    expect(outputs[1]).toContain('MODEL_CREDENTIAL=[redacted]');
    const agentLog = readFileSync(join(s.home, 'agents', 'admin', 'logs', 'agent.log'), 'utf8');
    expect(agentLog).toContain('Incorrect API key provided: [redacted]'); // the error was logged, without the key

    const places: [string, Buffer | string][] = [
      ...filesUnder(s.home).map((file): [string, Buffer] => [file.slice(s.home.length + 1), readFileSync(file)]),
      ...requestBodies(s.llm.requests),
      ...s.telegram.sent.map((sent, index): [string, string] => [`Telegram message ${index + 1}`, sent.text]),
    ];
    expect(findSecrets(secrets, places)).toEqual([]);
  });

  it('pai chat keeps a key from a custom api_key_env out of bash_exec, its session and the model', async () => {
    const key = `custom-SECRET-${randomBytes(16).toString('hex')}`;
    const llm = await startFakeOpenAI({ apiKey: key, defaultStep: snoopingModel(snoopCommands().slice(1)) });
    const t = createTestHome();
    cleanups.push(() => llm.close(), t.cleanup);
    mkdirSync(join(t.home, 'pai'));
    writeFileSync(
      join(t.home, 'pai', 'config.yaml'),
      `default: local/m1\nproviders:\n  local:\n    api: openai-completions\n    base_url: "${llm.url}"\n    api_key_env: MODEL_CREDENTIAL\n    models: [{ id: m1 }]\n`,
    );
    const session = join(t.home, 'session.jsonl');
    // Its own process: the model reads the environ of bash_exec's parent, which a warm runner's is not.
    const result = await runToolAlone('pai', ['chat', '--json', '--session', session, 'look around'], { ...t.env, MODEL_CREDENTIAL: key });

    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('done: look around\n');
    expect(readFileSync(session, 'utf8')).toContain('MODEL_CREDENTIAL=[redacted]');
    const places: [string, Buffer | string][] = [
      ['stdout', result.stdout],
      ['stderr (events)', result.stderr],
      ...filesUnder(t.home).map((file): [string, Buffer] => [file, readFileSync(file)]),
      ...requestBodies(llm.requests),
    ];
    expect(findSecrets({ MODEL_CREDENTIAL: key }, places)).toEqual([]);
  });

  it('encodedForms covers a secret wherever it sits in base64 or base64url text', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 20 }), fc.string({ minLength: 8, maxLength: 40 }), fc.uint8Array({ maxLength: 20 }), (before, secret, after) => {
        const data = Buffer.concat([before, Buffer.from(secret), after]);
        const forms = encodedForms(secret);
        expect(forms).toContain(secret);
        expect(forms.some((form) => data.toString('base64').includes(form))).toBe(true);
        expect(forms.some((form) => data.toString('base64url').includes(form))).toBe(true);
        expect(forms).toContain(encodeURIComponent(secret));
      }),
    );
  });
});
