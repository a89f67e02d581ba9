import { parseAddress } from '../core/address.js';
import { parseMessageContent, type Attachment, type ReplyContext } from '../core/message.js';
import type { StoredThread, ThreadEvent } from '../thread/index.js';
import { messageText } from './context.js';
import { ANSWER_CONVERSATION } from './router.js';
import type { ErrorRecord } from './types.js';
import { push } from './threads.js';

/**
 * Where an answer goes. A person's (or an agent's) message is answered where it came from. Another
 * agent's answer to our question (`agent send`) is passed on to the message that asked it — the
 * question and the answer carry its event id (`asking_event_id`) — never to whoever wrote last:
 * in a thread of many people, or after the person wrote in a group meanwhile, that would tell a
 * private answer to someone else.
 */
export interface Inbound {
  text: string;
  /** Files that came with it (xgw stores them in the agent's `files/`). */
  attachments: Attachment[];
  replyContext: ReplyContext | null;
  /** It answers a message of ours (an agent's reply to `agent send`). */
  isReply: boolean;
  source: string;
}

/** The inbound message's text and where an answer goes: its reply_context, or its source address. */
export function readInbound(event: ThreadEvent): Inbound {
  let content;
  try {
    content = parseMessageContent(event.content);
  } catch {
    return { text: messageText(event.content), attachments: [], replyContext: replyContextFromSource(event.source), isReply: isAnswer(event.source), source: event.source };
  }
  return {
    text: content.text,
    attachments: content.attachments,
    replyContext: trustedReplyContext(content.reply_context, event.source),
    isReply: isAnswer(event.source),
    source: event.source,
  };
}

export interface AnswerTarget {
  /** The message the answer is for: the inbound one, or the one that asked the agent that answers. */
  eventId: number | null;
  /** Where the answer goes; null: it is kept in the thread. */
  replyContext: ReplyContext | null;
  /** Why an agent's answer cannot be passed on (it is kept in the thread, and this recorded). */
  problem?: string;
}

export async function answerTarget(thread: StoredThread, inbound: Inbound, inboundId: number): Promise<AnswerTarget> {
  if (!inbound.isReply) return { eventId: inboundId, replyContext: inbound.replyContext };
  const context = inbound.replyContext;
  const agent = context?.kind === 'internal' ? context.agent_id : inbound.source;
  const askingId = context?.kind === 'internal' ? context.asking_event_id : undefined;
  if (askingId === undefined) {
    return {
      eventId: null,
      replyContext: null,
      problem: `the answer of agent ${agent} names no asking message (it was asked without one, by an older agent send or by hand), so it is not passed on to anyone`,
    };
  }
  const [asking] = askingId < inboundId ? await thread.peek({ afterId: askingId - 1, limit: 1 }) : [];
  if (asking?.id !== askingId || asking.type !== 'message' || asking.source === 'self' || isAnswer(asking.source)) {
    return { eventId: null, replyContext: null, problem: `the answer of agent ${agent} names event ${askingId}, which is no earlier question in this thread, so it is not passed on to anyone` };
  }
  return { eventId: askingId, replyContext: readInbound(asking).replyContext };
}

function isAnswer(source: string): boolean {
  try {
    const address = parseAddress(source);
    return address.kind === 'internal' && address.conversationType === ANSWER_CONVERSATION;
  } catch {
    return false;
  }
}

/**
 * Where an answer may go is decided by the source address; the content's reply_context only adds
 * what the address cannot carry (the platform message id to quote, the asking message of a
 * question), and only when it names the same conversation and sender: an inbox writer cannot
 * redirect the agent's answer.
 */
function trustedReplyContext(claimed: ReplyContext | undefined, source: string): ReplyContext | null {
  const derived = replyContextFromSource(source);
  if (!claimed || !derived || claimed.kind !== derived.kind) return derived;
  if (claimed.kind === 'external' && derived.kind === 'external') {
    const same = claimed.channel_id === derived.channel_id && claimed.conversation_id === derived.conversation_id && claimed.peer_id === derived.peer_id;
    return same && claimed.message_id ? { ...derived, message_id: claimed.message_id } : derived;
  }
  if (claimed.kind === 'internal' && derived.kind === 'internal') {
    const same = claimed.agent_id === derived.agent_id && claimed.conversation_type === derived.conversation_type && claimed.conversation_id === derived.conversation_id;
    return same && claimed.asking_event_id ? { ...derived, asking_event_id: claimed.asking_event_id } : derived;
  }
  return derived;
}

export function replyContextFromSource(source: string): ReplyContext | null {
  try {
    const address = parseAddress(source);
    if (address.kind === 'external') {
      return {
        kind: 'external',
        channel_id: `${address.channelType}:${address.instance}`,
        conversation_type: address.conversationType,
        conversation_id: address.conversationId,
        peer_id: address.peerId,
      };
    }
    if (address.kind === 'internal') {
      return { kind: 'internal', conversation_type: address.conversationType, conversation_id: address.conversationId, agent_id: address.agentId };
    }
  } catch {
    // not an address: nowhere to answer
  }
  return null;
}

/**
 * The reply to an inbound message, keyed by its outcome key, to where the answer goes. Without a
 * reply context it is kept in the thread and goes nowhere (see reply-context.ts); when that is
 * because the answer's way back is in doubt, the thread records why.
 */
export async function pushReply(thread: StoredThread, target: AnswerTarget, inboundId: number, text: string, outcomeKey: string, attachments: Attachment[] = []): Promise<void> {
  const { replyContext } = target;
  await push(thread, {
    source: 'self',
    type: 'message',
    content: JSON.stringify({ text, attachments, ...(replyContext ? { reply_context: replyContext } : {}), in_reply_to: inboundId }),
    idempotency_key: outcomeKey,
  });
  if (target.problem) {
    await push(thread, { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify({ in_reply_to: inboundId, stage: 'route', error: target.problem } satisfies ErrorRecord) });
  }
}
