import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAddress } from '../core/address.js';
import { errnoCode } from '../core/errors.js';
import type { SessionLine } from '../pai/session.js';
import type { ThreadEvent } from '../thread/types.js';
import type { AgentDir } from './agent-dir.js';
import type { ThreadRoute } from './types.js';

/**
 * The context of one call: the system prompt (IDENTITY.md, the three memory layers, runtime
 * facts) and the recent messages of the thread as session lines. Assembled fresh for every
 * message: the session file is the call's workspace, the thread is the record.
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
    agent: join(dir.memory, 'agent.md'),
    user: route.peerKey ? join(dir.memory, `user-${route.peerKey}.md`) : null,
    group: route.groupKey ? join(dir.memory, `group-${route.groupKey}.md`) : null,
    thread: join(dir.memory, `thread-${route.threadId}.md`),
  };
}

export function sessionFile(dir: AgentDir, route: ThreadRoute): string {
  return join(dir.sessions, `${route.threadId}.jsonl`);
}

export interface SystemPromptInput {
  dir: AgentDir;
  route: ThreadRoute;
  memory: MemoryFiles;
  /** The inbound message's source address. */
  source: string;
  now?: Date;
}

export function buildSystemPrompt({ dir, route, memory, source, now = new Date() }: SystemPromptInput): string {
  const identity = readOptional(dir.identity) ?? `# ${dir.id}\n`;
  const sections = [identity.trim()];
  const layers: [string, string | null][] = [
    ['What I have learned (my agent memory)', readOptional(memory.agent)],
    ['What I know about this person', memory.user ? readOptional(memory.user) : null],
    ['What I know about this group', memory.group ? readOptional(memory.group) : null],
    ['Summary of this conversation so far', readOptional(memory.thread)],
  ];
  for (const [title, text] of layers) if (text?.trim()) sections.push(`## ${title}\n${text.trim()}`);
  sections.push(`## Runtime
- time: ${now.toISOString()}
- agent: ${dir.id} (directory ${dir.root}; workdir ${dir.workdir})
- from: ${describeSource(source)}
- thread: ${route.threadId}${privacyNote(route)}
- memory files: agent ${memory.agent}${memory.user ? `; this person ${memory.user}` : ''}${memory.group ? `; this group ${memory.group}` : ''}`);
  return sections.join('\n\n');
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
    return [{ role: 'user', content: mixedPeople ? `[${describeSource(event.source)}] ${text}` : text }];
  });
}

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

/** A rough token estimate (4 characters a token), enough to decide when to compact. */
export function estimateTokens(...texts: string[]): number {
  return Math.ceil(texts.reduce((sum, text) => sum + text.length, 0) / 4);
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
