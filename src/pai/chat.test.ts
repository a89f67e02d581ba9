import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectSessionValid, createTestHome, startFakeAnthropic, startFakeOpenAI, waitFor, type FakeLlmOptions, type FakeLlmServer, type LooseJson, type TestHome } from '../testing/index.js';
import { isAlive } from '../core/process.js';
import { chat, DEFAULT_SYSTEM_PROMPT } from './chat.js';
import { ModelCallError } from './model-error.js';
import { readSession } from './session.js';
import type { ChatEvent } from './types.js';

// The library `chat()` against loopback servers speaking the real OpenAI and Anthropic wire
// protocols, through pi-ai and the provider SDKs; bash_exec runs real commands.

let t: TestHome;
const servers: FakeLlmServer[] = [];

beforeEach(() => {
  t = createTestHome();
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  t.cleanup();
});

async function fakeOpenAI(options?: FakeLlmOptions): Promise<FakeLlmServer> {
  const server = await startFakeOpenAI(options);
  servers.push(server);
  return server;
}

async function fakeAnthropic(options?: FakeLlmOptions): Promise<FakeLlmServer> {
  const server = await startFakeAnthropic(options);
  servers.push(server);
  return server;
}

/** `$THECLAW_HOME/pai/config.yaml` pointing `fake/m1` at the server. */
function writeConfig(server: FakeLlmServer, { api = 'openai-completions', fakeExtra = '', otherProviders = [] as string[] } = {}): void {
  mkdirSync(join(t.home, 'pai'), { recursive: true });
  writeFileSync(
    join(t.home, 'pai', 'config.yaml'),
    [
      'default: fake/m1',
      'providers:',
      ...otherProviders,
      `  fake: { api: ${api}, base_url: "${server.url}", models: [{ id: m1 }]${fakeExtra} }`,
      'retry: { max_attempts: 3, initial_delay_ms: 20 }',
      'timeout_seconds: 1',
    ].join('\n'),
  );
}

/** No keys from the developer's shell: only what bash needs. */
const baseEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, THECLAW_HOME: t.home });

function collect(): { events: ChatEvent[]; onEvent: (event: ChatEvent) => void; of: <T extends ChatEvent['type']>(type: T) => Extract<ChatEvent, { type: T }>[] } {
  const events: ChatEvent[] = [];
  return {
    events,
    onEvent: (event) => events.push(event),
    of: (type) => events.filter((event) => event.type === type) as never,
  };
}

async function failure(promise: Promise<unknown>): Promise<ModelCallError> {
  const error = await promise.then(
    () => expect.fail('expected the turn to fail'),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ModelCallError);
  return error as ModelCallError;
}

const markerCall = { kind: 'tool_call' as const, name: 'bash_exec', arguments: { command: 'echo marker-$((6*7))' } };

/** Every assistant tool call in an OpenAI request is answered by a `tool` message before the next turn. */
function expectToolCallsAnswered(messages: LooseJson[]): void {
  messages.forEach((message, index) => {
    for (const call of message.tool_calls ?? []) {
      const rest = messages.slice(index + 1);
      const end = rest.findIndex((m) => m.role !== 'tool');
      const answers = (end === -1 ? rest : rest.slice(0, end)).map((m) => m.tool_call_id);
      expect(answers, `tool call ${call.id} has a result`).toContain(call.id);
    }
  });
}

