import { replyContextFromSource } from '../reply-context.js';
import type { PushInput } from '../../thread/index.js';
import { loadAgentConfig, requireAgent } from '../agent-dir.js';
import { ownerDirectChat } from './owner-approval.js';
import { routeFor } from '../router.js';
import type { NoticeKind } from '../../core/message.js';
import { hasAgentThread, pushOnce, withAgentThread } from '../threads.js';

/**
 * Puts a message into the owner's direct chat with an agent (the one they wrote in last), for
 * `agent deliver` to send like an answer; false when the owner has no direct chat with it yet.
 * For what speaks to the owner from outside a run: a system agent's sweep (a notice), a
 * heartbeat's finding (the agent's own words, no notice). A message with a `key` is put there
 * once: a sweep that tells again what it told before it crashed tells nothing.
 */
export async function tellOwnerOf(home: string, id: string, text: string, notice?: NoticeKind, key?: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const owner = await withAgentThread(home, dir.inbox, (inbox) => ownerDirectChat(inbox, config.policy), env);
  if (owner === null) return false;
  const route = routeFor(dir, config, owner);
  if (!(await hasAgentThread(home, route.path, env))) return false;
  await withAgentThread(home, route.path, (thread) => pushOnce(thread, ownerMessage(owner, text, notice, key)), env);
  return true;
}

/** The message that speaks to the owner in their direct chat (`owner`, its source address), sent like an answer. */
export function ownerMessage(owner: string, text: string, notice?: NoticeKind, key?: string): PushInput {
  return {
    source: 'self',
    type: 'message',
    content: JSON.stringify({ text, attachments: [], reply_context: replyContextFromSource(owner), ...(notice ? { notice } : {}) }),
    idempotency_key: key,
  };
}
