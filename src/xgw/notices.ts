import type { Delivery } from './channels/webchat-protocol.js';
import type { InboundOutcome } from './types.js';

/** What a peer approved by the owner is told (see Gateway.welcomeApproved). */
export function welcomeNotice(firstMessageKept: boolean): string {
  return `You are approved: you can write to me now.${firstMessageKept ? ' Your first message has been passed on.' : ''}`;
}

/** What a peer is told about its message, where something must be said. */
export function noticeFor(outcome: InboundOutcome): string | null {
  switch (outcome.kind) {
    case 'accepted':
      // Once per conversation while the agent is stopped: its messages are answered after `agent start`.
      return outcome.notify ? `The agent "${outcome.agent}" is stopped: your message waits, and is answered once the owner starts it again (agent start ${outcome.agent}).` : null;
    case 'pairing':
      return `Hi! I don't know you yet. Ask my owner to approve you with this code: ${outcome.code} (valid for one hour; they run: xgw pair approve ${outcome.code}).`;
    case 'denied':
      return null; // strangers are not answered beyond their code
    case 'kept':
      return null; // said to the group, not to the bot
    case 'no_route':
      return 'No agent takes messages from this chat yet. The owner can add a route in the xgw config.';
    case 'missing_agent':
      return `This chat is routed to the agent "${outcome.agent}", which does not exist yet. The owner can create it with: agent init ${outcome.agent}`;
    case 'refused': {
      const limit = megabytes(outcome.limit_bytes);
      if (outcome.reason === 'file_too_large') return `That file is too large for me to take (the limit is ${limit}). Send a smaller one, or a link to it.`;
      if (outcome.reason === 'over_quota') return `You have sent me ${limit} of files today, as much as I take in a day. Send more tomorrow, or a link to it.`;
      return `That message is too long to take (the limit is ${Math.floor(outcome.limit_bytes / 1024)} KB). Shorten it or send it in parts.`;
    }
    case 'unsupported':
      return `I cannot take ${outcome.what} yet: please write it as text.`;
    case 'file_failed':
      return 'I could not fetch that file. Please send it again.';
    case 'rate_limited':
      // Once per burst: a notice for each refused message would be a flood of its own.
      return outcome.notify
        ? `You are sending messages faster than I can take them (at most ${outcome.limit} in ${outcome.per_seconds} s). Messages from now on are not passed on until ${outcome.retry_after_seconds} s have passed; send them again then.`
        : null;
  }
}

/** Whether the message gets an answer (see Delivery). */
export function deliveryOf(outcome: InboundOutcome): Delivery {
  if (outcome.kind !== 'accepted') return 'not_answered';
  return outcome.agentStopped ? 'waiting' : 'answering';
}

/**
 * What a page that the owner shared says of a message the gateway did not pass on and does not
 * tell the peer about (a stranger under an allowlist gets no answer from the bot, but the page is
 * the person's own screen).
 */
export function notPassedOn(outcome: InboundOutcome): string | null {
  if (outcome.kind === 'denied') return `Your message was not passed on: ${outcome.reason}. The owner decides who may write here.`;
  if (outcome.kind === 'rate_limited') return `Not passed on: you are sending messages too fast. Send it again in ${outcome.retry_after_seconds} s.`;
  return null;
}

function megabytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round((bytes / 1024 / 1024) * 10) / 10} MB` : `${Math.ceil(bytes / 1024)} KB`;
}