describe('chat() against the fake OpenAI server', () => {
  it('runs a two-round bash_exec loop on top of an earlier session and sends system, history, tool result and schema', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const session = join(t.home, 'sessions', 'ada.jsonl');

    // A previous run wrote the first exchange.
    server.enqueue({ kind: 'text', text: 'Nice to meet you, Ada.' });
    const first = await chat({ input: 'My name is Ada.', sessionFile: session, home: t.home, env: baseEnv() });
    expect(first.text).toBe('Nice to meet you, Ada.');

    server.enqueue({ ...markerCall, usage: { input: 100, output: 7 } }, { kind: 'text', text: 'The marker is marker-42.', usage: { input: 200, output: 5 } });
    const { onEvent, of } = collect();
    const result = await chat({ input: 'Run the marker command.', sessionFile: session, home: t.home, env: baseEnv(), onEvent });

    expect(result.text).toBe('The marker is marker-42.');
    expect(result.toolRounds).toBe(1);
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0]!.result).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });
    expect(result.usage).toMatchObject({ input: 300, output: 12 });
    expect(of('usage').map((event) => event.usage.input)).toEqual([100, 200]);
    expect(of('done')).toEqual([
      expect.objectContaining({ text: 'The marker is marker-42.', tool_rounds: 1, stopped_at_max_turns: false, usage: expect.objectContaining({ input: 300, output: 12 }) }),
    ]);

    expect(server.requests).toHaveLength(3);
    const body = server.requests[2]!.body;
    expect(body.model).toBe('m1');
    const messages: LooseJson[] = body.messages;
    expect(messages[0]).toEqual({ role: 'system', content: DEFAULT_SYSTEM_PROMPT });
    expect(messages.slice(1, 4)).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      expect.objectContaining({ role: 'assistant', content: 'Nice to meet you, Ada.' }),
      { role: 'user', content: 'Run the marker command.' },
    ]);
    const call = messages[4];
    expect(call.role).toBe('assistant');
    expect(call.tool_calls).toHaveLength(1);
    expect(call.tool_calls[0].function.name).toBe('bash_exec');
    expect(JSON.parse(call.tool_calls[0].function.arguments)).toEqual({ command: 'echo marker-$((6*7))' });
    const tool = messages[5];
    expect(tool.role).toBe('tool');
    expect(tool.tool_call_id).toBe(call.tool_calls[0].id);
    expect(JSON.parse(tool.content)).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });
    expect(messages).toHaveLength(6);
    expect(body.tools).toHaveLength(1);
    expect(body.tools[0].function).toMatchObject({ name: 'bash_exec', parameters: { type: 'object', required: ['command'] } });
    expect(Object.keys(body.tools[0].function.parameters.properties)).toEqual(['command', 'comment', 'cwd', 'timeout_seconds']);

    // The session holds both turns, message by message.
    expect(readSession(session).map((line) => line.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
  });

  it('uses a system line stored in the session when no system prompt is given', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    writeFileSync(session, JSON.stringify({ role: 'system', content: 'You are TestBot.' }) + '\n');
    await chat({ input: 'hello', sessionFile: session, home: t.home, env: baseEnv(), tools: false });
    const body = server.requests[0]!.body;
    expect(body.messages[0]).toEqual({ role: 'system', content: 'You are TestBot.' });
    expect(body.tools ?? []).toEqual([]);
  });

  it('gives the tool an environment without secret values, including every configured provider key variable', async () => {
    const secrets = {
      OPENAI_API_KEY: 'sk-openai-secret-0001',
      TELEGRAM_BOT_TOKEN: '123456:telegram-secret-0002',
      FAKE_LLM_CREDENTIAL: 'fake-credential-secret-0003',
      OTHER_LLM_CREDENTIAL: 'other-credential-secret-0004',
      SECOND_LLM_CREDENTIAL: 'second-credential-secret-0005',
    };
    // The fake server only answers the key from the provider's api_key_env.
    const server = await fakeOpenAI({ apiKey: secrets.FAKE_LLM_CREDENTIAL });
    // A second configured provider with its own key variables (not the one in use).
    writeConfig(server, {
      fakeExtra: ', api_key_env: FAKE_LLM_CREDENTIAL',
      otherProviders: ['  other: { api: openai-completions, base_url: "http://127.0.0.1:9/v1", api_key_envs: [OTHER_LLM_CREDENTIAL, SECOND_LLM_CREDENTIAL], models: [{ id: o1 }] }'],
    });
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'env' } }, { kind: 'text', text: 'seen' });
    const result = await chat({ input: 'show env', home: t.home, env: { ...baseEnv(), ...secrets, VISIBLE_SETTING: 'plain-value' } });

    expect(result.text).toBe('seen');
    const toolEnv = result.toolCalls[0]!.result.stdout;
    expect(toolEnv).toContain('VISIBLE_SETTING=plain-value');
    const names = toolEnv.split('\n').map((line) => line.split('=')[0]!);
    expect(names.filter((name) => /(_API_KEY|_TOKEN)$/.test(name))).toEqual([]);
    for (const [name, value] of Object.entries(secrets)) {
      expect(toolEnv, name).not.toContain(value);
      expect(JSON.stringify(server.requests[1]!.body), name).not.toContain(value);
    }
  });

  it('runs at most max_tool_calls_per_round commands of one answer, in both wire protocols; the rest get exit 125 and why', async () => {
    for (const api of ['openai-completions', 'anthropic-messages']) {
      const server = api === 'openai-completions' ? await fakeOpenAI() : await fakeAnthropic();
      writeConfig(server, { api });
      const config = join(t.home, 'pai', 'config.yaml');
      writeFileSync(config, `${readFileSync(config, 'utf8')}\nmax_tool_calls_per_round: 2\n`);
      const marks = join(t.home, `marks-${api}`);
      const calls = [1, 2, 3, 4].map((n) => ({ name: 'bash_exec', arguments: { command: `echo ${n} >> ${marks}` } }));
      server.enqueue({ kind: 'tool_calls', calls }, { kind: 'text', text: 'done' });
      const session = join(t.home, `cap-${api}.jsonl`);
      const result = await chat({ input: 'four at once', sessionFile: session, home: t.home, env: baseEnv() });
      expect(result.text, api).toBe('done');
      expect(readFileSync(marks, 'utf8'), api).toBe('1\n2\n');
      expect(
        result.toolCalls.map((call) => call.result.exit_code),
        api,
      ).toEqual([0, 0, 125, 125]);
      expect(result.toolCalls[2]!.result.stderr, api).toMatch(/^not run: at most 2 commands run per answer \(max_tool_calls_per_round\)/);
      expectSessionValid(readSession(session));
    }
  });

  it('ends the turn at maxTurns with a note, keeps the session valid, and the next turn works', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo again' } } });
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    const { onEvent, of } = collect();
    const result = await chat({ input: 'loop forever', sessionFile: session, home: t.home, env: baseEnv(), maxTurns: 2, onEvent });

    expect(result.stoppedAtMaxTurns).toBe(true);
    expect(result.toolRounds).toBe(2);
    expect(result.text).toMatch(/--max-turns 2/);
    expect(of('tool_result')).toHaveLength(2);
    expect(of('done')).toEqual([expect.objectContaining({ stopped_at_max_turns: true, tool_rounds: 2, text: result.text })]);
    expect(server.requests).toHaveLength(3);
    const lines = readSession(session);
    expectSessionValid(lines);
    expect(lines.at(-1)).toMatchObject({ role: 'assistant', content: result.text });

    server.enqueue({ kind: 'text', text: 'continuing fine' });
    const next = await chat({ input: 'ok, stop', sessionFile: session, home: t.home, env: baseEnv() });
    expect(next.text).toBe('continuing fine');
    expectToolCallsAnswered(server.requests[3]!.body.messages);
    expectSessionValid(readSession(session));
  });
});

