import { existsSync, readdirSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { initThread } from '../thread/index.js';
import { agentDir, type AgentDir } from './agent-dir.js';
import { memoryFiles, sessionFile } from './context.js';
import { initAgent } from './lifecycle.js';
import { ANSWER_CONVERSATION, mixesPeople, routeMessage, threadById } from './router.js';

// Routing by the source address alone: where each sender's conversation lives, and that no
// sender can reach outside threads/ or into another sender's thread.

let t: TestHome;
let dir: AgentDir;

beforeEach(async () => {
  t = createTestHome();
  dir = await initAgent(t.home, 'helper');
});

afterEach(() => {
  t.cleanup();
});

const external = (peerId: string, channelType = 'telegram', instance = 'main') => formatAddress({ kind: 'external', channelType, instance, conversationType: 'dm', conversationId: peerId, peerId });
/** A person's message in a group chat (Telegram: the chat id, the sender's user id). */
const inGroup = (conversationId: string, peerId: string, channelType = 'telegram', instance = 'main', conversationType = 'group') =>
  formatAddress({ kind: 'external', channelType, instance, conversationType, conversationId, peerId });
/** Another agent's question (`agent send`): the conversation id names the asking agent's thread, or `default`. */
const internal = (agentId: string, conversationId = 'default', conversationType = 'dm') => formatAddress({ kind: 'internal', conversationType, conversationId, agentId });
/** Another agent's answer to a question one of our threads asked (deliver.ts writes these). */
const answer = (agentId: string, conversationId: string) => formatAddress({ kind: 'internal', conversationType: ANSWER_CONVERSATION, conversationId, agentId });

/** The route's directory is one level below `parent`, inside the agent's threads/. */
function expectInside(path: string, parent: string): void {
  const threads = resolve(dir.threads) + sep;
  expect(resolve(path).startsWith(threads), path).toBe(true);
  expect(dirname(resolve(path))).toBe(resolve(parent));
}

describe('routeMessage', () => {
  it('puts each peer, each channel or everyone in one thread by mode', () => {
    expect(routeMessage(dir, 'per-peer', external('42'))).toEqual({
      threadId: 'peer-telegram.main.42',
      path: join(dir.threads, 'peers', 'telegram.main.42'),
      kind: 'peer',
      peerKey: 'telegram.main.42',
      groupKey: null,
    });
    expect(routeMessage(dir, 'per-peer', external('43')).path).toBe(join(dir.threads, 'peers', 'telegram.main.43'));

    expect(routeMessage(dir, 'per-channel', external('42'))).toEqual({
      threadId: 'channel-telegram.main',
      path: join(dir.threads, 'channels', 'telegram.main'),
      kind: 'channel',
      peerKey: 'telegram.main.42',
      groupKey: null,
    });
    expect(routeMessage(dir, 'per-channel', external('43')).path).toBe(join(dir.threads, 'channels', 'telegram.main'));
    expect(routeMessage(dir, 'per-channel', external('42', 'webchat')).path).toBe(join(dir.threads, 'channels', 'webchat.main'));

    for (const source of [external('42'), external('7', 'webchat')]) {
      expect(routeMessage(dir, 'per-agent', source)).toMatchObject({ threadId: 'main', path: join(dir.threads, 'main') });
    }
    // The route names the session file and the memory files, all inside the agent.
    const route = routeMessage(dir, 'per-peer', external('42'));
    expect(sessionFile(dir, route)).toBe(join(dir.sessions, 'peer-telegram.main.42.jsonl'));
    expect(memoryFiles(dir, route)).toEqual({
      agent: join(dir.memory, 'agent.md'),
      user: join(dir.memory, 'user-telegram.main.42.md'),
      group: null,
      thread: join(dir.memory, 'thread-peer-telegram.main.42.md'),
    });
  });

  it('refuses self and malformed sources', () => {
    expect(() => routeMessage(dir, 'per-peer', 'self')).toThrow(/source self/);
    expect(() => routeMessage(dir, 'per-peer', 'external:telegram:main:dm:42')).toThrow(/invalid source address/);
    expect(() => routeMessage(dir, 'per-peer', 'external:telegram:main:dm:4%2:42')).toThrow(/malformed address segment/);
  });

  it.each([['../x'], ['../../../etc'], ['a:b'], ['a/b'], ['.'], ['..'], ['x'.repeat(300)], ['\u0000'], ['a\u0000b'], ['\u0001\u007f'], ['%2E%2E'], ['peer--0123456789']])(
    'keeps the hostile peer id %j inside threads/ in every mode',
    (peer) => {
      const peerRoute = routeMessage(dir, 'per-peer', external(peer));
      expectInside(peerRoute.path, join(dir.threads, 'peers'));
      expect(peerRoute.threadId).toBe(`peer-${peerRoute.peerKey}`);
      expect(peerRoute.peerKey!.length).toBeLessThanOrEqual(64);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: a NUL is what a path must not hold.
      expect(peerRoute.peerKey).not.toMatch(/[/\u0000]|^\./);
      for (const file of Object.values(memoryFiles(dir, peerRoute))) if (file) expect(dirname(file)).toBe(dir.memory);
      expect(dirname(sessionFile(dir, peerRoute))).toBe(dir.sessions);
      expectInside(routeMessage(dir, 'per-channel', external(peer, 'telegram', 'main')).path, join(dir.threads, 'channels'));
      // Hostile agent ids, conversation ids and types in internal addresses too.
      for (const source of [internal(peer), internal('admin', peer), internal('admin', 'peer-x', peer)]) {
        const agentRoute = routeMessage(dir, 'per-peer', source);
        expectInside(agentRoute.path, join(dir.threads, 'agents'));
        expect(agentRoute.threadId).toBe(`agent-${basename(agentRoute.path)}`);
        for (const file of Object.values(memoryFiles(dir, agentRoute))) if (file) expect(dirname(file)).toBe(dir.memory);
        expect(threadById(dir, agentRoute.threadId)).toEqual(agentRoute);
      }
      // And hostile group ids (and conversation types).
      for (const source of [inGroup(peer, '42'), inGroup('-100', '42', 'telegram', 'main', peer === 'dm' ? 'x' : peer)]) {
        const groupRoute = routeMessage(dir, 'per-peer', source);
        expectInside(groupRoute.path, join(dir.threads, 'sessions'));
        expect(groupRoute.threadId).toBe(`group-${groupRoute.groupKey}`);
        for (const file of Object.values(memoryFiles(dir, groupRoute))) if (file) expect(dirname(file)).toBe(dir.memory);
        expect(dirname(sessionFile(dir, groupRoute))).toBe(dir.sessions);
        expect(threadById(dir, groupRoute.threadId)).toEqual(groupRoute);
      }
    },
  );

  // Mostly short ids over a few troublesome characters (so that collisions have a chance), some arbitrary.
  const id = fc.oneof(
    { arbitrary: fc.string({ unit: fc.constantFrom('a', '.'), minLength: 1, maxLength: 3 }), weight: 4 },
    { arbitrary: fc.string({ unit: fc.constantFrom('a', '.', '%', '2', 'E', '/', ':', '\u0000'), minLength: 1, maxLength: 6 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 80 }).filter((s) => s.isWellFormed()), weight: 1 },
  );
  const sender = fc.oneof(
    fc.record({ kind: fc.constant('external' as const), channelType: id, instance: id, peerId: id }),
    fc.record({ kind: fc.constant('internal' as const), agentId: id, conversationId: id }),
  );
  type Sender = { kind: 'external'; channelType: string; instance: string; peerId: string } | { kind: 'internal'; agentId: string; conversationId: string };
  const sourceOf = (s: Sender) => (s.kind === 'external' ? external(s.peerId, s.channelType, s.instance) : internal(s.agentId, s.conversationId));

  it('never lets two different peer ids of one channel share a thread, and keeps every one inside threads/ (property)', () => {
    fc.assert(
      fc.property(id, id, (a, b) => {
        fc.pre(a !== b);
        const ra = routeMessage(dir, 'per-peer', external(a));
        const rb = routeMessage(dir, 'per-peer', external(b));
        expect(ra.path).not.toBe(rb.path);
        expect(ra.threadId).not.toBe(rb.threadId);
        expectInside(ra.path, join(dir.threads, 'peers'));
        expectInside(rb.path, join(dir.threads, 'peers'));
      }),
      { numRuns: 2000 },
    );
  });

  it('never lets two different senders (or two conversations of an agent) share a per-peer thread or two channels a per-channel thread, whatever the ids (property)', () => {
    fc.assert(
      fc.property(sender, sender, (a, b) => {
        const same = JSON.stringify(a) === JSON.stringify(b);
        const ra = routeMessage(dir, 'per-peer', sourceOf(a));
        const rb = routeMessage(dir, 'per-peer', sourceOf(b));
        expect(ra.path === rb.path).toBe(same);
        expectInside(ra.path, join(dir.threads, a.kind === 'external' ? 'peers' : 'agents'));
        for (const route of [ra, rb]) expect(threadById(dir, route.threadId)).toEqual(route);
        // An agent's conversation is its own thread in every mode; a channel's people share one.
        const channelOf = (s: Sender) => JSON.stringify(s.kind === 'external' ? [s.channelType, s.instance] : s);
        const ca = routeMessage(dir, 'per-channel', sourceOf(a));
        const cb = routeMessage(dir, 'per-channel', sourceOf(b));
        expect(ca.path === cb.path).toBe(channelOf(a) === channelOf(b));
        expectInside(ca.path, join(dir.threads, a.kind === 'external' ? 'channels' : 'agents'));
      }),
      { numRuns: 2000 },
    );
  });

  it('does not mix channels whose names differ only in where a dot falls', () => {
    const paths = [
      routeMessage(dir, 'per-peer', external('d', 'a.b', 'c')).path,
      routeMessage(dir, 'per-peer', external('d', 'a', 'b.c')).path,
      routeMessage(dir, 'per-peer', external('c.d', 'a', 'b')).path,
      routeMessage(dir, 'per-peer', external('p', 'internal', 'x')).path,
      routeMessage(dir, 'per-peer', external('default', 'x', 'dm')).path,
      routeMessage(dir, 'per-peer', inGroup('default', 'p', 'x', 'dm', 'p')).path,
      routeMessage(dir, 'per-peer', internal('x.p')).path,
      routeMessage(dir, 'per-peer', internal('x', 'p')).path,
      routeMessage(dir, 'per-peer', internal('x', 'dm.p', 'p')).path,
      routeMessage(dir, 'per-peer', internal('x', 'p.dm.p')).path,
    ];
    expect(new Set(paths).size).toBe(paths.length);
  });
});

describe('a group conversation', () => {
  const groupKey = 'telegram.main.group.-100';

  it('has its own thread and memory in every mode, shared by its members and apart from their direct messages', () => {
    for (const mode of ['per-peer', 'per-channel', 'per-agent'] as const) {
      const route = routeMessage(dir, mode, inGroup('-100', '42'));
      expect(route, mode).toEqual({ threadId: `group-${groupKey}`, path: join(dir.threads, 'sessions', groupKey), kind: 'group', peerKey: null, groupKey });
      expect(routeMessage(dir, mode, inGroup('-100', '43')), mode).toEqual(route);
      expect(routeMessage(dir, mode, external('42')).path, mode).not.toBe(route.path);
    }
    const route = routeMessage(dir, 'per-peer', inGroup('-100', '42'));
    // The group's memory in place of the person's: a member's own memory file is not among them.
    expect(memoryFiles(dir, route)).toEqual({
      agent: join(dir.memory, 'agent.md'),
      user: null,
      group: join(dir.memory, `group-${groupKey}.md`),
      thread: join(dir.memory, `thread-group-${groupKey}.md`),
    });
    expect(sessionFile(dir, route)).toBe(join(dir.sessions, `group-${groupKey}.jsonl`));
    // Other groups, the same chat id on another channel, another conversation type: other threads.
    const paths = [
      route,
      routeMessage(dir, 'per-peer', inGroup('-200', '42')),
      routeMessage(dir, 'per-peer', inGroup('-100', '42', 'telegram', 'other')),
      routeMessage(dir, 'per-peer', inGroup('-100', '42', 'webchat')),
      routeMessage(dir, 'per-peer', inGroup('-100', '42', 'telegram', 'main', 'channel')),
    ].map((r) => r.path);
    expect(new Set(paths).size).toBe(paths.length);
  });

  it('names its people in the history, as threads of several people do', () => {
    expect(mixesPeople(routeMessage(dir, 'per-peer', inGroup('-100', '42')))).toBe(true);
    expect(mixesPeople(routeMessage(dir, 'per-peer', external('42')))).toBe(false);
    expect(mixesPeople(routeMessage(dir, 'per-channel', external('42')))).toBe(true);
    expect(mixesPeople(routeMessage(dir, 'per-agent', external('42')))).toBe(true);
  });

  const id = fc.oneof(
    { arbitrary: fc.string({ unit: fc.constantFrom('a', '.', '-', '1'), minLength: 1, maxLength: 4 }), weight: 4 },
    { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 80 }).filter((s) => s.isWellFormed()), weight: 1 },
  );
  const conversation = fc.record({ channelType: id, instance: id, conversationType: fc.oneof(fc.constant('dm'), fc.constant('group'), id), conversationId: id, peerId: id });

  it('never shares a thread between two conversations, and threadById maps every thread id back to its thread (property)', () => {
    fc.assert(
      fc.property(conversation, conversation, fc.constantFrom('per-peer', 'per-channel', 'per-agent' as const), (a, b, mode) => {
        const source = (c: typeof a) => inGroup(c.conversationId, c.peerId, c.channelType, c.instance, c.conversationType);
        const ra = routeMessage(dir, mode, source(a));
        const rb = routeMessage(dir, mode, source(b));
        const isGroup = (c: typeof a) => c.conversationType !== 'dm';
        // A group's thread is the group's alone; a direct message never lands in a group's thread.
        if (isGroup(a) || isGroup(b)) {
          const sameGroup =
            isGroup(a) && isGroup(b) && [a.channelType, a.instance, a.conversationType, a.conversationId].join('\0') === [b.channelType, b.instance, b.conversationType, b.conversationId].join('\0');
          expect(ra.path === rb.path).toBe(sameGroup);
        }
        for (const [c, route] of [
          [a, ra],
          [b, rb],
        ] as const) {
          expect(route.kind === 'group').toBe(isGroup(c));
          // A member's memory never enters a group; a direct message gets its sender's.
          expect(route.peerKey === null).toBe(isGroup(c));
          if (isGroup(c)) expectInside(route.path, join(dir.threads, 'sessions'));
          // threadById cannot know a shared thread's sender: all else comes back.
          expect(threadById(dir, route.threadId)).toEqual({ ...route, peerKey: route.kind === 'peer' ? route.peerKey : null });
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("another agent's conversation", () => {
  it("has its own thread for each conversation of the asking agent, in every mode, with no person's memory", () => {
    const fromDirect = internal('admin', 'peer-telegram.main.42');
    for (const mode of ['per-peer', 'per-channel', 'per-agent'] as const) {
      const route = routeMessage(dir, mode, fromDirect);
      const key = 'admin.dm.peer-telegram.main.42';
      expect(route, mode).toEqual({ threadId: `agent-${key}`, path: join(dir.threads, 'agents', key), kind: 'agent', peerKey: null, groupKey: null });
      expect(routeMessage(dir, mode, fromDirect), mode).toEqual(route);
      // admin's group conversation, another agent's, and a person's direct chat: other threads.
      const others = [internal('admin', 'group-telegram.main.group.-100'), internal('warden', 'peer-telegram.main.42'), external('42')].map((source) => routeMessage(dir, mode, source).path);
      expect(new Set([route.path, ...others]).size, mode).toBe(4);
    }
    const route = routeMessage(dir, 'per-peer', fromDirect);
    expect(memoryFiles(dir, route)).toEqual({ agent: join(dir.memory, 'agent.md'), user: null, group: null, thread: join(dir.memory, `thread-${route.threadId}.md`) });
    expect(sessionFile(dir, route)).toBe(join(dir.sessions, `${route.threadId}.jsonl`));
    expect(mixesPeople(route)).toBe(false);
    expect(threadById(dir, route.threadId)).toEqual(route);
  });

  it('is one thread for an agent that asks from no conversation (agent send outside a turn)', () => {
    const route = routeMessage(dir, 'per-peer', internal('warden'));
    expect(route).toMatchObject({ threadId: 'agent-warden.dm.default', path: join(dir.threads, 'agents', 'warden.dm.default'), peerKey: null });
    expect(routeMessage(dir, 'per-agent', internal('warden')).path).toBe(route.path);
  });
});

describe("another agent's answer naming one of our threads", () => {
  it('goes back into that thread when it exists, and never into a non-canonical or missing one', () => {
    const asked = routeMessage(dir, 'per-peer', external('42'));
    // Not created yet: the conversation id names nothing of ours, so it is warden's own conversation.
    expect(routeMessage(dir, 'per-peer', answer('warden', asked.threadId)).path).toBe(join(dir.threads, 'agents', 'warden.reply.peer-telegram.main.42'));
    initThread(asked.path, { home: t.home }).close();
    expect(routeMessage(dir, 'per-peer', answer('warden', asked.threadId))).toEqual(asked);
    expect(routeMessage(dir, 'per-agent', answer('warden', asked.threadId))).toEqual(asked);
    // A question (conversation type dm) from another agent is routed as that agent's own conversation.
    expect(routeMessage(dir, 'per-peer', internal('warden', asked.threadId)).path).toBe(join(dir.threads, 'agents', 'warden.dm.peer-telegram.main.42'));
    // An external source never uses its conversation id to pick a thread.
    expect(
      routeMessage(dir, 'per-peer', formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: asked.threadId, peerId: '43' })).path,
    ).toBe(join(dir.threads, 'peers', 'telegram.main.43'));

    // A question asked from a group's thread is answered there.
    const group = routeMessage(dir, 'per-peer', inGroup('-100', '42'));
    initThread(group.path, { home: t.home }).close();
    expect(routeMessage(dir, 'per-channel', answer('warden', group.threadId))).toEqual(group);
    // And one asked from another agent's conversation (we asked on, to answer it), there.
    const asking = routeMessage(dir, 'per-peer', internal('admin', 'peer-telegram.main.42'));
    initThread(asking.path, { home: t.home }).close();
    expect(routeMessage(dir, 'per-agent', answer('warden', asking.threadId))).toEqual(asking);

    for (const conversation of [
      'group-../x',
      'group-',
      'group-a/b',
      'groups-x',
      'agent-../x',
      'agent-',
      'agents-x',
      'peer-../x',
      'peer-../peers/telegram.main.42',
      'peer-',
      'peer-a/b',
      `peer-${'x'.repeat(70)}`,
      'channel-..',
      'mainx',
      '../threads/main',
      'peers/telegram.main.42',
    ]) {
      expect(threadById(dir, conversation), conversation).toBeNull();
      const route = routeMessage(dir, 'per-peer', answer('warden', conversation));
      expect(route.kind, conversation).toBe('agent');
      expectInside(route.path, join(dir.threads, 'agents'));
    }
    // threads/main/ exists from init, but is a thread only once used.
    expect(existsSync(join(dir.threads, 'main'))).toBe(true);
    expect(routeMessage(dir, 'per-peer', answer('warden', 'main')).path).toBe(join(dir.threads, 'agents', 'warden.reply.main'));
    initThread(join(dir.threads, 'main'), { home: t.home }).close();
    expect(routeMessage(dir, 'per-peer', answer('warden', 'main')).path).toBe(join(dir.threads, 'main'));
    expect(readdirSync(join(dir.threads, 'peers'))).toEqual(['telegram.main.42']);
  });

  it('validates the agent id before touching the disk', () => {
    expect(() => agentDir(t.home, '../helper')).toThrow(/invalid agent id/);
  });
});
