import type { NoticeKind } from '../core/message.js';
import type { InboundOutcome, ChannelStatus, OutboundFile, Route } from './types.js';
import type { MailboxEntry } from './state.js';
import type { SendResult } from './delivery.js';
import type { ConfigChanges } from './gateway.js';
import type { ConfigFinding } from './config.js';

/** What the xgw control socket accepts, one JSON object per connection (`ping`/`stop` too). */
export type XgwRequest =
  /** Answer: XgwStatus; with `wait_ms`, once channels still in their first start settled (or after that long, at most 10 s). */
  | { op: 'status'; wait_ms?: number }
  /** Deliver a reply (xgw send). Answer: SendResult. */
  | {
      op: 'send';
      channel: string;
      peer: string;
      conversation_type?: string;
      conversation?: string;
      reply_to?: string;
      idempotency_key?: string;
      text: string;
      /** The runtime's notice instead of an answer (see MessageContent.notice): chat clients show it as one. */
      notice?: NoticeKind;
      /** Files sent with it, from the agent's `files/` (absolute paths). */
      files?: OutboundFile[];
      /** The agent that sends it: a terminal chat shows it in that agent's chat only. */
      agent?: string;
    }
  /** A terminal chat's message. `agent` picks the agent over the routes. Answer: InboundOutcome. */
  | { op: 'chat_message'; channel: string; peer?: string; agent?: string; message_id: string; text: string }
  /**
   * The agent is working on an answer in this conversation (sent while its turn runs, every few
   * seconds): the channel shows it, where it can. Answer: null, at once.
   */
  | { op: 'typing'; channel: string; peer: string; conversation_type: string; conversation: string }
  /**
   * The answer to `reply_to` as the model writes it (the text so far; '' withdraws it: no answer
   * follows). A channel that can shows it, and the answer (`send` with the same `reply_to`)
   * replaces it. Answer: null, at once.
   */
  | { op: 'draft'; channel: string; peer: string; conversation_type: string; conversation: string; reply_to: string; text: string }
  /**
   * Read the config file again and apply it (xgw reload): refused, the running config kept, when
   * it has a failure (the error `xgw config check` gives). Answer: XgwReloadResult.
   */
  | { op: 'reload' }
  /**
   * A command the agent's turn runs for the answer to `reply_to` (secrets removed, cut short): a
   * channel that shows tool progress (`show_tool_progress`) shows it until the answer comes.
   * Answer: null, at once.
   */
  | { op: 'tool_progress'; channel: string; peer: string; conversation_type: string; conversation: string; reply_to?: string; command: string }
  /** Welcome the peers approved since (xgw pair approve). Answer: null. */
  | { op: 'welcome' }
  /** A terminal chat listening for replies: a stream of MailboxEntry lines. */
  | { op: 'chat_attach'; channel: string; peer?: string; agent?: string };

export interface XgwStatus {
  running: boolean;
  pid: number | null;
  started_at: string | null;
  uptime_seconds: number | null;
  channels: ChannelStatus[];
  routes: Route[];
  pending_pairings: number;
  /** The fingerprint of the config text the running daemon loaded (null when it is not running). */
  config_sha256: string | null;
}

/** What `reload` did: the changes, the channels' states after them, and the config's warnings. */
export interface XgwReloadResult extends ConfigChanges {
  file: string;
  channels: ChannelStatus[];
  warnings: ConfigFinding[];
  config_sha256: string;
}

export type { InboundOutcome, MailboxEntry, SendResult };