describe('chat() retries by error class', () => {
  it('waits for Retry-After on 429, then answers', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    let firstAt = 0;
    let secondAt = 0;
    server.enqueue(
      () => {
        firstAt = Date.now();
        return { kind: 'error', status: 429, retryAfterSeconds: 0.3 };
      },
      () => {
        secondAt = Date.now();
        return { kind: 'text', text: 'after the wait' };
      },
    );
    const { onEvent, of } = collect();
    const result = await chat({ input: 'hi', home: t.home, env: baseEnv(), onEvent });

    expect(result.text).toBe('after the wait');
    expect(server.requests).toHaveLength(2);
    const retries = of('retry');
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ attempt: 1, error: 'rate_limit', status: 429 });
    expect(retries[0]!.delay_ms).toBeGreaterThanOrEqual(280);
    expect(retries[0]!.delay_ms).toBeLessThanOrEqual(320);
    expect(secondAt - firstAt).toBeGreaterThanOrEqual(295);
  });

  it('retries a 500, then answers', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    server.enqueue({ kind: 'error', status: 500 }, { kind: 'text', text: 'recovered' });
    const { onEvent, of } = collect();
    const result = await chat({ input: 'hi', home: t.home, env: baseEnv(), onEvent });
    expect(result.text).toBe('recovered');
    expect(server.requests).toHaveLength(2);
    expect(of('retry')).toEqual([expect.objectContaining({ error: 'server', status: 500 })]);
  });

  it('retries a reset connection as a network error, then answers', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    server.enqueue({ kind: 'reset' }, { kind: 'text', text: 'reconnected' });
    const { onEvent, of } = collect();
    const result = await chat({ input: 'hi', home: t.home, env: baseEnv(), onEvent });
    expect(result.text).toBe('reconnected');
    expect(server.requests).toHaveLength(2);
    expect(of('retry')).toEqual([expect.objectContaining({ error: 'network', status: null })]);
  });

  it('times out a hanging server, retries, and fails with a timeout after max_attempts without writing an assistant line', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'hang' } });
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    const { onEvent, of } = collect();
    const started = Date.now();
    const error = await failure(chat({ input: 'are you there?', sessionFile: session, home: t.home, env: baseEnv(), onEvent }));
    const elapsed = Date.now() - started;

    expect(error.modelError.kind).toBe('timeout');
    expect(error.message).toMatch(/timeout/);
    expect(error.message).toMatch(/after 3 attempts/);
    expect(server.requests).toHaveLength(3);
    expect(of('retry').map((event) => event.error)).toEqual(['timeout', 'timeout']);
    expect(of('error')).toEqual([expect.objectContaining({ kind: 'timeout' })]);
    expect(of('done')).toEqual([]);
    // Three 1 s idle timeouts plus short backoffs: neither instant nor the SDK's default minutes.
    expect(elapsed).toBeGreaterThanOrEqual(2_900);
    expect(elapsed).toBeLessThan(10_000);
    expect(readSession(session)).toEqual([expect.objectContaining({ role: 'user', content: 'are you there?' })]);
  });

  it('fails at once on 401 with one request, an error event and a suggestion, and the session ends with the user line', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    server.enqueue({ kind: 'text', text: 'first answer' });
    await chat({ input: 'first', sessionFile: session, home: t.home, env: baseEnv() });
    server.requests.length = 0;

    server.enqueue({ kind: 'error', status: 401 });
    const { onEvent, of } = collect();
    const error = await failure(chat({ input: 'second', sessionFile: session, home: t.home, env: baseEnv(), onEvent }));
    expect(error.modelError).toMatchObject({ kind: 'auth', status: 401, recoverable: false });
    expect(error.suggestion).toMatch(/key/);
    expect(server.requests).toHaveLength(1);
    expect(of('retry')).toEqual([]);
    expect(of('error')).toEqual([expect.objectContaining({ kind: 'auth', status: 401, suggestion: error.suggestion })]);

    const lines = readSession(session);
    expect(lines.map((line) => line.role)).toEqual(['user', 'assistant', 'user']);
    expect(lines.at(-1)).toMatchObject({ role: 'user', content: 'second' });
  });

  it('does not retry a 400', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    server.enqueue({ kind: 'error', status: 400, message: 'max_tokens is too large' });
    const { onEvent, of } = collect();
    const error = await failure(chat({ input: 'hi', home: t.home, env: baseEnv(), onEvent }));
    expect(error.modelError).toMatchObject({ kind: 'invalid_request', status: 400 });
    expect(server.requests).toHaveLength(1);
    expect(of('retry')).toEqual([]);
  });

  it('gives up on repeated 500s after max_attempts', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'error', status: 503 } });
    writeConfig(server);
    const error = await failure(chat({ input: 'hi', home: t.home, env: baseEnv() }));
    expect(error.modelError).toMatchObject({ kind: 'server', status: 503 });
    expect(error.message).toMatch(/after 3 attempts/);
    expect(server.requests).toHaveLength(3);
  });
});

