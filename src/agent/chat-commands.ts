import { parseAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import type { StoredThread, ThreadEvent } from '../thread/index.js';

/**
 * Chat commands: a person's message that the runtime answers itself, without the model.
 * `/name`, optionally in Telegram's `/name@botname` form, optionally followed by words (ignored,
 * but for the code of `/approve` and `/deny`), letters in any case (phones capitalise the first one). Any other `/x` is not a command and goes
 * to the model as text.
 */
export const CHAT_COMMANDS = {
  new: 'start a fresh conversation; a summary of this one is saved to memory',
  reset: 'start a fresh conversation without saving a summary',
  stop: 'stop the turn running for this conversation (and what waits before this message)',
  status: "the model, usage today and the queue (to anyone but the owner: this conversation's usage today)",
  usage: "this conversation's usage today and in total",
  approve: "<code>: let a command that waits for the owner's approval run, or apply a proposed change (the owner's direct chat only)",
  deny: "<code>: refuse a command that waits for the owner's approval, or drop a proposed change",
  tasks: "this conversation's background tasks (agent delegate); /tasks stop <id> stops one",
  model: '[name]: the models allowed here, or switch this conversation to one; /model default goes back (the owner only)',
  think: 'off|low|medium|high: how hard a model that can reason thinks in this conversation (the owner only)',
  compact: '[instructions]: fold this conversation into its summary now, the summariser told what to keep',
  verbose: 'on|off: show the commands the agent runs in this chat while it works (on by default)',
  queue: 'collect|steer|followup|interrupt: how messages sent close together or while the agent works are taken',
  help: 'this list',
} as const;

export type ChatCommand = keyof typeof CHAT_COMMANDS;

const COMMAND = /^\/([A-Za-z]+)(?:@[A-Za-z0-9_]+)?(?:\s|$)/;

/** The command a text is, or null (for any text: it never throws). */
export function parseChatCommand(text: string): ChatCommand | null {
  const name = COMMAND.exec(text.trim())?.[1]?.toLowerCase();
  return name !== undefined && Object.hasOwn(CHAT_COMMANDS, name) ? (name as ChatCommand) : null;
}

/** The first word after the command (`/approve k3x9p` → `k3x9p`), or null. */
export function chatCommandArgument(text: string): string | null {
  return /^\/[A-Za-z]+(?:@[A-Za-z0-9_]+)?\s+(\S+)/.exec(text.trim())?.[1] ?? null;
}

/**
 * The command an inbox or thread message is, or null. Only a person counts (an external source):
 * another agent's text — its answer to our question comes into the asking conversation — never
 * resets or stops a person's conversation. Outside a direct chat, a command counts only when the
 * message addressed us: the channel says so in `addressed` (Telegram: a mention, a reply to the
 * bot, or `/cmd@botname`); a group `/status` meant for another bot goes to the model as text.
 */
export function chatCommandOf(event: Pick<ThreadEvent, 'source' | 'content'>): ChatCommand | null {
  // Cheap first: most messages are not commands, and the stop watch looks at every new one.
  if (!event.content.includes('/')) return null;
  let address;
  let content;
  try {
    address = parseAddress(event.source);
    content = parseMessageContent(event.content);
  } catch {
    return null;
  }
  if (address.kind !== 'external') return null;
  if (address.conversationType !== 'dm' && content.addressed !== true) return null;
  return parseChatCommand(content.text);
}

/**
 * Messages without the chat commands and the runtime's answers to them: the model's conversation
 * is what the model took part in (a `/status` and its figures are not). An answer is known by the
 * message it answers, which may lie before `events` (the `/new` a history starts after).
 */
export async function withoutChatCommands(thread: StoredThread, events: readonly ThreadEvent[]): Promise<ThreadEvent[]> {
  const byId = new Map(events.map((event) => [event.id, event]));
  const isCommand = (event: ThreadEvent | undefined) => event !== undefined && event.type === 'message' && chatCommandOf(event) !== null;
  // The commands answered whose message lies before `events`: read from the thread, each once.
  const earlier = [...new Set(events.filter((event) => event.source === 'self').map(inReplyTo))].filter((id) => id > 0 && !byId.has(id));
  for (const id of earlier) {
    const found = (await thread.peek({ afterId: id - 1, limit: 1 })).find((event) => event.id === id);
    if (found) byId.set(id, found);
  }
  const answersCommand = (event: ThreadEvent) => {
    if (event.source !== 'self') return false;
    const id = inReplyTo(event);
    return id > 0 && isCommand(byId.get(id));
  };
  return events.filter((event) => !isCommand(event) && !answersCommand(event));
}

function inReplyTo(event: ThreadEvent): number {
  try {
    return parseMessageContent(event.content).in_reply_to ?? 0;
  } catch {
    return 0;
  }
}

/** The `/help` text. */
export function chatCommandHelp(): string {
  return ['Commands:', ...Object.entries(CHAT_COMMANDS).map(([name, what]) => `/${name} - ${what}`), 'Anything else goes to the agent.'].join('\n');
}
