import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAddress } from '../core/address.js';
import { ClawError } from '../core/errors.js';
import { slug } from '../core/slug.js';
import type { AgentDir } from './agent-dir.js';
import type { RoutingMode, ThreadRoute } from './types.js';

/**
 * Routes an inbox message to a conversation thread by its `source` address — never by an
 * optional field of the content (DESIGN §9). Thread directories are slugs, so hostile peer ids
 * (`../x`, `a:b`, 300 characters) stay inside `threads/` and never collide.
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

export function routeMessage(dir: AgentDir, mode: RoutingMode, source: string): ThreadRoute {
  const address = parseAddress(source);
  if (address.kind === 'self') {
    throw new ClawError('invalid', 'an inbox message has the source self', { suggestion: 'push inbox messages with the sender\'s address' });
  }
  if (address.kind === 'internal' && address.conversationType === ANSWER_CONVERSATION) {
    const asked = threadById(dir, address.conversationId);
    if (asked && existsSync(join(asked.path, 'events.db'))) return asked; // a thread, not just a directory (threads/main/ is made by init)
  }
  // '.' joins the parts, so it is escaped in all but the peer id: two senders never share a key.
  const [channel, peer] =
    address.kind === 'external'
      ? [`${dotless(address.channelType)}.${dotless(address.instance)}`, address.peerId]
      : ['internal', dotless(address.agentId)];
  const peerKey = slug(`${channel}.${peer}`);
  switch (mode) {
    case 'per-peer':
      return { threadId: `peer-${peerKey}`, path: join(dir.threads, 'peers', peerKey), peerKey };
    case 'per-channel': {
      const leaf = slug(channel);
      return { threadId: `channel-${leaf}`, path: join(dir.threads, 'channels', leaf), peerKey };
    }
    case 'per-agent':
      return { threadId: 'main', path: join(dir.threads, 'main'), peerKey };
  }
}

/** The thread a thread id names, or null for an id that is not one of ours (or not canonical). */
export function threadById(dir: AgentDir, threadId: string): ThreadRoute | null {
  if (threadId === 'main') return { threadId, path: join(dir.threads, 'main'), peerKey: null };
  const match = /^(peer|channel)-(.+)$/.exec(threadId);
  if (!match || slug(match[2]!) !== match[2]) return null;
  const [, kind, leaf] = match as unknown as [string, 'peer' | 'channel', string];
  return { threadId, path: join(dir.threads, kind === 'peer' ? 'peers' : 'channels', leaf), peerKey: kind === 'peer' ? leaf : null };
}

function dotless(part: string): string {
  return part.replaceAll('%', '%25').replaceAll('.', '%2E');
}