describe('chat() with several keys of a provider (api_key_envs)', () => {
  const keys = { KEY_A: 'sk-key-a-secret-0001', KEY_B: 'sk-key-b-secret-0002' };
  const bearer = (request: { headers: Record<string, unknown> }) => String(request.headers.authorization ?? '');
  const keyedConfig = (server: FakeLlmServer) => writeConfig(server, { fakeExtra: ', api_key_envs: [KEY_A, KEY_B]' });
  const cooldowns = () => JSON.parse(readFileSync(join(t.home, 'pai', 'key-cooldowns.json'), 'utf8')) as Record<string, { until: number; reason: string }>;

  it('goes on with the next key when one is refused (401), names the key variable that answered, and begins with it in the next call', async () => {
    const server = await fakeOpenAI({ apiKey: keys.KEY_B });
    keyedConfig(server);
    const { onEvent, of } = collect();
    const result = await chat({ input: 'hi', home: t.home, env: { ...baseEnv(), ...keys }, onEvent });
    expect(result.text).toBe('echo: hi');
    expect(server.requests.map(bearer)).toEqual([`Bearer ${keys.KEY_A}`, `Bearer ${keys.KEY_B}`]);
    expect(of('key_rotation')).toEqual([{ type: 'key_rotation', from: 'KEY_A', to: 'KEY_B', error: 'auth', status: 401 }]);
    expect(of('retry')).toEqual([]); // not an attempt: the other key is no retry of the same request
    expect(of('usage').map((event) => event.profile)).toEqual(['KEY_B']);
    expect(JSON.stringify(of('key_rotation'))).not.toMatch(/sk-key/);
    expect(cooldowns()['fake/KEY_A']).toMatchObject({ reason: 'auth' });

    // Another process (every agent run is one) does not begin with the key set aside.
    server.requests.length = 0;
    await chat({ input: 'again', home: t.home, env: { ...baseEnv(), ...keys } });
    expect(server.requests.map(bearer)).toEqual([`Bearer ${keys.KEY_B}`]);
  });

  it('sets a rate-limited key aside for its Retry-After and answers with the next key at once, without waiting', async () => {
    const server = await fakeOpenAI({
      defaultStep: (request) => (bearer(request) === `Bearer ${keys.KEY_A}` ? { kind: 'error', status: 429, retryAfterSeconds: 30 } : { kind: 'text', text: 'from key B' }),
    });
    keyedConfig(server);
    const { onEvent, of } = collect();
    const started = Date.now();
    const result = await chat({ input: 'hi', home: t.home, env: { ...baseEnv(), ...keys }, onEvent });
    expect(result.text).toBe('from key B');
    expect(Date.now() - started).toBeLessThan(5_000); // not the 30 s the first key was asked to wait
    expect(of('key_rotation')).toEqual([expect.objectContaining({ from: 'KEY_A', to: 'KEY_B', error: 'rate_limit', status: 429 })]);
    const until = cooldowns()['fake/KEY_A']!.until;
    expect(until - started).toBeGreaterThanOrEqual(29_000);
    expect(until - Date.now()).toBeLessThanOrEqual(30_000);
  });

  it('fails as a refusal when every key is refused, naming the variables and never a key', async () => {
    const server = await fakeOpenAI({ apiKey: 'none-of-them' });
    keyedConfig(server);
    const { onEvent, of } = collect();
    const error = await failure(chat({ input: 'hi', home: t.home, env: { ...baseEnv(), ...keys }, onEvent }));
    expect(error.modelError).toMatchObject({ kind: 'auth', status: 401 });
    expect(server.requests).toHaveLength(2);
    expect(`${error.message} ${error.suggestion}`).toMatch(/KEY_A, KEY_B/);
    expect(JSON.stringify(of('error'))).not.toMatch(/sk-key/);
  });

  it('retries with backoff when every key is rate limited, then gives up after max_attempts (an outage, for failover)', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'error', status: 429, retryAfterSeconds: 0.05 } });
    keyedConfig(server);
    const { onEvent, of } = collect();
    const error = await failure(chat({ input: 'hi', home: t.home, env: { ...baseEnv(), ...keys }, onEvent }));
    expect(error.modelError).toMatchObject({ kind: 'rate_limit', recoverable: true });
    // The first attempt tries both keys; once both are set aside, each retry takes the one back soonest.
    expect(server.requests.map(bearer)).toEqual([keys.KEY_A, keys.KEY_B, keys.KEY_A, keys.KEY_B].map((key) => `Bearer ${key}`));
    expect(of('key_rotation')).toHaveLength(1);
    expect(of('retry')).toHaveLength(2);
  });

  it('refuses a provider with both api_key_env and api_key_envs', async () => {
    const server = await fakeOpenAI();
    writeConfig(server, { fakeExtra: ', api_key_env: KEY_A, api_key_envs: [KEY_B]' });
    await expect(chat({ input: 'hi', home: t.home, env: baseEnv() })).rejects.toThrow(/api_key_env \(one key\) or api_key_envs \(several\), not both/);
  });
});

