import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { parseAddress } from '../core/address.js';
import { GroupContextEntrySchema, type GroupContextEntry } from '../core/message.js';
import { isContainedPathError, kindContained, type ContainedPathError } from '../core/contained-fs.js';
import { errnoCode } from '../core/errors.js';
import type { SessionLine } from '../pai/index.js';
import type { ThreadEvent } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { capMemory, type MemoryTruncation } from './memory/memory-caps.js';
import { dailyFolder, readMemoryOrEmpty } from './memory/memory-store.js';
import type { MemoryLayer, ThreadRoute } from './types.js';

/**
 * The context of one call: the system prompt (IDENTITY.md, the three memory layers each up to its
 * cap, runtime facts) and the recent messages of the thread as session lines. Assembled fresh for
 * every message: the session file is the call's workspace, the thread is the record.
 */
export interface MemoryFiles {
  agent: string;
  /** The person's memory; null in a group (it is private), for an agent, and where the sender is not known. */
  user: string | null;
  /** A group's own memory, in place of a person's; null outside groups. */
  group: string | null;
  thread: string;
}

export function memoryFiles(dir: AgentDir, route: ThreadRoute): MemoryFiles {
  return {
    agent: agentMemoryFile(dir),
    user: route.peerKey ? join(dir.memory, `user-${route.peerKey}.md`) : null,
    group: route.groupKey ? join(dir.memory, `group-${route.groupKey}.md`) : null,
    thread: join(dir.memory, `thread-${route.threadId}.md`),
  };
}

/**
 * The memory file a conversation holds as its own, written for it (memory-flush.ts): the
 * person's in their direct thread, the group's in a group. None in a thread several people's
 * direct chats share (it has no one person) nor in another agent's conversation (it has none).
 */
export function ownMemoryFile(route: ThreadRoute, memory: MemoryFiles): string | null {
  if (route.kind === 'peer') return memory.user;
  if (route.kind === 'group') return memory.group;
  return null;
}

/** The agent's own memory, in every conversation's prompt. */
export function agentMemoryFile(dir: AgentDir): string {
  return join(dir.memory, 'agent.md');
}

/** Under memory/: the summaries `/new` saves, `<tid>/<time>.md` (fresh-conversation.ts). */
export const CONVERSATIONS_DIR = 'conversations';

export function sessionFile(dir: AgentDir, route: ThreadRoute): string {
  return join(dir.sessions, `${route.threadId}.jsonl`);
}

export interface SystemPromptInput {
  dir: AgentDir;
  route: ThreadRoute;
  memory: MemoryFiles;
  /** Tokens of each memory layer the prompt may hold. */
  caps: Record<MemoryLayer, number>;
  /** The inbound message's source address. */
  source: string;
  /** What the runtime facts say of the commands this message's turn may run (tool-policy.ts). */
  commands?: string;
  /** Where its commands run and keep files (sandbox-profile.ts turnWorkdir); the agent's workdir when not given. */
  workdir?: string;
  now?: Date;
}

export interface SystemPrompt {
  text: string;
  /** The memory files that were cut to their caps. */
  truncated: MemoryTruncation[];
  /** The memory files left out because they are links (or not plain files): a command may have planted them. */
  refused: ContainedPathError[];
}

export function buildSystemPrompt({ dir, route, memory, caps, source, commands, workdir = dir.workdir, now = new Date() }: SystemPromptInput): SystemPrompt {
  const sections = [identityText(dir)];
  const truncated: MemoryTruncation[] = [];
  const refused: ContainedPathError[] = [];
  // A group's memory stands where a person's would: it takes the person cap.
  const layers: [MemoryLayer, string, string | null][] = [
    ['agent', 'What I have learned (my agent memory)', memory.agent],
    ['person', 'What I know about this person', memory.user],
    ['person', 'What I know about this group', memory.group],
    ['conversation', 'Summary of this conversation so far', memory.thread],
  ];
  for (const [layer, title, file] of layers) {
    const text = file ? readMemoryOrEmpty(dir.root, file, (error) => refused.push(error)).trim() : undefined;
    if (!file || !text) continue;
    const capped = capMemory(layer, file, text, caps[layer]);
    if (capped.truncation) truncated.push(capped.truncation);
    sections.push(`## ${title}\n${capped.text}`);
  }
  sections.push(`## Runtime
- time: ${now.toISOString()}
- agent: ${dir.id} (directory ${dir.root}; workdir ${workdir}${workdir === dir.workdir ? '' : ", this conversation's own"})
- from: ${describeSource(source)}
- thread: ${route.threadId}${privacyNote(route)}${commands ? `\n- commands: ${commands}\n- search my memory and this conversation: agent memory search ${dir.id} "<words>"; send a file with my answer: agent attach <file>` : ''}
- memory files: agent ${memory.agent}${memory.user ? `; this person ${memory.user}` : ''}${memory.group ? `; this group ${memory.group}` : ''}${dailyNotes(dir, route, memory)}${earlierConversations(dir, route)}`);
  return { text: sections.join('\n\n'), truncated, refused };
}

