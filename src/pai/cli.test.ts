import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPath } from '../core/package.js';
import { isAlive } from '../core/process.js';
import { withoutSecrets } from '../core/secrets.js';
import {
  expectSessionValid,
  createTestHome,
  estimateTokens,
  runTool,
  startFakeOpenAI,
  writeFakePaiConfig,
  type FakeLlmOptions,
  type FakeLlmServer,
  type LooseJson,
  type RunResult,
  type TestHome,
  waitFor,
} from '../testing/index.js';
import { readSession } from './session.js';
import type { ChatEvent } from './types.js';

// The built `pai` CLI (dist/) in a temp THECLAW_HOME, against a loopback server speaking the real
// OpenAI wire protocol.

let t: TestHome;
let env: NodeJS.ProcessEnv;
const servers: FakeLlmServer[] = [];

beforeEach(() => {
  t = createTestHome();
  // No provider keys or mock script from the developer's shell.
  env = withoutSecrets(t.env);
  delete env.PAI_MOCK_SCRIPT;
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

function writeConfig(text: string): void {
  mkdirSync(join(t.home, 'pai'), { recursive: true });
  writeFileSync(join(t.home, 'pai', 'config.yaml'), text);
}

function fakeConfig(server: FakeLlmServer, { maxAttempts = 3, timeoutSeconds = 1 } = {}): void {
  writeFakePaiConfig(t.home, server, { maxAttempts, timeoutSeconds });
}

const pai = (args: string[], input?: string): Promise<RunResult> => runTool('pai', args, env, input);

function events(stderr: string): ChatEvent[] {
  return stderr
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ChatEvent);
}

const types = (list: ChatEvent[]) => list.map((event) => event.type);
const markerCall = { kind: 'tool_call' as const, name: 'bash_exec', arguments: { command: 'echo marker-$((6*7))' } };

describe('pai chat against the fake OpenAI server', () => {
  it('runs a bash_exec round over an earlier session and prints only the final reply', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    const session = join(t.home, 'chat.jsonl');
    server.enqueue({ kind: 'text', text: 'Nice to meet you, Ada.' });
    const first = await pai(['chat', '--session', session, 'My name is Ada.']);
    expect(first).toEqual({ code: 0, stdout: 'Nice to meet you, Ada.\n', stderr: '' });

    server.enqueue(markerCall, { kind: 'text', text: 'The marker is marker-42.' });
    const second = await pai(['chat', '--session', session, '--system', 'You are TestBot.', '--json', 'Run the marker.']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe('The marker is marker-42.\n');
    const list = events(second.stderr);
    expect(list.find((event) => event.type === 'tool_result')).toMatchObject({ exit_code: 0, stdout: 'marker-42\n' });
    const usage = list.filter((event) => event.type === 'usage');
    expect(usage).toHaveLength(2);
    const done = list.at(-1)!;
    expect(done).toMatchObject({ type: 'done', text: 'The marker is marker-42.', tool_rounds: 1 });
    expect(done.type === 'done' && done.usage.input).toBeGreaterThan(0);

    const body = server.requests[2]!.body;
    expect(body.messages.map((message: LooseJson) => message.role)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'tool']);
    expect(body.messages[0].content).toBe('You are TestBot.');
    expect(body.messages[1].content).toBe('My name is Ada.');
    expect(body.messages[2].content).toBe('Nice to meet you, Ada.');
    expect(JSON.parse(body.messages[5].content)).toEqual({ stdout: 'marker-42\n', stderr: '', exit_code: 0 });
    expect(body.messages[5].tool_call_id).toBe(body.messages[4].tool_calls[0].id);
    expect(body.tools.map((tool: LooseJson) => tool.function.name)).toEqual(['bash_exec']);
    expect(readSession(session).map((line) => line.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
  });

  it('reads the message from stdin and does not offer tools with --no-tools', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    const result = await pai(['chat', '--no-tools'], 'piped question');
    expect(result).toEqual({ code: 0, stdout: 'echo: piped question\n', stderr: '' });
    expect(server.requests[0]!.body.tools ?? []).toEqual([]);
  });

  it('with --json writes NDJSON events on stderr and only the reply on stdout, with and without --stream', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    for (const stream of [false, true]) {
      server.enqueue(markerCall, { kind: 'text', text: 'final answer' });
      const result = await pai(['chat', '--json', ...(stream ? ['--stream'] : []), 'go']);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout, `stream ${stream}`).toBe('final answer\n');
      const list = events(result.stderr);
      expect(new Set(types(list))).toEqual(new Set(['start', 'delta', 'tool_call', 'tool_result', 'usage', 'done']));
      expect(list[0]).toEqual({ type: 'start', provider: 'fake', model: 'm1' });
      expect(list.at(-1)!.type).toBe('done');
      const deltas = list.flatMap((event) => (event.type === 'delta' ? [event.text] : []));
      expect(deltas.join('')).toBe('final answer');
      expect(types(list).indexOf('tool_call')).toBeLessThan(types(list).indexOf('tool_result'));
      expect(list.find((event) => event.type === 'tool_call')).toMatchObject({ name: 'bash_exec', arguments: { command: 'echo marker-$((6*7))' } });
    }
  });

  it('emits a retry event for a 500 and still answers', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    server.enqueue({ kind: 'error', status: 500 }, { kind: 'text', text: 'recovered' });
    const result = await pai(['chat', '--json', 'hi']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('recovered\n');
    expect(events(result.stderr).find((event) => event.type === 'retry')).toMatchObject({ attempt: 1, error: 'server', status: 500 });
  });

  it('stops at --max-turns with a note, exit 0, and a session the next turn can continue', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo again' } } });
    fakeConfig(server);
    const session = join(t.home, 's.jsonl');
    const result = await pai(['chat', '--session', session, '--max-turns', '2', '--json', 'loop']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/--max-turns 2/);
    const list = events(result.stderr);
    expect(list.at(-1)).toMatchObject({ type: 'done', stopped_at_max_turns: true, tool_rounds: 2 });
    expect(list.filter((event) => event.type === 'tool_result')).toHaveLength(2);
    expectSessionValid(readSession(session));

    server.enqueue({ kind: 'text', text: 'fine now' });
    const next = await pai(['chat', '--session', session, 'stop']);
    expect(next).toEqual({ code: 0, stdout: 'fine now\n', stderr: '' });
    const messages: LooseJson[] = server.requests.at(-1)!.body.messages;
    const callIds = messages.flatMap((message) => (message.tool_calls ?? []).map((call: LooseJson) => call.id));
    const resultIds = messages.filter((message) => message.role === 'tool').map((message) => message.tool_call_id);
    expect(callIds).toHaveLength(3);
    expect(resultIds).toEqual(callIds);
  });

  it('prints the max-turns note with --stream even when the model narrated its tool calls', async () => {
    const server = await fakeOpenAI({ defaultStep: { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo again' }, text: 'Let me check. ' } });
    fakeConfig(server);
    const result = await pai(['chat', '--stream', '--max-turns', '1', 'loop']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/--max-turns 1/);
  });
});

describe('pai chat errors', () => {
  it('fails at once on 401: exit 1, one request, Error: what - fix, and the session ends with the user line', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    const session = join(t.home, 's.jsonl');
    server.enqueue({ kind: 'error', status: 401 });
    const result = await pai(['chat', '--session', session, 'hi']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^Error: .*HTTP 401.* - .*key.*\n$/);
    expect(result.stderr.split('\n')).toHaveLength(2);
    expect(server.requests).toHaveLength(1);
    const lines = readFileSync(session, 'utf8').split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ role: 'user', content: 'hi' });
  });

  it('with --json prints {error, suggestion} on stdout and an error event on stderr', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    server.enqueue({ kind: 'error', status: 401 });
    const result = await pai(['chat', '--json', 'hi']);
    expect(result.code).toBe(1);
    const out = JSON.parse(result.stdout);
    expect(Object.keys(out).sort()).toEqual(['error', 'suggestion']);
    expect(out.error).toMatch(/401/);
    const list = events(result.stderr);
    expect(types(list)).toEqual(['start', 'error']);
    expect(list[1]).toMatchObject({ kind: 'auth', status: 401, error: out.error, suggestion: out.suggestion });
  });

  it('fails at once, without a request, when a built-in provider has no key', async () => {
    const result = await pai(['chat', '--provider', 'openai', 'hi']);
    expect(result).toEqual({ code: 1, stdout: '', stderr: 'Error: OPENAI_API_KEY is not set - export it or configure providers.openai.api_key_env\n' });
    const json = await pai(['chat', '--provider', 'anthropic', '--json', 'hi']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ error: 'ANTHROPIC_API_KEY is not set', suggestion: 'export it or configure providers.anthropic.api_key_env' });
    expect(types(events(json.stderr))).toEqual(['start', 'error']);
  });

  it('does not retry a 400 and exits 1', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    server.enqueue({ kind: 'error', status: 400 });
    const result = await pai(['chat', 'hi']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Error: .*HTTP 400.* - /);
    expect(server.requests).toHaveLength(1);
  });

  it('exits 1 after the attempts run out on 5xx and on a hanging server, never writing an assistant line', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server, { maxAttempts: 2 });
    const session = join(t.home, 's.jsonl');
    server.enqueue({ kind: 'error', status: 503 }, { kind: 'error', status: 503 });
    const failed = await pai(['chat', '--session', session, 'one']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/HTTP 503.*after 2 attempts/);

    server.enqueue({ kind: 'hang' }, { kind: 'hang' });
    const hung = await pai(['chat', '--session', session, '--json', 'two']);
    expect(hung.code).toBe(1);
    expect(JSON.parse(hung.stdout).error).toMatch(/timeout after 2 attempts/);
    expect(events(hung.stderr).at(-1)).toMatchObject({ type: 'error', kind: 'timeout' });
    expect(server.requests).toHaveLength(4);
    expect(readSession(session).map((line) => line.role)).toEqual(['user', 'user']);
  });
});

