import { readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { ensureDir } from '../../core/home.js';
import { createTestHome, startFakeOpenAI, threadEvents, type FakeLlmOptions, type FakeLlmServer, type LooseJson, type TestHome } from '../../testing/index.js';
import type { AgentDir } from '../agent-dir.js';
import { initAgent } from '../lifecycle.js';
import { routeMessage } from '../router.js';
import { runAgent } from '../run.js';
import { sendToAgent } from '../send.js';

// Failover in `agent run` against two loopback servers speaking the OpenAI wire protocol: the
// agent's model unreachable (500, 429), its fallback answering.

let t: TestHome;
let dir: AgentDir;
let primary: FakeLlmServer;
let backup: FakeLlmServer;
const owner = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: userInfo().username, peerId: userInfo().username });

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
  backup = await startFakeOpenAI({
    defaultStep: (request) => {
      const messages: LooseJson[] = request.body?.messages ?? [];
      // A tool round first, so that the turn the primary began (if any) is continued, not begun again.
      if (messages.at(-1)?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: 'echo from-the-backup' } };
      return { kind: 'text', text: 'answered by the backup' };
    },
  });
});

afterEach(async () => {
  await primary.close();
  await backup.close();
  t.cleanup();
});

async function setUp(status: number, { keys = '', server = {} as FakeLlmOptions } = {}): Promise<void> {
  primary = await startFakeOpenAI({ defaultStep: { kind: 'error', status }, ...server });
  ensureDir(join(t.home, 'pai'));
  writeFileSync(
    join(t.home, 'pai', 'config.yaml'),
    [
      'default: primary/m1',
      'providers:',
      `  primary: { api: openai-completions, base_url: "${primary.url}", models: [{ id: m1 }]${keys} }`,
      `  backup: { api: openai-completions, base_url: "${backup.url}", models: [{ id: m2 }] }`,
      'retry: { max_attempts: 2, initial_delay_ms: 20 }',
      '',
    ].join('\n'),
  );
  const config = parse(readFileSync(dir.config, 'utf8')) as Record<string, Record<string, unknown>>;
  writeFileSync(dir.config, stringify({ ...config, pai: { ...config.pai, fallbacks: ['backup/m2'] }, sandbox: { profile: 'none' } }));
}

const completions = (server: FakeLlmServer) => server.requests.filter((request) => request.path === '/v1/chat/completions');

describe('model failover', () => {
  it.each([500, 429])('answers on the fallback when the primary answers %i, and the usage records name the model that answered', async (status) => {
    await setUp(status);
    await sendToAgent(t.home, 'helper', { text: 'are you there?', source: owner });
    expect(await runAgent('helper', { home: t.home, env: t.env })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(completions(primary).length).toBe(3); // its own attempts first (the agent's retry.max_attempts)
    expect(completions(backup).length).toBe(2);
    const events = threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path);
    expect(events.filter((event) => event.type === 'message' && event.source === 'self').map((event) => JSON.parse(event.content).text)).toEqual(['answered by the backup']);
    expect(
      events
        .filter((event) => event.subtype === 'usage')
        .map((event) => JSON.parse(event.content))
        .map((usage) => `${usage.provider}/${usage.model}`),
    ).toEqual(['backup/m2', 'backup/m2']);
  });

  const keys = { KEY_A: 'sk-primary-a-0001', KEY_B: 'sk-primary-b-0002' };
  const usageOf = () =>
    threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path)
      .filter((event) => event.subtype === 'usage')
      .map((event) => JSON.parse(event.content));

  it("goes on with the provider's next key (api_key_envs) before failing over: a refused key A, then key B answers on the same model; the usage records name the key variable, never the key", async () => {
    await setUp(200, { keys: ', api_key_envs: [KEY_A, KEY_B]', server: { apiKey: keys.KEY_B, defaultStep: { kind: 'text', text: 'answered with key B' } } });
    await sendToAgent(t.home, 'helper', { text: 'are you there?', source: owner });
    expect(await runAgent('helper', { home: t.home, env: { ...t.env, ...keys } })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(completions(primary).map((request) => request.headers.authorization)).toEqual([`Bearer ${keys.KEY_A}`, `Bearer ${keys.KEY_B}`]);
    expect(completions(backup)).toHaveLength(0);
    expect(usageOf()).toEqual([expect.objectContaining({ provider: 'primary', model: 'm1', profile: 'KEY_B' })]);
    const log = readFileSync(join(dir.root, 'logs', 'agent.log'), 'utf8');
    expect(log).toContain('the key in KEY_A was refused (HTTP 401); going on with KEY_B');
    expect(JSON.stringify(threadEvents(t.home, routeMessage(dir, 'per-peer', owner).path)) + log).not.toMatch(/sk-primary/);
  });

  it('fails over to the next model once every key of the provider is rate limited (429)', async () => {
    await setUp(429, { keys: ', api_key_envs: [KEY_A, KEY_B]' });
    await sendToAgent(t.home, 'helper', { text: 'are you there?', source: owner });
    expect(await runAgent('helper', { home: t.home, env: { ...t.env, ...keys } })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(
      completions(primary)
        .slice(0, 2)
        .map((request) => request.headers.authorization),
    ).toEqual([`Bearer ${keys.KEY_A}`, `Bearer ${keys.KEY_B}`]);
    expect(usageOf().map((usage) => `${usage.provider}/${usage.model}`)).toEqual(['backup/m2', 'backup/m2']);
  });

  it('does not fail over a refusal (401): the message gets its error notice, the fallback is not asked', async () => {
    await setUp(401);
    await sendToAgent(t.home, 'helper', { text: 'are you there?', source: owner });
    expect(await runAgent('helper', { home: t.home, env: t.env })).toMatchObject({ handled: 1, errors: 1 });
    expect(completions(backup)).toHaveLength(0);
  });
});
