import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClawError } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { createTestHome, type TestHome } from '../../testing/index.js';
import type { ControlSource } from '../control-source.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import { XgwConfigSchema, type WebchatChannelConfig } from '../types.js';
import type { ControlAction } from './control-protocol.js';
import { createWebchatChannel } from './webchat.js';

/**
 * The control page's HTTP side against a real web chat (the owner's, and a guest one under
 * pairing, in one gateway), with a control source that records what reaches it: the checks an
 * action passes before it is carried out, and how an outcome or a refusal is answered. The
 * actions themselves, end to end, are control-page.browser.test.ts's.
 */

const acted: ControlAction[] = [];
const source: ControlSource = {
  view: async () => ({ checked_at: '', agents: [], waiting: [], spend: { days: [], usage: [], budgets: [] }, conversations: [], problems: [] }),
  conversation: async () => {
    throw new ClawError('not_found', 'no such conversation', { suggestion: 'reload the control page' });
  },
  act: async (action) => {
    acted.push(action);
    if (action.action === 'agent_stop') throw new ClawError('conflict', 'approval k3x9p was denied already, by someone', { suggestion: 'nothing to do' });
    return { text: 'done', view: await source.view() };
  },
};

let t: TestHome;
let state: GatewayState;
let gateway: Gateway;
const sites: Record<'owner' | 'guest', { base: string; token: string }> = { owner: { base: '', token: '' }, guest: { base: '', token: '' } };

beforeAll(async () => {
  t = createTestHome();
  const config = XgwConfigSchema.parse({
    channels: [
      { id: 'webchat:main', type: 'webchat', port: 0, access: 'open' },
      { id: 'webchat:guest', type: 'webchat', port: 0, access: 'pairing' },
    ],
    routes: [{ channel: '*', peer: '*', agent: 'admin' }],
  });
  state = new GatewayState(t.home);
  gateway = new Gateway({ home: t.home, config, state, logger: createLogger(join(t.home, 'logs', 'xgw.log')), control: source });
  for (const [name, channel] of [
    ['owner', config.channels[0]],
    ['guest', config.channels[1]],
  ] as const) {
    const adapter = createWebchatChannel(channel as WebchatChannelConfig);
    await gateway.startChannel(adapter);
    const url = new URL(adapter.status().url!);
    sites[name] = { base: url.origin, token: url.searchParams.get('token')! };
  }
});

afterAll(async () => {
  await gateway?.stopChannels();
  state?.close();
  t?.cleanup();
});

function post(site: { base: string; token: string }, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${site.base}/control/action`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${site.token}`, Origin: site.base, 'Content-Type': 'application/json', ...headers },
    body,
  });
}

describe("the control page's HTTP side", () => {
  it('passes a checked action on and answers its outcome, or the refusal with the status its kind says', async () => {
    const start = await post(sites.owner, JSON.stringify({ action: 'agent_start', agent: 'admin' }));
    expect(start.status).toBe(200);
    expect(((await start.json()) as { text: string }).text).toBe('done');
    const stop = await post(sites.owner, JSON.stringify({ action: 'agent_stop', agent: 'admin' }));
    expect(stop.status).toBe(409);
    expect(await stop.json()).toEqual({ error: 'approval k3x9p was denied already, by someone', suggestion: 'nothing to do' });
    const conversation = await fetch(`${sites.owner.base}/control/conversation?agent=admin&thread=x`, { headers: { Authorization: `Bearer ${sites.owner.token}` } });
    expect(conversation.status).toBe(404);
    expect(acted).toEqual([
      { action: 'agent_start', agent: 'admin' },
      { action: 'agent_stop', agent: 'admin' },
    ]);
  });

  it('refuses a body that is too large, not JSON or not an action, and a request that is not a POST, before anything is done', async () => {
    acted.length = 0;
    expect((await post(sites.owner, JSON.stringify({ action: 'agent_create', agent: 'x', purpose: 'p'.repeat(17 * 1024) }))).status).toBe(413);
    expect((await post(sites.owner, '{"action": ')).status).toBe(400);
    const unknown = await post(sites.owner, JSON.stringify({ action: 'rm_rf', agent: 'admin' }));
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: string }).error).toMatch(/^invalid control action/);
    expect((await post(sites.owner, JSON.stringify({ action: 'agent_create', agent: 'x', purpose: 'two\nlines' }))).status).toBe(400);
    expect((await post(sites.owner, JSON.stringify({ action: 'decide', agent: 'admin', code: 'k3x9p', approve: 'yes' }))).status).toBe(400);
    expect((await fetch(`${sites.owner.base}/control/action`, { method: 'PUT', headers: { Authorization: `Bearer ${sites.owner.token}` } })).status).toBe(405);
    expect(acted).toEqual([]);
  });

  it("answers every path of it 404 on a web chat that is not the owner's, token or not", async () => {
    const { base, token } = sites.guest;
    for (const path of ['/control', `/control?token=${token}`, '/control.json', '/control/conversation?agent=admin&thread=x']) {
      expect((await fetch(`${base}${path}`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(404);
    }
    expect((await post(sites.guest, JSON.stringify({ action: 'agent_start', agent: 'admin' }))).status).toBe(404);
    expect(acted).toEqual([]);
    // Its chat page links to none; the owner's does.
    expect(await (await fetch(`${base}/`)).text()).not.toContain('href="/control"');
    expect(await (await fetch(`${sites.owner.base}/`)).text()).toContain('href="/control"');
    expect(await (await fetch(`${sites.owner.base}/status`)).text()).toContain('href="/control"');
  });
});
