import { relative } from 'node:path';
import { requireAgent } from '../agent/agent-dir.js';
import { storedConversationThreads } from '../agent/lifecycle.js';
import { withAgentThread } from '../agent/threads.js';
import { ClawError } from '../core/errors.js';
import { parseMessageContent } from '../core/message.js';
import type { ThreadEvent } from '../thread/index.js';
import type { ConversationMessage, ConversationSummary, ConversationView } from '../xgw/index.js';
import { forEachAgentThread, newestFirst } from './agent-threads.js';

/** The control page's conversations: each agent's, with their newest messages, and one read whole. */

const MESSAGES = "type = 'message'";
/** Messages a summary shows, and an opened conversation. */
const SUMMARY_MESSAGES = 2;
const VIEW_MESSAGES = 200;

function message(event: ThreadEvent): ConversationMessage {
  let text: string;
  try {
    text = parseMessageContent(event.content).text;
  } catch {
    text = event.content; // stored otherwise: shown as it is
  }
  return { id: event.id, at: event.created_at, from: event.source === 'self' ? 'agent' : 'person', source: event.source, text };
}

export async function conversationSummaries(home: string): Promise<ConversationSummary[]> {
  const found: ConversationSummary[] = [];
  await forEachAgentThread(home, { inbox: false, withoutHeartbeat: true }, async ({ agent, dir, path, thread }) => {
    const last = (await thread.peek({ filter: MESSAGES, last: SUMMARY_MESSAGES })).map(message);
    if (last.length > 0) found.push({ agent, thread: relative(dir.root, path), last });
  });
  return found.sort((a, b) => newestFirst(a.last.at(-1)!.at, b.last.at(-1)!.at));
}

/** One conversation of `agent`, named by its thread's path in the agent's directory: only one of its conversations is ever opened. */
export async function conversationView(home: string, agent: string, thread: string): Promise<ConversationView> {
  const dir = requireAgent(home, agent);
  const path = (await storedConversationThreads(home, dir)).find((candidate) => candidate !== dir.heartbeat && relative(dir.root, candidate) === thread);
  if (!path) throw new ClawError('not_found', `${agent} has no conversation ${JSON.stringify(thread)}`, { suggestion: 'reload the control page' });
  return withAgentThread(home, path, async (opened) => ({ agent, thread, messages: (await opened.peek({ filter: MESSAGES, last: VIEW_MESSAGES })).map(message) }));
}
