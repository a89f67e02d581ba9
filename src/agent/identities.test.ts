import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { isClawError } from '../core/errors.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { initThread } from '../thread/index.js';
import { loadAgentConfig, type AgentDir } from './agent-dir.js';
import { linkIdentity, setConfigKey, unlinkIdentity } from './agent-settings.js';
import { memoryFiles } from './context.js';
import { initAgent } from './lifecycle.js';
import { conversationScope } from './memory/memory-index.js';
import { isOwner } from './policy/index.js';
import { routeFor } from './router.js';

// One person across channels (issue 25 §4), in-process: the addresses the owner links share the
// person's memory file and ownership; their direct chats stay apart unless dm_scope is person;
// what is not linked is never merged.

let t: TestHome;
let dir: AgentDir;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
});

afterEach(() => {
  t.cleanup();
});

const dm = (channelType: string, peerId: string, instance = 'main') => formatAddress({ kind: 'external', channelType, instance, conversationType: 'dm', conversationId: peerId, peerId });
const inGroup = (peerId: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'group', conversationId: '-100', peerId });
const route = (source: string) => routeFor(dir, loadAgentConfig(dir), source);

describe('linked addresses', () => {
  it('share the person’s memory file and keep their own threads, one thread under dm_scope: person', () => {
    linkIdentity(t.home, 'helper', 'alice', ['telegram:main:123', 'webchat:main:3f2a']);
    const telegram = route(dm('telegram', '123'));
    const webchat = route(dm('webchat', '3f2a'));
    expect(memoryFiles(dir, telegram).user).toBe(memoryFiles(dir, webchat).user);
    expect(memoryFiles(dir, telegram).user).toMatch(/\/memory\/user-person\.alice\.md$/);
    expect([telegram.threadId, webchat.threadId]).toEqual(['peer-telegram.main.123', 'peer-webchat.main.3f2a']);
    // A group stays the group's, whoever of them writes there.
    expect(route(inGroup('123'))).toMatchObject({ kind: 'group', peerKey: null });

    // Another agent's answer to a question from that thread goes back into it, with the person's memory.
    initThread(telegram.path, { home: t.home }).close();
    const answer = formatAddress({ kind: 'internal', conversationType: 'reply', conversationId: telegram.threadId, agentId: 'other' });
    expect(route(answer)).toMatchObject({ path: telegram.path, peerKey: 'person.alice' });
    // Memory search in a turn finds the conversation's files by its thread id: the person's too.
    expect(conversationScope(dir, telegram.threadId).files).toContain('memory/user-person.alice.md');
    expect(conversationScope(dir, 'peer-telegram.main.999').files).toContain('memory/user-telegram.main.999.md');

    setConfigKey(t.home, 'helper', 'routing.dm_scope', 'person');
    expect(route(dm('telegram', '123')).threadId).toBe('peer-person.alice');
    expect(route(dm('webchat', '3f2a')).path).toBe(route(dm('telegram', '123')).path);
    expect(route(dm('telegram', '999')).threadId).toBe('peer-telegram.main.999');
  });

  it('are the owner together when one of them is in policy.owners, and only then', () => {
    setConfigKey(t.home, 'helper', 'policy.owners', '[telegram:main:123]');
    linkIdentity(t.home, 'helper', 'alice', ['telegram:main:123', 'webchat:guest:3f2a']);
    linkIdentity(t.home, 'helper', 'bob', ['discord:main:55']);
    const policy = loadAgentConfig(dir).policy;
    expect(isOwner(policy, dm('telegram', '123'))).toBe(true);
    expect(isOwner(policy, dm('webchat', '3f2a', 'guest'))).toBe(true);
    expect(isOwner(policy, dm('discord', '55'))).toBe(false);
    expect(isOwner(policy, dm('webchat', '3f2a'))).toBe(false); // another web chat's peer of the same id

    unlinkIdentity(t.home, 'helper', 'alice', ['webchat:guest:3f2a']);
    expect(isOwner(loadAgentConfig(dir).policy, dm('webchat', '3f2a', 'guest'))).toBe(false);
    unlinkIdentity(t.home, 'helper', 'alice', []);
    expect(loadAgentConfig(dir).identities).toEqual({ bob: ['discord:main:55'] });
  });

  it('are refused when malformed or already another person’s, and the config is left as it was', () => {
    linkIdentity(t.home, 'helper', 'alice', ['telegram:main:123']);
    const before = readFileSync(dir.config, 'utf8');
    const refusal = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return isClawError(error) ? `${error.kind}: ${error.message} - ${error.suggestion}` : String(error);
      }
      return 'not refused';
    };
    expect(refusal(() => linkIdentity(t.home, 'helper', 'bob', ['telegram:main:123']))).toBe(
      'usage: telegram:main:123 is linked to alice - unlink it first: agent identity unlink helper alice telegram:main:123',
    );
    expect(refusal(() => linkIdentity(t.home, 'helper', 'bob', ['123']))).toMatch(/^usage: "123" is not an address - write <channel type>:<instance>:<peer id>/);
    expect(refusal(() => linkIdentity(t.home, 'helper', 'Bob Smith', ['discord:main:5']))).toMatch(/^usage: .*lower-case letters/);
    expect(refusal(() => unlinkIdentity(t.home, 'helper', 'carol', []))).toMatch(/^not_found: helper links no person named carol/);
    expect(readFileSync(dir.config, 'utf8')).toBe(before);
  });
});

describe('unlinked addresses', () => {
  it('never share a memory file or a thread, whatever their ids, with people linked or not (property)', () => {
    linkIdentity(t.home, 'helper', 'alice', ['telegram:main:1', 'webchat:main:1']);
    setConfigKey(t.home, 'helper', 'routing.dm_scope', 'person');
    const config = loadAgentConfig(dir);
    const peer = fc.tuple(fc.constantFrom('telegram', 'webchat', 'discord'), fc.string({ minLength: 1, maxLength: 12 }));
    fc.assert(
      fc.property(peer, peer, ([typeA, idA], [typeB, idB]) => {
        const a = routeFor(dir, config, dm(typeA, idA));
        const b = routeFor(dir, config, dm(typeB, idB));
        const linked = (type: string, id: string) => id === '1' && type !== 'discord';
        const samePerson = (typeA === typeB && idA === idB) || (linked(typeA, idA) && linked(typeB, idB));
        expect(memoryFiles(dir, a).user === memoryFiles(dir, b).user).toBe(samePerson);
        expect(a.path === b.path).toBe(samePerson);
      }),
    );
  });
});
