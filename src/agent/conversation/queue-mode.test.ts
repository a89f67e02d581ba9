import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import type { ThreadRoute } from '../types.js';
import { planTurn, queueMode, queueModeFromEnv } from './queue-mode.js';

const dm = (channelType: string, peer = 'ann') => formatAddress({ kind: 'external', channelType, instance: 'main', conversationType: 'dm', conversationId: peer, peerId: peer });
const group = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'group', conversationId: '-100', peerId: 'ann' });
const agent = formatAddress({ kind: 'internal', conversationType: 'dm', conversationId: 't', agentId: 'other' });
const route = (kind: ThreadRoute['kind']): ThreadRoute => ({ threadId: `${kind}-x`, path: `/threads/${kind}/x`, kind, peerKey: null, groupKey: null });
const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, seconds)).toISOString();
const message = (source: string, text: string, seconds = 0) => ({ source, content: JSON.stringify({ text, attachments: [] }), created_at: at(seconds) });

describe('queueMode', () => {
  it("collects in a person's direct chat and follows up elsewhere, unless the agent or the conversation chose", () => {
    expect(queueMode(null, undefined, route('peer'), dm('telegram'))).toBe('collect');
    expect(queueMode(null, undefined, route('peer'), dm('api'))).toBe('followup'); // each request waits for its own answer
    expect(queueMode(null, undefined, route('group'), group)).toBe('followup');
    expect(queueMode(null, undefined, route('agent'), agent)).toBe('followup');
    expect(queueMode(null, 'steer', route('peer'), dm('telegram'))).toBe('steer');
    expect(queueMode('interrupt', 'steer', route('group'), group)).toBe('interrupt');
  });

  it('takes a default from THECLAW_QUEUE_MODE, and refuses one that is no mode', () => {
    expect(queueModeFromEnv({ THECLAW_QUEUE_MODE: 'followup' })).toBe('followup');
    expect(queueModeFromEnv({})).toBeUndefined();
    expect(() => queueModeFromEnv({ THECLAW_QUEUE_MODE: 'fast' })).toThrow('THECLAW_QUEUE_MODE=fast is not a queue mode');
  });
});

describe('planTurn', () => {
  const ann = dm('telegram');

  it("collects a person's messages at the head, up to a chat command or another agent's message, once the newest is debounce old", () => {
    const waiting = [message(ann, 'hi', 0), message(ann, 'can you', 1), message(ann, '/status', 2), message(ann, 'later', 3)];
    expect(planTurn('collect', waiting, 1_500)).toEqual({ count: 2, notBefore: Date.parse(at(1)) + 1_500 });
    expect(planTurn('collect', [message(ann, 'hi'), message(agent, 'an answer'), message(ann, 'more')], 1_500)).toEqual({ count: 1, notBefore: Date.parse(at(0)) + 1_500 });
  });

  it('takes a chat command or an agent message alone and at once, and every message so in the other modes', () => {
    expect(planTurn('collect', [message(ann, '/status'), message(ann, 'hi')], 1_500)).toEqual({ count: 1, notBefore: 0 });
    expect(planTurn('collect', [message(agent, 'an answer'), message(ann, 'hi')], 1_500)).toEqual({ count: 1, notBefore: 0 });
    for (const mode of ['steer', 'followup', 'interrupt'] as const) expect(planTurn(mode, [message(ann, 'hi'), message(ann, 'there')], 1_500)).toEqual({ count: 1, notBefore: 0 });
  });
});
