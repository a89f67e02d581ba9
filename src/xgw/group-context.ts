import type Database from 'better-sqlite3';
import type { GroupContextEntry } from '../core/message.js';
import type { GroupsConfig, InboundMessage } from './types.js';

/**
 * A group's pending context, in xgw's `state.db`: what people say in a group without addressing
 * the bot, which no agent answers, kept so that the agent's next turn in that group knows what
 * was said ("since I last spoke: …"). Bounded per group by the channel's `groups.context`: at most
 * `messages` rows, none older than `minutes` (older ones go at the channel's next group message).
 *
 * Exactly once, across a crash: the rows go into the inbox event of the next message that
 * addresses the bot in the group, and leave here only once that event is stored. The inbox and
 * this table are two databases, so the rows are first claimed for the message's inbox key (here),
 * then the message is pushed with them (the inbox), then they are removed (here). A claim a crash
 * left behind is settled by the next message of the group: removed if its key is in the agent's
 * inbox (the rows went with it), else given back. Telegram delivers an unconfirmed update again,
 * which finds its own claim and pushes the same rows.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS group_context (
  id INTEGER PRIMARY KEY AUTOINCREMENT, channel_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
  message_id TEXT NOT NULL, peer_id TEXT NOT NULL, peer_name TEXT, text TEXT NOT NULL, at INTEGER NOT NULL,
  claim_key TEXT, claim_agent TEXT,
  UNIQUE (channel_id, conversation_id, message_id));
`;

/** Characters kept of one message: the context is a reminder, and all of it must fit one inbox event. */
export const MAX_CONTEXT_TEXT = 1000;

/** Who a group message is claimed for: its inbox key in an agent's inbox. */
export interface ContextClaim {
  agent: string;
  key: string;
}

interface ContextRow {
  id: number;
  peer_id: string;
  peer_name: string | null;
  text: string;
  at: number;
}

export class GroupContextStore {
  constructor(private readonly db: Database.Database) {
    db.exec(SCHEMA);
  }

  /** Keeps a message that did not address the bot (a platform's second delivery of it is ignored). */
  keep(message: InboundMessage, bounds: GroupsConfig['context'], now = Date.now()): void {
    const text = contextText(message);
    if (bounds.messages === 0 || text === '') return;
    this.db
      .transaction(() => {
        this.db
          .prepare('INSERT OR IGNORE INTO group_context (channel_id, conversation_id, message_id, peer_id, peer_name, text, at) VALUES (?, ?, ?, ?, ?, ?, ?)')
          .run(message.channelId, message.conversationId, message.messageId, message.peerId, message.peerName || null, text, now);
        this.trim(message.channelId, message.conversationId, bounds, now);
      })
      .immediate();
  }

  /**
   * The group's pending context, oldest first, claimed for `claim` (see above): the rows this key
   * claimed before, if it did (a retry), else every row within the bounds. `pushed` says whether an
   * agent's inbox holds a key, to settle claims a crash left.
   */
  claim(channelId: string, conversationId: string, claim: ContextClaim, bounds: GroupsConfig['context'], pushed: (claim: ContextClaim) => boolean, now = Date.now()): GroupContextEntry[] {
    const group = [channelId, conversationId] as const;
    return this.db
      .transaction(() => {
        for (const other of this.claimsLeft(channelId, conversationId, claim.key)) {
          const settle = pushed(other) ? 'DELETE FROM group_context' : 'UPDATE group_context SET claim_key = NULL, claim_agent = NULL';
          this.db.prepare(`${settle} WHERE channel_id = ? AND conversation_id = ? AND claim_key = ?`).run(...group, other.key);
        }
        this.trim(channelId, conversationId, bounds, now);
        this.db.prepare('UPDATE group_context SET claim_key = ?, claim_agent = ? WHERE channel_id = ? AND conversation_id = ? AND claim_key IS NULL').run(claim.key, claim.agent, ...group);
        const rows = this.db
          .prepare('SELECT id, peer_id, peer_name, text, at FROM group_context WHERE channel_id = ? AND conversation_id = ? AND claim_key = ? ORDER BY id')
          .all(...group, claim.key) as ContextRow[];
        return rows.map((row) => ({ peer_id: row.peer_id, ...(row.peer_name ? { name: row.peer_name } : {}), text: row.text, at: new Date(row.at).toISOString() }));
      })
      .immediate();
  }

  /** The group's claims of keys other than `key`: a crash's, or a push's under way. */
  claimsLeft(channelId: string, conversationId: string, key: string): ContextClaim[] {
    return this.db
      .prepare('SELECT DISTINCT claim_key AS key, claim_agent AS agent FROM group_context WHERE channel_id = ? AND conversation_id = ? AND claim_key IS NOT NULL AND claim_key != ?')
      .all(channelId, conversationId, key) as ContextClaim[];
  }

  /** Removes the rows claimed for `key`: its message is in the inbox. */
  consume(channelId: string, conversationId: string, key: string): void {
    this.db.prepare('DELETE FROM group_context WHERE channel_id = ? AND conversation_id = ? AND claim_key = ?').run(channelId, conversationId, key);
  }

  /** Rows not claimed: past the channel's time bound (in any of its groups), and the group's beyond its newest `messages`. */
  private trim(channelId: string, conversationId: string, bounds: GroupsConfig['context'], now: number): void {
    this.db.prepare('DELETE FROM group_context WHERE channel_id = ? AND claim_key IS NULL AND at < ?').run(channelId, now - bounds.minutes * 60_000);
    this.db
      .prepare(
        `DELETE FROM group_context WHERE channel_id = @channelId AND conversation_id = @conversationId AND claim_key IS NULL AND id NOT IN
           (SELECT id FROM group_context WHERE channel_id = @channelId AND conversation_id = @conversationId AND claim_key IS NULL ORDER BY id DESC LIMIT @keep)`,
      )
      .run({ channelId, conversationId, keep: bounds.messages });
  }
}

/** A message as the context shows it: its text, with what else came named, cut to MAX_CONTEXT_TEXT. */
function contextText(message: InboundMessage): string {
  const extras = [...(message.files ?? []).map((file) => file.kind), ...(message.unsupported ? [message.unsupported] : [])];
  const text = [message.text.trim(), ...(extras.length > 0 ? [`[sent: ${extras.join(', ')}]`] : [])].filter(Boolean).join(' ');
  const chars = Array.from(text); // by code point: a cut surrogate pair is no text a thread takes
  return chars.length > MAX_CONTEXT_TEXT ? `${chars.slice(0, MAX_CONTEXT_TEXT - 1).join('')}…` : text;
}
