import type { InboundOutcome } from './types.js';

/** What a peer approved by the owner is told (see Gateway.welcomeApproved). */
export function welcomeNotice(firstMessageKept: boolean): string {
  return `You are approved: you can write to me now.${firstMessageKept ? ' Your first message has been passed on.' : ''}`;
}

/**
 * What a peer is told about files a channel cannot take (Discord's attachments, for now): with
 * text, the text was passed on without them; without, nothing was.
 */
export function filesNotTakenNotice(textPassedOn: boolean): string {
  return textPassedOn ? 'I passed on your text, but not the attached file: I cannot take files on Discord yet.' : 'I cannot take files on Discord yet. Send me the text instead.';
}

/** What a peer is told about its message, where something must be said. */
export function noticeFor(outcome: InboundOutcome): string | null {
  switch (outcome.kind) {
    case 'accepted':
      return null;
    case 'pairing':
      return `Hi! I don't know you yet. Ask my owner to approve you with this code: ${outcome.code} (valid for one hour; they run: xgw pair approve ${outcome.code}).`;
    case 'denied':
      return null; // strangers are not answered beyond their code
    case 'no_route':
      return 'No agent takes messages from this chat yet. The owner can add a route in the xgw config.';
    case 'missing_agent':
      return `This chat is routed to the agent "${outcome.agent}", which does not exist yet. The owner can create it with: agent init ${outcome.agent}`;
    case 'refused':
      return `That message is too long to take (the limit is ${Math.floor(outcome.limit_bytes / 1024)} KB). Shorten it or send it in parts.`;
    case 'rate_limited':
      // Once per burst: a notice for each refused message would be a flood of its own.
      return outcome.notify
        ? `You are sending messages faster than I can take them (at most ${outcome.limit} in ${outcome.per_seconds} s). Messages from now on are not passed on until ${outcome.retry_after_seconds} s have passed; send them again then.`
        : null;
  }
}
