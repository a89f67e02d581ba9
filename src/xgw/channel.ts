import type { Logger } from '../core/logger.js';
import type { ControlSource } from './control-source.js';
import type { GatewayState } from './state.js';
import type { ChannelConfig, ChannelSendOptions, ChannelStatus, ConversationTarget, InboundFile, InboundMessage, InboundOutcome, OutboundMessage } from './types.js';

/**
 * The contract between the gateway and a channel: what a channel gets when it starts, and what it
 * must do. Apart from types.ts because the gateway's state is part of it, and the state is built
 * from types.ts's nouns.
 */

/** What the gateway gives a channel when it starts. */
export interface ChannelContext {
  home: string;
  logger: Logger;
  /** Pairing, delivered keys, and the per-peer mailboxes that web chat and terminal keep. */
  state: GatewayState;
  /** The one transport-free entry for inbound messages (STYLE 14). */
  receive(message: InboundMessage, explicitAgent?: string): Promise<InboundOutcome>;
  /** Whether a peer's messages reach agents: who may be told what the channel did with one it could not take. */
  admits(channelId: string, peerId: string): boolean;
  /** The text to tell a peer about an outcome, or null when nothing is to be said. */
  noticeFor(outcome: InboundOutcome): string | null;
  /** The whole system's status (`theclaw status --json` with recent events), for the web chat's status page; absent where nothing provides it. */
  systemStatus?(): Promise<unknown>;
  /** What the owner's control page reads and does (control-source.ts); absent where nothing provides it. */
  control?: ControlSource;
}

/**
 * A live connection to one chat platform. Contract: `start` resolves once the channel accepts
 * traffic (or rejects with a ClawError saying why); `send` resolves with the platform's ids of
 * the messages it sent (a long text may become several; with `sent`, those come first), or
 * rejects with a ClawError — `upstream` or `io` when a retry may help; `stop` ends every
 * connection and timer it holds, and cancels a `start` under way.
 */
export interface ChannelAdapter {
  readonly id: string;
  readonly type: ChannelConfig['type'];
  start(context: ChannelContext): Promise<void>;
  send(message: OutboundMessage, options?: ChannelSendOptions): Promise<{ messageIds: string[] }>;
  /**
   * Shows the conversation that the agent is working on an answer (Telegram's "typing…"), for a
   * few seconds: the gateway asks again while the turn runs. Absent where the platform has no such
   * thing.
   */
  typing?(target: ConversationTarget): Promise<void>;
  /** The bytes of an inbound file, refusing (`file_too_large`) one of more than `maxBytes`. */
  download?(file: InboundFile, maxBytes: number): Promise<Buffer>;
  /**
   * Shows the answer to `replyTo` as it is being written (`text` so far) in place of the draft
   * this returned last time (`draft`, its platform id; none the first time), and returns the
   * draft's platform id ('' where nothing on the platform stands for it). An empty text withdraws
   * the draft: no answer follows it. The answer's `send` gets the id (ChannelSendOptions.draft).
   */
  draft?(target: ConversationTarget, replyTo: string, text: string, draft: string | undefined): Promise<string>;
  /** Shortest time between two drafts of one answer. */
  readonly draftIntervalMs?: number;
  /**
   * Shows that the turn working on the answer to `replyTo` runs `command` (cut short, secrets
   * removed), until the answer or the next command. Never stored. Absent where the channel
   * cannot show it.
   */
  toolProgress?(target: ConversationTarget, replyTo: string | undefined, command: string): Promise<void>;
  status(): ChannelStatus;
  /**
   * Asks the platform, without starting, whether the channel could start (Telegram: getMe with
   * the token), for `theclaw doctor` while xgw is down: what it found (the bot's name), or the
   * error `start` would fail with. Absent where nothing can be asked.
   */
  check?(): Promise<string>;
  stop(): Promise<void>;
}
