import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isClawError } from './errors.js';
import { askRuntime, ManageRequestSchema, parseManageRequest, resultName } from './manage-requests.js';
import { isValidId } from './slug.js';

describe('management requests from a turn', () => {
  it('takes each command with its fields', () => {
    expect(parseManageRequest({ action: 'agent_init', agent: 'gardener', provider: 'openai', model: 'gpt-4o-mini', json: true })).toEqual({
      action: 'agent_init',
      agent: 'gardener',
      provider: 'openai',
      model: 'gpt-4o-mini',
      json: true,
    });
    expect(parseManageRequest({ action: 'route_add', channel: 'telegram:main', peer: '7171', agent: 'gardener' }).action).toBe('route_add');
    expect(parseManageRequest({ action: 'route_remove', channel: '*', peer: '*', no_reload: true }).action).toBe('route_remove');
    expect(parseManageRequest({ action: 'agent_config_set', agent: 'gardener', key: 'context.recent_messages', value: '40' }).action).toBe('agent_config_set');
    expect(parseManageRequest({ action: 'pair_approve', code: 'K7M2QX9P' }).action).toBe('pair_approve');
  });

  it.each([
    ['an agent id that leaves the agents folder', { action: 'agent_start', agent: '../admin' }, /agent: must be an agent id/],
    ['an agent id that is a flag', { action: 'agent_stop', agent: '--help' }, /agent: must be an agent id/],
    ['a peer that is a flag', { action: 'route_add', channel: 'telegram:main', peer: '--no-reload', agent: 'gardener' }, /peer: must be a peer id/],
    ['a channel that is not an id', { action: 'route_remove', channel: 'telegram', peer: '*' }, /channel: must be a channel id/],
    ['a config key that is not a path', { action: 'agent_config_set', agent: 'gardener', key: 'pai..model', value: 'x' }, /key: must be a config key/],
    ['a model that is a flag', { action: 'agent_init', agent: 'gardener', model: '-x' }, /model: must be a provider or model name/],
    ['a pairing code of another shape', { action: 'pair_approve', code: 'k7m2' }, /code: must be the 8-character pairing code/],
    ['an empty identity', { action: 'agent_identity_set', agent: 'gardener', text: '' }, /text/],
    ['a field the command has not', { action: 'agent_init', agent: 'gardener', kind: 'system' }, /kind/],
    ['an action there is not', { action: 'channel_add', id: 'telegram:x' }, /action/],
  ])('refuses %s, naming the field', (_, request, message) => {
    let error: unknown;
    try {
      parseManageRequest(request);
    } catch (caught) {
      error = caught;
    }
    expect(isClawError(error, 'usage')).toBe(true);
    expect((error as Error).message).toMatch(/^invalid management request: /);
    expect((error as Error).message).toMatch(message);
  });

  it('takes exactly the agent ids the agents folder takes', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.stringMatching(/^[a-z0-9_-]{1,70}$/)), (agent) => {
        expect(ManageRequestSchema.safeParse({ action: 'agent_start', agent }).success).toBe(isValidId(agent));
      }),
    );
  });

  it('never takes a peer or channel a command line would read as a flag', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (channel, peer) => {
        const parsed = ManageRequestSchema.safeParse({ action: 'route_remove', channel, peer });
        if (parsed.success) expect([channel, peer].every((value) => !value.startsWith('-') && value.length > 0)).toBe(true);
      }),
    );
  });
});

describe('waiting for the runtime', () => {
  let outbox: string;
  beforeEach(() => {
    outbox = mkdtempSync(join(tmpdir(), 'manage-outbox-'));
  });
  afterEach(() => rmSync(outbox, { recursive: true, force: true }));

  it('gives up within its bound when nothing answers, and withdraws its request', async () => {
    const error = await askRuntime(outbox, { action: 'agent_list' }, 300).catch((caught: unknown) => caught);
    expect(isClawError(error, 'timeout')).toBe(true);
    expect((error as Error).message).toBe('the runtime did not answer this request within 0.3 s; it was withdrawn');
    expect(readdirSync(outbox)).toEqual([]);
  });

  it('returns the result left for its request and removes it', async () => {
    const asked = askRuntime(outbox, { action: 'agent_list' }, 10_000);
    const request = await new Promise<string>((resolve) => {
      const look = () => {
        const name = readdirSync(outbox).find((entry) => entry.endsWith('.json'));
        if (name) resolve(name);
        else setImmediate(look);
      };
      look();
    });
    writeFileSync(join(outbox, resultName(request)), JSON.stringify({ exit_code: 126, stdout: '', stderr: 'Error: no - why\n' }));
    expect(await asked).toEqual({ exit_code: 126, stdout: '', stderr: 'Error: no - why\n' });
    expect(readdirSync(outbox)).toEqual([request]);
  });
});