describe('chat() against the fake Anthropic server', () => {
  it('runs the bash_exec loop over the messages protocol with system, history, tool_result and schema', async () => {
    const server = await fakeAnthropic();
    writeConfig(server, { api: 'anthropic-messages' });
    const session = join(t.home, 's.jsonl');
    server.enqueue({ kind: 'text', text: 'Hello Ada.' });
    await chat({ input: 'I am Ada.', sessionFile: session, home: t.home, env: baseEnv() });

    server.enqueue({ ...markerCall, text: 'Checking.' }, { kind: 'text', text: 'It printed marker-42.' });
    const { onEvent, of } = collect();
    const result = await chat({ input: 'Run the marker.', sessionFile: session, home: t.home, env: baseEnv(), onEvent });

    expect(result.text).toBe('It printed marker-42.');
    expect(result.toolCalls[0]!.result).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });
    expect(of('usage')).toHaveLength(2);
    expect(result.usage.input).toBeGreaterThan(0);

    expect(server.requests).toHaveLength(3);
    expect(server.requests[2]!.path).toBe('/v1/messages');
    const body = server.requests[2]!.body;
    const system = typeof body.system === 'string' ? body.system : body.system.map((block: LooseJson) => block.text).join('');
    expect(system).toBe(DEFAULT_SYSTEM_PROMPT);
    const messages: LooseJson[] = body.messages;
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(JSON.stringify(messages[0])).toContain('I am Ada.');
    expect(JSON.stringify(messages[1])).toContain('Hello Ada.');
    const toolUse = messages[3].content.find((block: LooseJson) => block.type === 'tool_use');
    expect(toolUse).toMatchObject({ name: 'bash_exec', input: { command: 'echo marker-$((6*7))' } });
    const toolResult = messages[4].content.find((block: LooseJson) => block.type === 'tool_result');
    expect(toolResult.tool_use_id).toBe(toolUse.id);
    const content = typeof toolResult.content === 'string' ? toolResult.content : toolResult.content.map((block: LooseJson) => block.text).join('');
    expect(JSON.parse(content)).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });
    expect(body.tools).toEqual([expect.objectContaining({ name: 'bash_exec', input_schema: expect.objectContaining({ required: ['command'] }) })]);
  });

  it('retries 529 overloaded and fails at once on 401', async () => {
    const server = await fakeAnthropic();
    writeConfig(server, { api: 'anthropic-messages' });
    server.enqueue({ kind: 'error', status: 529 }, { kind: 'text', text: 'back' });
    const { onEvent, of } = collect();
    expect((await chat({ input: 'hi', home: t.home, env: baseEnv(), onEvent })).text).toBe('back');
    expect(of('retry')).toEqual([expect.objectContaining({ error: 'server', status: 529 })]);

    server.requests.length = 0;
    server.enqueue({ kind: 'error', status: 401 });
    const error = await failure(chat({ input: 'hi', home: t.home, env: baseEnv() }));
    expect(error.modelError.kind).toBe('auth');
    expect(server.requests).toHaveLength(1);
  });
});