describe('pai transcribe', () => {
  it('prints the words of an audio file by the configured model, and says how to configure one', async () => {
    const server = await fakeOpenAI({ transcribe: (audio) => ({ text: `${audio.model} heard ${audio.name}` }) });
    writeFileSync(join(t.home, 'memo.ogg'), 'OggS');
    const none = await pai(['transcribe', join(t.home, 'memo.ogg')]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Error: no transcription model is configured - set transcription: { model: openai/whisper-1 }');
    writeConfig(`providers:\n  fake: { base_url: "${server.url}" }\ntranscription: { model: fake/whisper-1 }\n`);
    const heard = await pai(['transcribe', '--json', join(t.home, 'memo.ogg')]);
    expect(heard.code).toBe(0);
    expect(JSON.parse(heard.stdout)).toEqual({ text: 'whisper-1 heard memo.ogg', model: 'fake/whisper-1' });
  });
});

describe('pai chat with the offline mock', () => {
  it('answers with no config and no keys, labelled and deterministic', async () => {
    const first = await pai(['chat', 'hi']);
    const second = await pai(['chat', 'hi']);
    expect(first).toEqual({ code: 0, stdout: '[offline mock] You said: hi\n', stderr: '' });
    expect(second).toEqual(first);
  });

  it('follows a PAI_MOCK_SCRIPT through a real bash_exec round', async () => {
    const script = join(t.home, 'script.yaml');
    writeFileSync(script, '- bash: "echo x-$((2+3))"\n- text: "the command ran"\n');
    env.PAI_MOCK_SCRIPT = script;
    const session = join(t.home, 's.jsonl');
    const result = await pai(['chat', '--json', '--session', session, 'run it']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('[offline mock] the command ran\n');
    expect(events(result.stderr).find((event) => event.type === 'tool_result')).toMatchObject({ exit_code: 0, stdout: 'x-5\n' });
    const tool = readSession(session).find((line) => line.role === 'tool');
    expect(JSON.parse(tool!.content)).toEqual({ stdout: 'x-5\n', stderr: '', exit_code: 0 });
  });

  it('on SIGINT kills the running bash_exec command with its process group and exits 130', async () => {
    const pidFile = join(t.home, 'sleep.pid');
    const script = join(t.home, 'script.yaml');
    writeFileSync(script, `- bash: ${JSON.stringify(`sleep 300 & echo $! > '${pidFile}'; wait`)}\n- text: "never reached"\n`);
    env.PAI_MOCK_SCRIPT = script;
    const session = join(t.home, 's.jsonl');
    const child = spawn(process.execPath, [cliPath('pai'), 'chat', '--session', session, 'go'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    let sleepPid = 0;
    try {
      sleepPid = Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'the command to start', 10_000));
      expect(isAlive({ pid: sleepPid, start: null })).toBe(true);
      child.kill('SIGINT');
      expect(await exited).toBe(130);
      expect(stderr).toBe('Error: interrupted by SIGINT - run it again to go on; the session holds the turn so far\n');
      await waitFor(() => !isAlive({ pid: sleepPid, start: null }), 'the sleep to be killed', 10_000);
      // The session stays a valid conversation: the tool call has its (aborted) result.
      expectSessionValid(readSession(session));
    } finally {
      child.kill('SIGKILL');
      if (sleepPid && isAlive({ pid: sleepPid, start: null })) process.kill(sleepPid, 'SIGKILL');
    }
  });

  it("follows providers.mock.script from the config, a relative path being in the config's folder", async () => {
    writeConfig('providers:\n  mock: { script: script.yaml }\n');
    writeFileSync(join(t.home, 'pai', 'script.yaml'), '- bash: "echo from-config"\n- text: "scripted"\n');
    const result = await pai(['chat', '--json', 'go']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('[offline mock] scripted\n');
    expect(events(result.stderr).find((event) => event.type === 'tool_result')).toMatchObject({ stdout: 'from-config\n' });
  });
});

describe('request size', () => {
  it('keeps a trivial turn with the tool schema under 1,500 tokens', async () => {
    const server = await fakeOpenAI();
    fakeConfig(server);
    const result = await pai(['chat', 'hi']);
    expect(result.code, result.stderr).toBe(0);
    expect(server.requests).toHaveLength(1);
    const request = server.requests[0]!;
    expect(request.body.tools).toHaveLength(1);
    const tokens = estimateTokens('x'.repeat(request.bytes));
    console.log(`pai chat "hi": request body ${request.bytes} bytes ≈ ${tokens} tokens (bytes/4)`);
    expect(tokens).toBeLessThan(1_500);
  });
});
