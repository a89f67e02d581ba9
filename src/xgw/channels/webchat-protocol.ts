import type { NoticeKind } from '../../core/notice.js';

/**
 * What the web chat page and the server say to each other over `/ws`, as JSON. The page
 * (src/xgw/page/chat.ts) is type-checked against these types in the browser's world, so this
 * module imports nothing but types that need no Node.
 *
 * - client → server: `{type:'message', id, text}` (id: the client's own message id)
 * - server → client: `{type:'history', messages}` once on connect (oldest first), then
 *   `{type:'message', message}` as they happen, `{type:'ack', id}` for each client message and
 *   `{type:'error', id?, text}` for one that was refused.
 */
export interface ClientMessage {
  type: 'message';
  id: string;
  text: string;
}

export type ServerMessage = { type: 'history'; messages: MailboxEntry[] } | { type: 'message'; message: MailboxEntry } | { type: 'ack'; id: string } | { type: 'error'; id?: string; text: string };

/** One message of a web chat or terminal conversation, as its mailbox keeps it. */
export interface MailboxEntry {
  id: number;
  role: 'user' | 'agent' | 'system';
  text: string;
  reply_to: string | null;
  created_at: string;
  /** Set when the agent's side sent a notice instead of an answer (see MessageContent.notice). */
  notice?: NoticeKind;
}

/** Longest text a client message may carry, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 64 * 1024;

/** Where the server serves the pages' scripts (built by tsup into dist/page/). */
export const PAGE_SCRIPTS = { chat: '/assets/chat.js', status: '/assets/status.js' } as const;
