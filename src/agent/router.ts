import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAddress } from '../core/address.js';
import { ClawError } from '../core/errors.js';
import { isSlug, slug } from '../core/slug.js';
import type { AgentDir } from './agent-dir.js';
import type { RoutingMode, ThreadKind, ThreadRoute } from './types.js';

/**
 * Routes an inbox message to a conversation thread by its `source` address — never by an
 * optional field of the content (DESIGN §9). Thread directories are slugs, so hostile ids
 * (`../x`, `a:b`, 300 characters) stay inside `threads/` and never collide.
 *
 * A conversation is a conversation: a group (an external conversation that is not a `dm`) always
 * has a thread of its own, whatever the mode, so that nobody's direct messages or memory reach
 * it, and it answers in the group:
 *
 * - group:       threads/sessions/<type>.<instance>.<conv type>.<conv id>/   thread id `group-…`
 *
 * The mode decides how direct messages (and other agents' questions) are grouped:
 *
 * - per-peer:    threads/peers/<type>.<instance>.<peer>/   thread id `peer-…`
 * - per-channel: threads/channels/<type>.<instance>/       thread id `channel-…`
 * - per-agent:   threads/main/                             thread id `main`
 *
 * Another agent's answer to our question (`agent send`) comes with the conversation type
 * `reply` (ANSWER_CONVERSATION) and the asking thread's id as conversation id: it goes back into
 * that thread. Questions from other agents (type `dm`) are routed like any peer's messages.
 */
export const ANSWER_CONVERSATION = 'reply';

/** The external conversation type of a direct chat; every other type is a group of people. */
const DIRECT = 'dm';

/** Thread kind → directory under threads/ (`sessions` is the seed's name for per-conversation threads). */
const FOLDERS = { peer: 'peers', channel: 'channels', group: 'sessions' } as const satisfies Record<Exclude<ThreadKind, 'main'>, string>;

export function routeMessage(dir: AgentDir, mode: RoutingMode, source: string): ThreadRoute {
  const address = parseAddress(source);
  if (address.kind === 'self') {
    throw new ClawError('invalid', 'an inbox message has the source self', { suggestion: 'push inbox messages with the sender\'s address' });
  }
  if (address.kind === 'internal' && address.conversationType === ANSWER_CONVERSATION) {
    const asked = threadById(dir, address.conversationId);
    if (asked && existsSync(join(asked.path, 'events.db'))) return asked; // a thread, not just a directory (threads/main/ is made by init)
  }
  // '.' joins the parts, so it is escaped in all but the last one: two senders never share a key.
  const channel = address.kind === 'external' ? `${dotless(address.channelType)}.${dotless(address.instance)}` : 'internal';
  if (address.kind === 'external' && address.conversationType !== DIRECT) {
    return inFolder(dir, 'group', slug(`${channel}.${dotless(address.conversationType)}.${address.conversationId}`));
  }
  const peerKey = slug(`${channel}.${address.kind === 'external' ? address.peerId : dotless(address.agentId)}`);
  switch (mode) {
    case 'per-peer':
      return inFolder(dir, 'peer', peerKey);
    case 'per-channel':
      return { ...inFolder(dir, 'channel', slug(channel)), peerKey };
    case 'per-agent':
      return { ...mainThread(dir), peerKey };
  }
}

/** The thread a thread id names, or null for an id that is not one of ours (or not a slug). */
export function threadById(dir: AgentDir, threadId: string): ThreadRoute | null {
  if (threadId === 'main') return mainThread(dir);
  const match = /^(peer|channel|group)-(.+)$/.exec(threadId);
  if (!match || !isSlug(match[2]!)) return null;
  return inFolder(dir, match[1] as keyof typeof FOLDERS, match[2]!);
}

/** A thread where several people write: their messages are named in the history. */
export function mixesPeople(route: ThreadRoute): boolean {
  return route.kind !== 'peer';
}

/**
 * A thread under threads/<folder>/<key>. The key names the memory a call gets: a peer thread's
 * person (user-<key>.md), a group's own (group-<key>.md); a channel thread's senders differ, so
 * routeMessage names the sender's.
 */
function inFolder(dir: AgentDir, kind: keyof typeof FOLDERS, key: string): ThreadRoute {
  return {
    threadId: `${kind}-${key}`,
    path: join(dir.threads, FOLDERS[kind], key),
    kind,
    peerKey: kind === 'peer' ? key : null,
    groupKey: kind === 'group' ? key : null,
  };
}

function mainThread(dir: AgentDir): ThreadRoute {
  return { threadId: 'main', path: join(dir.threads, 'main'), kind: 'main', peerKey: null, groupKey: null };
}

function dotless(part: string): string {
  return part.replaceAll('%', '%25').replaceAll('.', '%2E');
}
