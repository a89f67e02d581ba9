import type { Logger } from '../core/logger.js';
import type { ReplyContext } from '../core/message.js';
import { askXgw } from '../xgw/client.js';
import type { XgwRequest } from '../xgw/index.js';

/** How often a running turn tells xgw again; Telegram shows "typing…" for 5 s after each. */
export const TYPING_EVERY_MS = 4_000;
/** A typing request is a courtesy: it never holds the turn up for long. */
const TYPING_TIMEOUT_MS = 2_000;

/**
 * While a turn works on an answer to a person, tells the gateway so every few seconds: the
 * channel shows it (Telegram's "typing…", the web chat's dots). Only the answer's own
 * conversation, and only for a person: an agent that asked has nothing to show it to. Returns
 * the function that stops it. Nothing is waited for; a gateway that is down is only logged.
 */
export function keepTyping(home: string, replyContext: ReplyContext | null, logger: Logger): () => void {
  if (replyContext?.kind !== 'external') return () => {};
  const request: XgwRequest = {
    op: 'typing',
    channel: replyContext.channel_id,
    peer: replyContext.peer_id,
    conversation_type: replyContext.conversation_type,
    conversation: replyContext.conversation_id,
  };
  const tell = (): void => {
    askXgw(home, request, TYPING_TIMEOUT_MS).catch((error: unknown) => logger.debug(`run: typing in ${request.channel} not shown: ${error instanceof Error ? error.message : String(error)}`));
  };
  tell();
  const timer = setInterval(tell, TYPING_EVERY_MS);
  return () => clearInterval(timer);
}
