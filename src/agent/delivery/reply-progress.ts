import type { Logger } from '../../core/logger.js';
import type { ReplyContext } from '../../core/message.js';
import { askXgw } from '../../xgw/client.js';
import type { XgwRequest } from '../../xgw/index.js';
import type { ReplyProgress } from '../turn/index.js';

/** How often a running turn tells xgw again; Telegram shows "typing…" for 5 s after each. */
export const TYPING_EVERY_MS = 4_000;
/** A turn that answers within this long shows no draft: its answer simply comes. */
export const DRAFT_AFTER_MS = 1_000;
/** Drafts go to xgw at most this often (each channel bounds them further). */
const DRAFT_EVERY_MS = 150;
/** What xgw is told while a turn runs is a courtesy: it never holds the turn up for long. */
const TELL_TIMEOUT_MS = 2_000;
/** Answers that are decisions not to answer: a draft that could become one is held back. */
const SILENT_ANSWERS = ['NO_REPLY', 'HEARTBEAT_OK'];
/** A command shown while it runs is cut to this many characters. */
const SHOWN_COMMAND_CHARS = 80;

/**
 * While a turn works on an answer to a person, tells the gateway so: `typing` every few seconds
 * (Telegram's "typing…", the web chat's dots) and, once the turn has taken a moment, the answer
 * as the model writes it (`draft`; xgw shows it where the channel streams, and the answer
 * replaces it), and each command it runs (`tool_progress`; where the channel shows it),
 * secrets removed and cut short. Only in the answer's own conversation, and only for a person:
 * an agent that asked has nothing to show it to; the commands only in a direct chat, where the
 * person who asked is the only one to see them. Nothing is waited for; a gateway that is down is
 * only logged. No draft is shown while `earlierWaiting` says an earlier answer of the conversation
 * has yet to be delivered (xgw was down, the platform failing): it would show above it.
 */
export function replyProgress(
  home: string,
  replyContext: ReplyContext | null,
  logger: Logger,
  redact: (text: string) => string,
  earlierWaiting: () => Promise<boolean> = async () => false,
): ReplyProgress {
  if (replyContext?.kind !== 'external') return { written() {}, restart() {}, running() {}, end() {} };
  const conversation = {
    channel: replyContext.channel_id,
    peer: replyContext.peer_id,
    conversation_type: replyContext.conversation_type,
    conversation: replyContext.conversation_id,
  };
  const tell = (request: XgwRequest): void => {
    askXgw(home, request, TELL_TIMEOUT_MS).catch((error: unknown) =>
      logger.debug(`run: ${request.op} in ${conversation.channel} not shown: ${error instanceof Error ? error.message : String(error)}`),
    );
  };
  tell({ op: 'typing', ...conversation });
  const typing = setInterval(() => tell({ op: 'typing', ...conversation }), TYPING_EVERY_MS);

  // Drafts need the message they answer: the answer replaces the draft of the same `reply_to`.
  const replyTo = replyContext.message_id;
  const startedAt = Date.now();
  let text = '';
  let shown = '';
  let sentAt = 0;
  let due: NodeJS.Timeout | undefined;
  let ended = false;
  const showDraft = (): void => {
    due = undefined;
    if (replyTo === undefined || text.trim() === '' || SILENT_ANSWERS.some((silent) => silent.startsWith(text.trim().slice(0, silent.length)))) return;
    if (text === shown) return;
    const draft = text;
    // Held back behind an undelivered answer: tried again with the next of the text, or never (the
    // answer itself then comes in its order).
    earlierWaiting().then(
      (waiting) => {
        if (waiting || ended || draft !== text) return;
        shown = draft;
        sentAt = Date.now();
        tell({ op: 'draft', ...conversation, reply_to: replyTo, text: draft });
      },
      (error: unknown) => logger.debug(`run: no draft shown: the thread could not be read (${error instanceof Error ? error.message : String(error)})`),
    );
  };
  const withdraw = (): void => {
    clearTimeout(due);
    due = undefined;
    if (shown !== '' && replyTo !== undefined) tell({ op: 'draft', ...conversation, reply_to: replyTo, text: '' });
    shown = '';
  };
  return {
    written(delta) {
      text += delta;
      if (due) return;
      const wait = Math.max(startedAt + DRAFT_AFTER_MS, sentAt + DRAFT_EVERY_MS) - Date.now();
      if (wait <= 0) showDraft();
      else due = setTimeout(showDraft, wait);
    },
    restart() {
      withdraw();
      text = '';
    },
    running(command) {
      if (conversation.conversation_type !== 'dm') return;
      tell({ op: 'tool_progress', ...conversation, ...(replyTo === undefined ? {} : { reply_to: replyTo }), command: shownCommand(command, redact) });
    },
    end(answered) {
      ended = true;
      clearInterval(typing);
      if (answered) clearTimeout(due);
      else withdraw();
    },
  };
}

/** A command as the person may see it: secrets removed, on one line, cut short. */
export function shownCommand(command: string, redact: (text: string) => string): string {
  const chars = Array.from(redact(command).replace(/\s+/g, ' ').trim());
  return chars.length > SHOWN_COMMAND_CHARS ? `${chars.slice(0, SHOWN_COMMAND_CHARS - 1).join('')}…` : chars.join('');
}
