import { describe, expect, it } from 'vitest';
import type { ManageRequest } from '../core/manage-requests.js';
import { ADMIN_RIGHTS, manageRights, refusal, TURN_CONFIG_KEYS, type AskingTurn } from './manage-policy.js';

const admin: AskingTurn = { agent: 'admin', ownerChat: true, rights: ADMIN_RIGHTS };
const init: ManageRequest = { action: 'agent_init', agent: 'gardener' };

describe('who may manage what from a turn', () => {
  it("gives admin agents and routes by default, and every other agent nothing; a config's manage: wins", () => {
    expect(manageRights('admin', undefined)).toEqual({ agents: true, routes: true, channels: false });
    expect(manageRights('helper', undefined)).toEqual({ agents: false, routes: false, channels: false });
    expect(manageRights('admin', { agents: false, routes: true, channels: false })).toEqual({ agents: false, routes: true, channels: false });
  });

  it("carries out admin's requests in the owner's direct chat", () => {
    for (const request of [
      init,
      { action: 'agent_start', agent: 'gardener' },
      { action: 'agent_identity_set', agent: 'gardener', text: '# g' },
      { action: 'agent_config_set', agent: 'gardener', key: 'pai.model', value: 'm2' },
      { action: 'agent_status' },
      { action: 'route_add', channel: 'telegram:main', peer: '7171', agent: 'gardener' },
      { action: 'route_add', channel: 'telegram:main', peer: '7171', agent: 'admin' },
      { action: 'pair_approve', code: 'K7M2QX9P' },
    ] satisfies ManageRequest[]) {
      expect(refusal(request, admin), request.action).toBeNull();
    }
  });

  it("refuses every request outside the owner's direct chat (another person, a group, a heartbeat), saying where it can be done", () => {
    expect(refusal({ action: 'agent_status' }, { ...admin, ownerChat: false })).toEqual({
      reason: "agent status is carried out only in the owner's direct chat with admin, and this turn is not one",
      suggestion: 'the owner can ask for it in their direct chat, or run it in a terminal',
    });
    expect(refusal({ action: 'route_remove', channel: '*', peer: '*' }, { ...admin, ownerChat: false })?.reason).toMatch(/^xgw route remove is carried out only/);
  });

  it('refuses an agent the right its config does not give', () => {
    const helper: AskingTurn = { agent: 'helper', ownerChat: true, rights: manageRights('helper', undefined) };
    expect(refusal(init, helper)?.reason).toBe('helper may not manage agents (manage.agents is off in its config)');
    expect(refusal({ action: 'pair_approve', code: 'K7M2QX9P' }, helper)?.reason).toBe('helper may not manage routes (manage.routes is off in its config)');
    expect(refusal({ action: 'route_add', channel: '*', peer: '*', agent: 'gardener' }, { ...admin, rights: { ...ADMIN_RIGHTS, routes: false } })?.reason).toMatch(/manage\.routes is off/);
  });

  it('refuses changes to the asking agent itself and to the system agents', () => {
    expect(refusal({ action: 'agent_stop', agent: 'admin' }, admin)?.reason).toBe('admin does not manage itself');
    expect(refusal({ action: 'agent_identity_set', agent: 'warden', text: 'x' }, admin)?.reason).toBe('admin does not manage the system agent warden');
    expect(refusal({ action: 'agent_init', agent: 'evolver' }, admin)?.reason).toBe('admin does not manage the system agent evolver');
    expect(refusal({ action: 'route_add', channel: '*', peer: '*', agent: 'maintainer' }, admin)?.reason).toBe('admin does not manage the system agent maintainer');
  });

  it("refuses the owner's config keys: policy, sandbox, manage, budget and the rest not listed", () => {
    for (const key of ['policy.rules', 'sandbox.profile', 'sandbox.network', 'manage.channels', 'budget.daily_tokens', 'turn.timeout_seconds', 'outbound', 'kind', 'agent_id']) {
      expect(refusal({ action: 'agent_config_set', agent: 'gardener', key, value: 'x' }, admin)?.reason, key).toBe(`${key} is the owner's to set, not a turn's`);
    }
    expect(TURN_CONFIG_KEYS.some((key) => /^(policy|sandbox|manage|budget|turn|outbound|inbox)\b/.test(key))).toBe(false);
  });
});