describe('chat: messages that join a turn', () => {
  it('adds what joins after a round of commands before the next model call, marked joined in the session', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo one' } }, { kind: 'text', text: 'both done' });
    const session = join(t.home, 's.jsonl');
    const joins = [[{ text: 'and two' }]];
    const result = await chat({ input: 'do one', sessionFile: session, home: t.home, env: baseEnv(), joining: async () => joins.shift() ?? [] });
    expect(result.text).toBe('both done');
    expect(server.requests).toHaveLength(2);
    expect((server.requests[1]!.body.messages as LooseJson[]).slice(-3).map((message) => [message.role, message.role === 'tool' ? '' : message.content])).toEqual([
      ['assistant', null],
      ['tool', ''],
      ['user', 'and two'],
    ]);
    expect(readSession(session).map((line) => [line.role, line.role === 'user' ? (line.joined ?? false) : undefined])).toEqual([
      ['user', false],
      ['assistant', undefined],
      ['tool', undefined],
      ['user', true],
      ['assistant', undefined],
    ]);
    expect(joins).toEqual([]);
  });
});

describe('chat: abort', () => {
  it('ends the turn when aborted while a command runs: the command is killed, no command starts and no model is called after it', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const started = join(t.home, 'started');
    // One reply with the long command; a model asked again would get the second, which would run another.
    server.enqueue({ kind: 'tool_call', name: 'bash_exec', arguments: { command: `touch ${started}; sleep 30` } }, { ...markerCall });
    const controller = new AbortController();
    const { onEvent, of } = collect();
    const sessionFile = join(t.home, 'session.jsonl');
    const turn = failure(chat({ input: 'wait', home: t.home, env: baseEnv(), sessionFile, signal: controller.signal, onEvent }));
    await waitFor(() => existsSync(started), 'the command to start');
    controller.abort();
    const error = await turn;
    expect(error.modelError.kind).toBe('aborted');
    expect(of('tool_result')).toEqual([expect.objectContaining({ exit_code: 124, stderr: expect.stringContaining('[bash_exec: aborted; the command and its children were killed]') })]);
    expect(of('tool_result')[0]!.duration_ms).toBeLessThan(5_000);
    expect(server.requests.filter((request) => request.path === '/v1/chat/completions')).toHaveLength(1);
    expectSessionValid(readSession(sessionFile));
  });
});

