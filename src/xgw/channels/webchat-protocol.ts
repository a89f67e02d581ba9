import type { NoticeKind } from '../../core/notice.js';

/**
 * What the web chat page and the server say to each other over `/ws`, as JSON. The page
 * (src/xgw/page/chat.ts) is type-checked against these types in the browser's world, so this
 * module imports nothing but types that need no Node.
 *
 * - client → server: `{type:'message', id, text}` (id: the client's own message id)
 * - server → client: `{type:'peer', credential}` first where the handshake offered no peer id this
 *   channel issued (webchat-peers.ts: the page keeps it and offers it from then on),
 *   `{type:'history', messages}` once on connect (oldest first), then
 *   `{type:'message', message}` as they happen, `{type:'ack', id, delivery}` for each client message,
 *   `{type:'error', id?, text}` for one that was refused, `{type:'typing'}` while the agent works
 *   on an answer, `{type:'draft', reply_to, text}` as it writes it and `{type:'tool_progress', command}`
 *   for each command it runs.
 */
export interface ClientMessage {
  type: 'message';
  id: string;
  text: string;
  /** Files uploaded for it first (POST UPLOAD_PATH answers each one's id). */
  files?: { id: string }[];
}

/**
 * Where the page uploads a file before the message that carries it: POST, the body the file,
 * `Authorization: Bearer <token>`, the peer's credential in PEER_HEADER, the name (URI-encoded) in
 * FILE_NAME_HEADER. Answer: `{id}`, or 413 past the channel's `media.max_bytes`.
 */
export const UPLOAD_PATH = '/upload';
export const PEER_HEADER = 'x-xgw-peer';
export const FILE_NAME_HEADER = 'x-file-name';

/** A file a message carried, as the page shows it. */
export interface MailboxFile {
  name: string;
  bytes: number;
  /** A file the agent sent: where it is, relative to THECLAW_HOME (GET FILE_PATH?ref=… fetches it). */
  ref?: string;
  /** An image the agent sent (a screenshot): its type, and the page shows it (INLINE_IMAGE_TYPES). */
  image?: string;
}

/** The images a page shows in the message (raster only: an SVG is a document of its own); others are only named. */
export const INLINE_IMAGE_TYPES: readonly string[] = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

/** Where the page fetches a file the agent sent: GET with `?ref=`, the token and the credential in PEER_HEADER; only the peer's own. */
export const FILE_PATH = '/file';

export type ServerMessage =
  /** The id this browser chats under from now on, as `<peer id>.<signature>`: a new one, the server's own. */
  | { type: 'peer'; credential: string }
  | { type: 'history'; messages: MailboxEntry[] }
  | { type: 'message'; message: MailboxEntry }
  | { type: 'ack'; id: string; delivery: Delivery }
  /** The agent is working on an answer (sent every few seconds while its turn runs). */
  | { type: 'typing' }
  /**
   * The answer to the client message `reply_to` as the model writes it (the text so far; ''
   * withdraws it). Never stored: the answer's `message` (with that `reply_to`) replaces it.
   */
  | { type: 'draft'; reply_to: string; text: string }
  /**
   * A command the agent's turn runs (secrets removed, cut short), where the channel shows tool
   * progress: a line under the dots until the answer, a draft or the next command. Never stored.
   */
  | { type: 'tool_progress'; command: string }
  | { type: 'error'; id?: string; text: string };

/**
 * Whether an acknowledged message gets an answer: `answering` (the agent works on it), `waiting`
 * (kept until its stopped agent starts again) or `not_answered` (not passed on: why is the
 * notice that follows). The page shows it in place of, or with, the typing dots, so that it never
 * waits for an answer that will not come.
 */
export type Delivery = 'answering' | 'waiting' | 'not_answered';

/** One message of a web chat or terminal conversation, as its mailbox keeps it. */
export interface MailboxEntry {
  id: number;
  role: 'user' | 'agent' | 'system';
  text: string;
  reply_to: string | null;
  created_at: string;
  /** Set when the agent's side sent a notice instead of an answer (see MessageContent.notice). */
  notice?: NoticeKind;
  /** The files it carried. */
  files?: MailboxFile[];
  /** A person's message: the id its client gave it, which an answer's `reply_to` names. */
  message_id?: string;
  /**
   * A terminal's entry (a web chat keeps none): the agent it comes from or goes to, so that
   * `agent chat <id>` shows that agent's only. None for the gateway's own (and for entries from
   * before it was kept): those show in any chat of the peer.
   */
  agent?: string;
  /** Sent with an earlier answer a terminal had not seen: the text of the message it answers (not stored). */
  question?: string;
}

/** Longest text a client message may carry, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 64 * 1024;

/** Where the server serves the pages' scripts (built by tsup into dist/page/). */
export const PAGE_SCRIPTS = { chat: '/assets/chat.js', status: '/assets/status.js', control: '/assets/control.js' } as const;
