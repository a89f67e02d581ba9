import { relative } from 'node:path';
import { requireAgent } from '../agent/agent-dir.js';
import { conversationThreads } from '../agent/lifecycle.js';
import { ClawError } from '../core/errors.js';
import { parseMessageContent } from '../core/message.js';
import { openThread, type ThreadEvent } from '../thread/index.js';
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

export function conversationSummaries(home: string): ConversationSummary[] {
  const found: ConversationSummary[] = [];
  forEachAgentThread(
    home,
    (dir) => conversationThreads(dir).filter((path) => path !== dir.heartbeat),
    ({ agent, dir, path, thread }) => {
      const last = thread.peek({ filter: MESSAGES, last: SUMMARY_MESSAGES }).map(message);
      if (last.length > 0) found.push({ agent, thread: relative(dir.root, path), last });
    },
  );
  return found.sort((a, b) => newestFirst(a.last.at(-1)!.at, b.last.at(-1)!.at));
}

/** One conversation of `agent`, named by its thread's path in the agent's directory: only one of its conversations is ever opened. */
export function conversationView(home: string, agent: string, thread: string): ConversationView {
  const dir = requireAgent(home, agent);
  const path = conversationThreads(dir).find((candidate) => candidate !== dir.heartbeat && relative(dir.root, candidate) === thread);
  if (!path) throw new ClawError('not_found', `${agent} has no conversation ${JSON.stringify(thread)}`, { suggestion: 'reload the control page' });
  const opened = openThread(path, { home });
  try {
    return { agent, thread, messages: opened.peek({ filter: MESSAGES, last: VIEW_MESSAGES }).map(message) };
  } finally {
    opened.close();
  }
}