describe('chat: the processes of a turn', () => {
  it('keeps what a command left running in the background (setsid included) for the next call of the turn, and kills it when the turn ends', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const pidFile = join(t.home, 'sleeper.pid');
    server.enqueue(
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `setsid sleep 600 & echo $! > ${pidFile}; echo started` } },
      { kind: 'tool_call', name: 'bash_exec', arguments: { command: `kill -0 $(cat ${pidFile}) && echo alive` } },
      { kind: 'text', text: 'done' },
    );
    const { onEvent, of } = collect();
    const result = await chat({ input: 'start a server', home: t.home, env: baseEnv(), onEvent });

    expect(result.text).toBe('done');
    // The sleep holds the call's pipes; the call returns anyway once bash exited.
    expect(of('tool_result').map((event) => [event.exit_code, event.stdout])).toEqual([
      [0, 'started\n'],
      [0, 'alive\n'],
    ]);
    expect(of('tool_result')[0]!.duration_ms).toBeLessThan(5_000);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(isAlive({ pid, start: null }), 'the setsid sleep is gone when chat() returns').toBe(false);
  });
});

describe('chat: resume', () => {
  /**
   * A server that answers `counted`, and a session cut off mid-turn: one command finished (its
   * result is there), one was running; `joined`: a message that joined the turn in between.
   */
  async function cutOffTurn(joined?: string): Promise<{ server: FakeLlmServer; session: string; counter: string }> {
    const server = await fakeOpenAI();
    writeConfig(server);
    server.enqueue({ kind: 'text', text: 'counted' });
    const session = join(t.home, 's.jsonl');
    const counter = join(t.home, 'counter');
    const lines = [
      { role: 'user', content: 'count twice', turn: '7' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'bash_exec', arguments: { command: `echo x >> ${counter}` } }] },
      { role: 'tool', tool_call_id: 'c1', name: 'bash_exec', content: JSON.stringify({ stdout: '', stderr: '', exit_code: 0 }) },
      ...(joined === undefined ? [] : [{ role: 'user', content: joined, joined: true }]),
      { role: 'assistant', content: '', tool_calls: [{ id: 'c2', name: 'bash_exec', arguments: { command: `echo y >> ${counter}` } }] },
    ];
    writeFileSync(session, lines.map((line) => JSON.stringify(line) + '\n').join(''));
    return { server, session, counter };
  }

  it('continues a cut-off turn: no command is run again, the model gets the finished result and an interrupted one, and the user line is not written again', async () => {
    const { server, session, counter } = await cutOffTurn();
    const { onEvent, of } = collect();
    const result = await chat({ input: 'count twice', sessionFile: session, home: t.home, env: baseEnv(), resume: true, onEvent });

    expect(result.text).toBe('counted');
    expect(result.toolRounds).toBe(2);
    expect(existsSync(counter)).toBe(false); // neither command ran here
    expect(of('tool_result')).toEqual([expect.objectContaining({ id: 'c2', exit_code: 125, stderr: expect.stringMatching(/^interrupted: the turn was killed while this ran/) })]);
    const messages = server.requests[0]!.body.messages as LooseJson[];
    expect(messages.filter((message) => message.role === 'user').map((message) => message.content)).toEqual(['count twice']);
    expect(messages.filter((message) => message.role === 'tool').map((message) => message.tool_call_id)).toEqual(['c1', 'c2']);
    expectToolCallsAnswered(messages);
    const lines = readSession(session);
    expectSessionValid(lines);
    expect(lines.filter((line) => line.role === 'user')).toHaveLength(1);
    expect(lines.at(-1)).toMatchObject({ role: 'assistant', content: 'counted' });
  });

  it('ends a cut-off turn that has its answer already without calling the model', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    writeFileSync(
      session,
      [
        { role: 'user', content: 'hi', turn: '3' },
        { role: 'assistant', content: 'hello there' },
      ]
        .map((line) => JSON.stringify(line) + '\n')
        .join(''),
    );
    const result = await chat({ input: 'hi', sessionFile: session, home: t.home, env: baseEnv(), resume: true });
    expect(result.text).toBe('hello there');
    expect(server.requests).toHaveLength(0);
    expect(readSession(session)).toHaveLength(2);
  });

  it('resumes a cut-off turn that a message joined from its own user line: the joined line is no turn of its own', async () => {
    const { server, session, counter } = await cutOffTurn('count to three');
    const result = await chat({ input: 'count twice', sessionFile: session, home: t.home, env: baseEnv(), resume: true });
    expect(result.toolRounds).toBe(2);
    expect(existsSync(counter)).toBe(false);
    const messages = server.requests[0]!.body.messages as LooseJson[];
    expect(messages.filter((message) => message.role === 'user').map((message) => message.content)).toEqual(['count twice', 'count to three']);
  });

  it('writes the turn name on the user line', async () => {
    const server = await fakeOpenAI();
    writeConfig(server);
    const session = join(t.home, 's.jsonl');
    await chat({ input: 'hi', sessionFile: session, home: t.home, env: baseEnv(), turn: '12' });
    expect(readSession(session)[0]).toMatchObject({ role: 'user', content: 'hi', turn: '12' });
    expect(JSON.stringify(server.requests[0]!.body)).not.toContain('"turn"');
  });
});
