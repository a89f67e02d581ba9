import { createHmac } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentInboxPath } from '../core/layout.js';
import { apiTokensPath } from '../xgw/channels/api-tokens.js';
import type { LooseJson, RecordedRequest } from '../testing/fake-llm.js';
import { lastUserText, startSystem, type System, until } from './support.js';

// The API channel end to end: real xgw, notifier and admin in a temp home, the fake OpenAI
// server as admin's model, and the callers a plain fetch and the official `openai` client.

const HOOK_SECRET = 'e2e-hook-secret-value';
let s: System;
let base: string;
let token: string;

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const json = async (response: Response): Promise<LooseJson> => response.json();

const toolNames = (request: RecordedRequest): string[] => (request.body.tools ?? []).map((tool: LooseJson) => tool.function?.name);

const inboxTexts = (): string[] => s.events(agentInboxPath(s.home, 'admin')).map((event) => String(event.content));

beforeAll(async () => {
  s = await startSystem({
    extraChannels: [`{ id: "api:main", type: api, port: 0, max_body_bytes: 4096, hooks: [{ name: ci, agent: admin, secret_env: E2E_HOOK_SECRET }] }`],
    env: { E2E_HOOK_SECRET: HOOK_SECRET },
  });
  const api = await until(async () => (await s.xgwStatus()).channels.find((channel) => channel.id === 'api:main' && channel.state === 'running'), 'api:main running', 10_000);
  base = api.url!.replace(/\/v1$/, '');
  token = (await s.must('xgw', ['token', 'add', 'app'])).stdout.split('\n')[0]!;
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

describe('xgw token', () => {
  it('keeps only a hash of each token, in a 0600 file, and lists and revokes clients', async () => {
    const file = readFileSync(apiTokensPath(s.home), 'utf8');
    expect(token).toMatch(/^xgw_[A-Za-z0-9_-]{43}$/);
    expect(file).not.toContain(token);
    expect(statSync(apiTokensPath(s.home)).mode & 0o777).toBe(0o600);
    const other = (await s.must('xgw', ['token', 'add', 'gone'])).stdout.split('\n')[0]!;
    expect((await s.must('xgw', ['token', 'list'])).stdout).toMatch(/app {2}created .*\ngone {2}created/);
    await s.must('xgw', ['token', 'revoke', 'gone']);
    const refused = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${other}` }, body: '{}' });
    expect(refused.status).toBe(401);
    expect(await json(refused)).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error' } });
    expect((await s.run('xgw', ['token', 'add', 'app'])).code).not.toBe(0);
  });
});

describe('POST /v1/chat/completions', () => {
  it("answers through the agent's turn in OpenAI's format, the conversation named by user", async () => {
    const response = await post('/v1/chat/completions', { model: 'admin', user: 'weekly', messages: [{ role: 'user', content: 'hello api' }] });
    expect(response.status).toBe(200);
    const body = await json(response);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'admin',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello api' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    });
    expect(body.id).toMatch(/^chatcmpl-/);
    // The model saw it as the message of peer app in conversation weekly of api:main.
    const event = s.events(agentInboxPath(s.home, 'admin')).find((e) => String(e.content).includes('hello api'))!;
    expect(event.source).toContain('api:main');
    expect(event.source).toContain('weekly');
    expect(event.source).toContain('app');
    // Where the owner's policy lets everyone run commands (this system's), the client is offered them too.
    expect(toolNames(s.llm.requests.find((request) => lastUserText(request).includes('hello api'))!)).toContain('bash_exec');
  });

  it('takes a request id once: a retry with the same Idempotency-Key gets the same answer and no second turn', async () => {
    const ask = () => post('/v1/chat/completions', { model: 'admin', messages: [{ role: 'user', content: 'only once please' }] }, { 'idempotency-key': 'req-1' });
    const first = await json(await ask());
    const again = await json(await ask());
    expect(again).toEqual(first);
    expect(first.choices[0].message.content).toBe('echo: only once please');
    expect(s.llm.requests.filter((request) => lastUserText(request).includes('only once please'))).toHaveLength(1);
    expect(inboxTexts().filter((text) => text.includes('only once please'))).toHaveLength(1);
  });

  it('refuses a wrong body (400), an unknown agent (404), a body too large (413) and no token (401), storing nothing', async () => {
    const before = inboxTexts().length;
    const bad = await post('/v1/chat/completions', { model: 'admin', messages: 'hi' });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error).toMatchObject({ type: 'invalid_request_error', param: 'messages' });
    const notJson = await post('/v1/chat/completions', 'not json');
    expect(notJson.status).toBe(400);
    const unknown = await post('/v1/chat/completions', { model: 'nobody', messages: [{ role: 'user', content: 'hi' }] });
    expect(unknown.status).toBe(404);
    expect((await json(unknown)).error.code).toBe('model_not_found');
    const large = await post('/v1/chat/completions', { model: 'admin', messages: [{ role: 'user', content: 'x'.repeat(5000) }] });
    expect(large.status).toBe(413);
    const anonymous = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'admin', messages: [{ role: 'user', content: 'hi' }] }) });
    expect(anonymous.status).toBe(401);
    expect(inboxTexts().length).toBe(before);
  });

  it('streams chat.completion.chunk events from the reply as it is written, ending with [DONE]', async () => {
    s.llm.enqueue({ kind: 'text', text: 'one two three four five six', streamMs: 400 });
    const response = await post('/v1/chat/completions', { model: 'admin', stream: true, messages: [{ role: 'user', content: 'stream it' }] });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = (await response.text()).split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.replace(/^data: /, '')));
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id === chunks[0].id)).toBe(true);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop');
    expect(chunks.map((chunk) => chunk.choices[0].delta.content ?? '').join('')).toBe('one two three four five six');
    // More than the answer in one piece: the drafts (from 1 s into the turn) came through.
    expect(chunks.filter((chunk) => chunk.choices[0].delta.content).length).toBeGreaterThan(1);
  });
});

describe('the official openai client', () => {
  it('calls the API unchanged, without and with streaming', async () => {
    const client = new OpenAI({ apiKey: token, baseURL: `${base}/v1` });
    const completion = await client.chat.completions.create({ model: 'admin', messages: [{ role: 'user', content: 'from the sdk' }] });
    expect(completion.choices[0]!.message.content).toBe('echo: from the sdk');
    const stream = await client.chat.completions.create({ model: 'admin', stream: true, messages: [{ role: 'user', content: 'sdk stream' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('echo: sdk stream');
    await expect(client.chat.completions.create({ model: 'nobody', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
  });
});

describe('POST /hooks/<name>', () => {
  it("puts the body into the agent's inbox in the hook's own conversation and answers 202 with the event id", async () => {
    const body = JSON.stringify({ build: 42, state: 'failed' });
    const plain = await fetch(`${base}/hooks/ci`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hook-secret': HOOK_SECRET }, body });
    expect(plain.status).toBe(202);
    const { id } = await json(plain);
    const event = s.events(agentInboxPath(s.home, 'admin')).find((e) => e.id === id)!;
    expect(JSON.parse(String(event.content)).text).toBe('Webhook ci (JSON):\n{\n  "build": 42,\n  "state": "failed"\n}');
    expect(event.source).toContain('hook-ci');
    const signature = createHmac('sha256', HOOK_SECRET).update('door opened').digest('hex');
    const signed = await fetch(`${base}/hooks/ci`, { method: 'POST', headers: { 'x-hook-signature': `sha256=${signature}` }, body: 'door opened' });
    expect(signed.status).toBe(202);
  });

  it('refuses a wrong secret or signature with 401, an unknown hook with 404, a large body with 413, storing nothing', async () => {
    const before = inboxTexts().length;
    const wrong = await fetch(`${base}/hooks/ci`, { method: 'POST', headers: { 'x-hook-secret': 'guess' }, body: 'intruder' });
    expect(wrong.status).toBe(401);
    expect((await json(wrong)).error.type).toBe('authentication_error');
    const forged = createHmac('sha256', 'other').update('intruder').digest('hex');
    expect((await fetch(`${base}/hooks/ci`, { method: 'POST', headers: { 'x-hook-signature': forged }, body: 'intruder' })).status).toBe(401);
    expect((await fetch(`${base}/hooks/ci`, { method: 'POST', body: 'intruder' })).status).toBe(401);
    expect((await fetch(`${base}/hooks/nope`, { method: 'POST', headers: { 'x-hook-secret': HOOK_SECRET }, body: 'x' })).status).toBe(404);
    expect((await fetch(`${base}/hooks/ci`, { method: 'POST', headers: { 'x-hook-secret': HOOK_SECRET }, body: 'y'.repeat(5000) })).status).toBe(413);
    expect(inboxTexts().length).toBe(before);
    expect(inboxTexts().some((text) => text.includes('intruder'))).toBe(false);
  });
});

describe("the owner's default policy", () => {
  it('offers an API client no commands under the default policy (the owner may list it in policy.owners)', async () => {
    const d = await startSystem({ extraChannels: ['{ id: "api:main", type: api, port: 0 }'], policy: '{}' });
    try {
      const url = (await until(async () => (await d.xgwStatus()).channels.find((channel) => channel.id === 'api:main' && channel.state === 'running'), 'api:main running', 10_000)).url!;
      const client = new OpenAI({ apiKey: (await d.must('xgw', ['token', 'add', 'app'])).stdout.split('\n')[0]!, baseURL: url });
      await client.chat.completions.create({ model: 'admin', messages: [{ role: 'user', content: 'may I run things' }] });
      const request = d.llm.requests.find((r) => lastUserText(r).includes('may I run things'))!;
      expect(toolNames(request)).not.toContain('bash_exec');
    } finally {
      await d.stop();
    }
  }, 120_000);
});