/** IDENTITY.md, the part of the system prompt no cap cuts. */
export function identityText(dir: AgentDir): string {
  return (readOptional(dir.identity) ?? `# ${dir.id}\n`).trim();
}

/** Where the daily notes of this conversation's person or group are, if it has any (memory-flush.ts). */
function dailyNotes(dir: AgentDir, route: ThreadRoute, memory: MemoryFiles): string {
  const file = ownMemoryFile(route, memory);
  const folder = file ? dailyFolder(dir.memory, file) : null;
  return folder && isFolder(dir, folder) ? `\n- daily notes of this ${route.kind === 'group' ? 'group' : 'person'}, one file a day (memory search finds them): ${folder}/` : '';
}

/** Where this thread's earlier conversations (before a `/new`) are summarised, if it had any. */
function earlierConversations(dir: AgentDir, route: ThreadRoute): string {
  const folder = join(dir.memory, CONVERSATIONS_DIR, route.threadId);
  return isFolder(dir, folder) ? `\n- summaries of this conversation's earlier parts (before a /new): ${folder}/` : '';
}

/** A folder under memory/ that is one (a link in its place or on its way is not). */
function isFolder(dir: AgentDir, folder: string): boolean {
  try {
    return kindContained(dir.root, folder) === 'dir';
  } catch (error) {
    if (isContainedPathError(error)) return false;
    throw error;
  }
}

/**
 * What the runtime facts tell the model to keep out of a group or an agent's conversation: everyone
 * in a group reads the answer; an agent's conversation has no memory file of its own, and what it
 * tells would reach every conversation through the agent memory.
 */
function privacyNote(route: ThreadRoute): string {
  if (route.kind === 'group') return '\n- a group conversation: everyone in it reads my answer, so what a person told me in private stays out of it';
  if (route.kind === 'agent') return '\n- one conversation of another agent: what it tells me about people stays out of my agent memory, which every conversation reads';
  return '';
}

/**
 * Thread messages as session lines: the agent's own as `assistant`, everyone else's as `user`
 * (named, where a thread mixes people).
 */
export function historyLines(events: readonly ThreadEvent[], mixedPeople: boolean): SessionLine[] {
  return events.flatMap((event): SessionLine[] => {
    if (event.type !== 'message') return [];
    const text = messageText(event.content);
    if (event.source === 'self') return [{ role: 'assistant', content: text }];
    const said = withGroupContext(text, event);
    return [{ role: 'user', content: mixedPeople ? spokenBy(event.source, said) : said }];
  });
}

/** Someone's words as a thread that mixes people carries them: with who said them. */
export function spokenBy(source: string, text: string): string {
  return `[${describeSource(source)}] ${text}`;
}

/**
 * A group message's text with the group's pending context before it: what was said in the group,
 * not to me, since a message last reached me there (content `group_context`, which xgw hands
 * with the next message that addresses me). Shown with that message, in its turn and in the
 * history after, never again as new; and only where the message comes from a group, whatever a
 * direct message's content says.
 */
export function withGroupContext(text: string, event: Pick<ThreadEvent, 'source' | 'content'>): string {
  const entries = groupContextOf(event);
  if (entries.length === 0) return text;
  const lines = entries.map(({ at, name, peer_id, text: said }) => {
    const who = name ? `${name} (${peer_id})` : peer_id;
    return `- ${at.slice(0, 16).replace('T', ' ')} ${who.replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, ' ')}: ${said.replaceAll('\n', '\n  ')}`;
  });
  return `Since you last spoke in this group (said among its members, not to you):\n${lines.join('\n')}\n\nTo you:\n${text}`;
}

function groupContextOf({ source, content }: Pick<ThreadEvent, 'source' | 'content'>): GroupContextEntry[] {
  try {
    const address = parseAddress(source);
    if (address.kind !== 'external' || address.conversationType === 'dm') return [];
    const parsed = GroupContextSchema.safeParse((JSON.parse(content) as { group_context?: unknown }).group_context);
    return parsed.success ? parsed.data : [];
  } catch {
    return []; // a plain-text message pushed by hand, or a source that is no address
  }
}

const GroupContextSchema = z.array(GroupContextEntrySchema);

/** The text of a message event's content (raw content when it is not the JSON shape). */
export function messageText(content: string): string {
  try {
    const parsed = JSON.parse(content) as { text?: unknown };
    if (typeof parsed.text === 'string') return parsed.text;
  } catch {
    // a plain-text message pushed by hand
  }
  return content;
}

function describeSource(source: string): string {
  try {
    const address = parseAddress(source);
    if (address.kind === 'external') return `${address.peerId} via ${address.channelType}:${address.instance} (${address.conversationType} ${address.conversationId})`;
    if (address.kind === 'internal') return `agent ${address.agentId}`;
    return 'myself';
  } catch {
    return source;
  }
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
}
