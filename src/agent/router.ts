import { existsSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { parseAddress } from '../core/address.js';
import { ClawError } from '../core/errors.js';
import { isSlug, slug } from '../core/slug.js';
import type { AgentDir } from './agent-dir.js';
import { personKey, personOf, type DmScope, type Identities } from './identities.js';
import type { AgentConfig, RoutingMode, ThreadKind, ThreadRoute } from './types.js';

/**
 * Routes an inbox message to a conversation thread by its `source` address — never by an
 * optional field of the content (DESIGN §9). Thread directories are slugs, so hostile ids
 * (`../x`, `a:b`, 300 characters) stay inside `threads/` and never collide.
 *
 * A conversation is a conversation: a group (an external conversation that is not a `dm`) always
 * has a thread of its own, whatever the mode, so that nobody's direct messages or memory reach
 * it, and it answers in the group. So has each conversation of another agent that asks us (`agent
 * send` names the asking agent's thread as conversation id): what a person told that agent in one
 * conversation never reaches our answer in another.
 *
 * - group:       threads/sessions/<type>.<instance>.<conv type>.<conv id>/   thread id `group-…`
 * - agent:       threads/agents/<agent>.<conv type>.<conv id>/               thread id `agent-…`
 *
 * The mode decides how people's direct messages are grouped:
 *
 * - per-peer:    threads/peers/<type>.<instance>.<peer>/   thread id `peer-…` (`dm_scope: person`:
 *                threads/peers/person.<name>/ for every address linked to the person)
 * - per-channel: threads/channels/<type>.<instance>/       thread id `channel-…`
 * - per-agent:   threads/main/                             thread id `main`
 *
 * An address linked to a person (identities.ts) keeps its thread but gets the person's memory
 * (user-person.<name>.md), whatever the mode; nothing else is ever merged.
 *
 * Another agent's answer to our question (`agent send`) comes with the conversation type
 * `reply` (ANSWER_CONVERSATION) and the asking thread's id as conversation id: it goes back into
 * that thread; one that names no thread of ours is routed like a question, as that agent's
 * conversation.
 */
export const ANSWER_CONVERSATION = 'reply';

/** The external conversation type of a direct chat; every other type is a group of people. */
const DIRECT = 'dm';

/** Thread kind → directory under threads/ (`sessions` is the seed's name for per-conversation threads). */
const FOLDERS = { peer: 'peers', channel: 'channels', group: 'sessions', agent: 'agents' } as const satisfies Record<Exclude<ThreadKind, 'main'>, string>;

/** The directories under threads/ that hold a thread each (threads/main/ is a thread itself). */
export const THREAD_FOLDERS: readonly string[] = Object.values(FOLDERS);

/** Linked people (identities.ts): their memory, and under `dm_scope: person` their direct thread. */
export interface PeopleOptions {
  identities: Identities;
  dmScope: DmScope;
}

/** routeMessage under an agent's config: its routing mode and the people it knows. */
export function routeFor(dir: AgentDir, config: Pick<AgentConfig, 'routing' | 'identities'>, source: string): ThreadRoute {
  return routeMessage(dir, config.routing.default, source, { identities: config.identities, dmScope: config.routing.dm_scope });
}

export function routeMessage(dir: AgentDir, mode: RoutingMode, source: string, people?: PeopleOptions): ThreadRoute {
  const address = parseAddress(source);
  if (address.kind === 'self') {
    throw new ClawError('invalid', 'an inbox message has the source self', { suggestion: "push inbox messages with the sender's address" });
  }
  if (address.kind === 'internal' && address.conversationType === ANSWER_CONVERSATION) {
    const asked = threadById(dir, address.conversationId, people?.identities);
    if (asked && existsSync(join(asked.path, 'events.db'))) return asked; // a thread, not just a directory (threads/main/ is made by init)
  }
  // '.' joins the parts, so it is escaped in all but the last one: two senders never share a key.
  if (address.kind === 'internal') {
    return inFolder(dir, 'agent', slug(`${dotless(address.agentId)}.${dotless(address.conversationType)}.${address.conversationId}`));
  }
  const channel = `${dotless(address.channelType)}.${dotless(address.instance)}`;
  if (address.conversationType !== DIRECT) {
    return inFolder(dir, 'group', slug(`${channel}.${dotless(address.conversationType)}.${address.conversationId}`));
  }
  // A linked person's key names their memory in every thread of theirs, whichever address wrote.
  const person = people ? personOf(people.identities, address) : null;
  const addressKey = slug(`${channel}.${address.peerId}`);
  const peerKey = person === null ? addressKey : personKey(person);
  switch (mode) {
    case 'per-peer':
      if (person !== null && people?.dmScope === 'person') return inFolder(dir, 'peer', peerKey);
      return { ...inFolder(dir, 'peer', addressKey), peerKey };
    case 'per-channel':
      return { ...inFolder(dir, 'channel', slug(channel)), peerKey };
    case 'per-agent':
      return { ...mainThread(dir), peerKey };
  }
}

/**
 * The thread a thread id names, or null for an id that is not one of ours (or not a slug). With
 * the agent's `identities`, the direct thread of an address linked to a person names the person's
 * memory, as routeFor does.
 */
export function threadById(dir: AgentDir, threadId: string, identities: Identities = {}): ThreadRoute | null {
  if (threadId === 'main') return mainThread(dir);
  const match = /^(peer|channel|group|agent)-(.+)$/.exec(threadId);
  if (!match || !isSlug(match[2]!)) return null;
  const route = inFolder(dir, match[1] as keyof typeof FOLDERS, match[2]!);
  const person = route.kind === 'peer' ? Object.keys(identities).find((name) => identities[name]!.some((address) => addressKey(address) === route.peerKey)) : undefined;
  return person === undefined ? route : { ...route, peerKey: personKey(person) };
}

/** The key routeMessage gives a linked address (`<type>:<instance>:<peer id>`) of a direct chat. */
function addressKey(address: string): string {
  const [type, instance] = address.split(':', 2) as [string, string];
  return slug(`${dotless(type)}.${dotless(instance)}.${address.slice(type.length + instance.length + 2)}`);
}

/** The id of the thread in `path` (a directory under threads/), or null for none of ours. */
export function threadIdOfPath(dir: AgentDir, path: string): string | null {
  const [folder, key, ...rest] = relative(dir.threads, path).split(sep);
  if (folder === 'main' && key === undefined) return 'main';
  const kind = (Object.keys(FOLDERS) as (keyof typeof FOLDERS)[]).find((k) => FOLDERS[k] === folder);
  return kind && key && rest.length === 0 && isSlug(key) ? `${kind}-${key}` : null;
}

/** A thread where several people write: their messages are named in the history. */
export function mixesPeople(route: ThreadRoute): boolean {
  return route.kind !== 'peer' && route.kind !== 'agent';
}

/**
 * A thread under threads/<folder>/<key>. The key names the memory a call gets: a peer thread's
 * person (user-<key>.md), a group's own (group-<key>.md); a channel thread's senders differ, so
 * routeMessage names the sender's. An agent's conversation gets no person's memory: the asking
 * agent is not a person, and a file of its own would carry what one of its conversations told us
 * into the others (the thread's summary, thread-<id>.md, is the conversation's alone).
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
