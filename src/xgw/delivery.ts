import { encodeSegment } from '../core/address.js';
import { ClawError, usageError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { NoticeKind } from '../core/message.js';
import type { ChannelAdapter } from './channel.js';
import { settleWithin } from './settle.js';
import type { DeliveryProgress, DeliveryRef, GatewayState } from './state.js';
import { showsToolProgress, type ChannelConfig, type ConversationTarget, type OutboundFile } from './types.js';

/**
 * The gateway's way out: a reply delivered through its channel once per idempotency key (resumed
 * after the parts sent before), and the courtesies around it while a turn runs (typing, the
 * answer's drafts, tool progress). The Gateway owns the channels and the config; this reads them
 * through DeliveryHost.
 */

/** How long stopping waits for deliveries under way (a Bot API call rarely takes a second). */
const STOP_DELIVERIES_MS = 5_000;

export interface SendRequest {
  channel: string;
  peer: string;
  /** Default: `dm`. */
  conversationType?: string;
  /** Default: the peer id. */
  conversation?: string;
  replyTo?: string;
  /** A key seen before is acknowledged as a duplicate and not sent again. */
  idempotencyKey?: string;
  text: string;
  notice?: NoticeKind;
  files?: OutboundFile[];
  /** The agent that sends it (see OutboundMessage.agent). */
  agent?: string;
}

export interface SendResult {
  status: 'delivered' | 'duplicate';
  message_ids: string[];
}

/** What delivery needs of the gateway, read at each call (a reload replaces channels and config). */
export interface DeliveryHost {
  readonly state: GatewayState;
  readonly logger: Logger;
  /** The running adapter of a channel. */
  adapter(channelId: string): ChannelAdapter | undefined;
  /** The channels configured now. */
  channels(): readonly ChannelConfig[];
  /** Whether the gateway is stopping: nothing new is sent. */
  stopping(): boolean;
}

/**
 * Shortest time between two typing actions in one conversation: Telegram shows one for 5 s, and
 * a run asks every 4 s (so this must stay below that, or every other ask would be dropped).
 */
export const TYPING_INTERVAL_MS = 3_000;

/** The streaming of one answer (see Delivery.draft). */
interface DraftStream {
  /** The newest text, not shown yet. */
  next: string | undefined;
  shownAt: number;
  touchedAt: number;
  /** The draft due at the end of the interval. */
  timer: NodeJS.Timeout | undefined;
  /** The draft call under way: the next one, and the answer, wait for it. */
  busy: Promise<void>;
  /** The answer came: later drafts (sent before it, arriving after) are ignored. */
  ended: boolean;
}

/** A stream that no draft and no answer came for in this long is forgotten (its turn died). */
const DRAFT_FORGOTTEN_MS = 10 * 60_000;

export class Delivery {
  /** Deliveries under way, by key and target: a concurrent retry waits for the first. */
  private readonly inFlight = new Map<string, Promise<SendResult>>();
  /** Deliveries whose record could not be written to the state, by key and target. */
  private readonly unrecorded = new Map<string, DeliveryProgress>();
  /** Every delivery under way, keyed or not: `settle` lets them finish first. */
  private readonly delivering = new Set<Promise<unknown>>();
  /** Answers being streamed (see `draft`), by channel, conversation and the message answered. */
  private readonly drafts = new Map<string, DraftStream>();
  /** When typing was last shown per conversation (see `typing`). */
  private readonly typingShown = new Map<string, number>();

  constructor(private readonly host: DeliveryHost) {}

  /**
   * Resolves once the deliveries under way have finished, or after STOP_DELIVERIES_MS: a part the
   * platform has been handed must be written down before its channel stops, or the retry sends it again.
   */
  async settle(): Promise<void> {
    await settleWithin(Promise.allSettled([...this.delivering]), STOP_DELIVERIES_MS);
  }

  /**
   * Delivers a reply through its channel, once per idempotency key and target: a key delivered
   * before is acknowledged as a duplicate; a key whose delivery stopped part-way goes on after
   * the last part that was sent.
   *
   * The guarantee is at least once, with one narrow window for a duplicate: each part is written
   * down the moment the platform has answered for it, but Telegram has no idempotency, so a
   * request it received cannot be asked about afterwards. If xgw dies after handing a part to
   * the platform and before that write (one Bot API round trip), the retry sends the part again.
   * Writing it down before sending would turn that window into a lost reply instead.
   */
  send(request: SendRequest): Promise<SendResult> {
    if (request.text.trim() === '' && !request.files?.length) return Promise.reject(usageError('the text is empty', 'pass --text or text on stdin'));
    if (!this.host.channels().some((channel) => channel.id === request.channel)) {
      const ids =
        this.host
          .channels()
          .map((channel) => channel.id)
          .join(', ') || 'none';
      return Promise.reject(usageError(`no channel ${request.channel} is configured`, `pass one of the configured channels (${ids}) to --channel`));
    }
    if (this.host.stopping()) return Promise.reject(new ClawError('io', 'xgw is stopping', { suggestion: 'send it again once xgw has started' }));
    if (request.idempotencyKey === undefined) return this.track(this.deliver(request, undefined));
    const ref = deliveryRef(request, request.idempotencyKey);
    const id = refId(ref);
    const running = this.inFlight.get(id);
    if (running) return running.then((result) => ({ ...result, status: 'duplicate' as const }));
    const promise = this.track(this.deliver(request, ref)).finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, promise);
    return promise;
  }

  /**
   * Shows that the agent works on an answer in this conversation, if its channel can. At most
   * once per TYPING_INTERVAL_MS per conversation, however many runs ask: Telegram shows it for 5 s.
   * Never waited for, and a failure is only logged: it is a courtesy, not a delivery.
   */
  typing(channelId: string, target: ConversationTarget): void {
    const channel = this.host.adapter(channelId);
    if (!channel?.typing || this.host.stopping()) return;
    const key = `${channelId}\u0000${target.conversationType}\u0000${target.conversationId}`;
    const now = Date.now();
    if (now - (this.typingShown.get(key) ?? 0) < TYPING_INTERVAL_MS) return;
    for (const [shown, at] of this.typingShown) if (now - at >= TYPING_INTERVAL_MS) this.typingShown.delete(shown);
    this.typingShown.set(key, now);
    channel.typing(target).catch((error: unknown) => this.host.logger.debug(`${channelId}: could not show typing: ${error instanceof Error ? error.message : String(error)}`));
  }

  /**
   * Shows the answer to `replyTo` as it is written, where the channel streams (its `stream`
   * setting and a `draft` method): at most once per the channel's draft interval per answer, the
   * newest text winning, one draft call at a time. Never waited for, and a failure is only logged:
   * the answer itself comes through `send`, which replaces the draft (see `deliver`).
   */
  draft(channelId: string, target: ConversationTarget, replyTo: string, text: string): void {
    const channel = this.host.adapter(channelId);
    const config = this.host.channels().find((c) => c.id === channelId);
    if (!channel?.draft || this.host.stopping() || !config || !('stream' in config) || !config.stream) return;
    const key = streamKey(channelId, target, replyTo);
    const now = Date.now();
    this.forgetDrafts(now);
    let stream = this.drafts.get(key);
    if (stream?.ended) return; // a draft that comes after its answer must not show up below it
    if (!stream) {
      stream = { next: undefined, shownAt: 0, touchedAt: now, timer: undefined, busy: Promise.resolve(), ended: false };
      this.drafts.set(key, stream);
    }
    stream.next = text;
    stream.touchedAt = now;
    if (stream.timer) return; // a draft is due: it shows the newest text
    const show = (draftStream: DraftStream): void => {
      draftStream.timer = undefined;
      const next = draftStream.next;
      draftStream.next = undefined;
      if (next === undefined) return;
      // From its start, so that drafts asked for while this one is under way wait their interval too.
      draftStream.shownAt = Date.now();
      draftStream.busy = draftStream.busy.then(() => this.showDraft(channel, target, replyTo, next).finally(() => (draftStream.shownAt = Date.now())));
    };
    const wait = stream.shownAt + (channel.draftIntervalMs ?? 0) - now;
    if (wait <= 0) show(stream);
    else stream.timer = setTimeout(show, wait, stream);
  }

  /**
   * Shows the command a turn runs for the answer to `replyTo`, where the channel shows tool
   * progress (`show_tool_progress`). Not after that answer was delivered (a late request must
   * not bring the dots back below it). Never waited for; a failure is only logged.
   */
  toolProgress(channelId: string, target: ConversationTarget, replyTo: string | undefined, command: string): void {
    const channel = this.host.adapter(channelId);
    const config = this.host.channels().find((c) => c.id === channelId);
    if (!channel?.toolProgress || this.host.stopping() || !config || !showsToolProgress(config)) return;
    if (replyTo !== undefined && this.drafts.get(streamKey(channelId, target, replyTo))?.ended) return;
    channel
      .toolProgress(target, replyTo, command)
      .catch((error: unknown) => this.host.logger.debug(`${channelId}: could not show tool progress: ${error instanceof Error ? error.message : String(error)}`));
  }

  private forgetDrafts(now: number): void {
    for (const [key, stream] of this.drafts) if (now - stream.touchedAt > DRAFT_FORGOTTEN_MS) this.drafts.delete(key);
  }

  private async showDraft(channel: ChannelAdapter, target: ConversationTarget, replyTo: string, text: string): Promise<void> {
    const { state, logger } = this.host;
    const at = targetKey(target);
    try {
      const shown = await channel.draft!(target, replyTo, text, state.draftOf(channel.id, at, replyTo) ?? undefined);
      if (text === '') state.dropDraft(channel.id, at, replyTo);
      else if (shown) state.recordDraft(channel.id, at, replyTo, shown);
    } catch (error) {
      logger.debug(`${channel.id}: draft of the answer to ${JSON.stringify(replyTo)} not shown: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /**
   * Ends the streaming of the answer to `replyTo`: a draft due is dropped, one under way is
   * waited for, and later ones are ignored until the stream is forgotten.
   */
  private async endDraft(channelId: string, target: ConversationTarget, replyTo: string): Promise<string | undefined> {
    const key = streamKey(channelId, target, replyTo);
    const now = Date.now();
    this.forgetDrafts(now);
    const stream = this.drafts.get(key) ?? { next: undefined, shownAt: 0, touchedAt: now, timer: undefined, busy: Promise.resolve(), ended: true };
    clearTimeout(stream.timer);
    stream.ended = true;
    stream.touchedAt = now;
    if (this.host.adapter(channelId)?.draft) this.drafts.set(key, stream);
    await stream.busy;
    return this.host.state.draftOf(channelId, targetKey(target), replyTo) ?? undefined;
  }

  private track<T>(delivery: Promise<T>): Promise<T> {
    this.delivering.add(delivery);
    void delivery.catch(() => {}).finally(() => this.delivering.delete(delivery));
    return delivery;
  }

  private async deliver(request: SendRequest, ref: DeliveryRef | undefined): Promise<SendResult> {
    const { logger } = this.host;
    const channel = this.host.adapter(request.channel);
    if (!channel) throw new ClawError('io', `${request.channel} is not running`, { suggestion: 'see its state with: xgw status' });
    const earlier = ref && this.progress(ref);
    if (earlier?.complete) return { status: 'duplicate', message_ids: earlier.messageIds };
    const target = conversationOf(request);
    // The answer takes the place of its draft (a duplicate, above, found it replaced already).
    const draft = request.replyTo === undefined ? undefined : await this.endDraft(channel.id, target, request.replyTo);
    const { messageIds } = await channel.send(
      {
        ...target,
        replyTo: request.replyTo,
        text: request.text,
        ...(request.notice ? { notice: request.notice } : {}),
        ...(request.files?.length ? { files: request.files } : {}),
        ...(request.agent ? { agent: request.agent } : {}),
      },
      { sent: earlier?.messageIds, draft, onPart: ref && ((ids) => this.recordProgress(ref, ids, false)) },
    );
    if (ref) this.recordProgress(ref, messageIds, true);
    if (draft !== undefined) this.host.state.dropDraft(channel.id, targetKey(target), request.replyTo!);
    const resumed = earlier?.messageIds.length ? ` (resumed after ${earlier.messageIds.length} part(s) sent before)` : '';
    logger.info(`${channel.id}: delivered ${messageIds.length} message(s) to ${JSON.stringify(request.peer)}${ref ? ` (key ${ref.key})` : ''}${resumed}`);
    return { status: 'delivered', message_ids: messageIds };
  }

  /** What was sent under a key: what this process could not write down, else the stored record. */
  private progress(ref: DeliveryRef): DeliveryProgress | null {
    return this.unrecorded.get(refId(ref)) ?? this.host.state.deliveryProgress(ref);
  }

  /**
   * Writes down the parts sent so far. The parts are out, so a failed write must not fail the
   * delivery (a retry would send them again): it is logged, and this process remembers them.
   */
  private recordProgress(ref: DeliveryRef, messageIds: readonly string[], complete: boolean): void {
    const id = refId(ref);
    try {
      this.host.state.recordDelivery(ref, messageIds, complete);
      this.unrecorded.delete(id);
    } catch (error) {
      this.unrecorded.set(id, { messageIds: [...messageIds], complete });
      this.host.logger.error(`${ref.channelId}: could not record the delivery under key ${ref.key} (${error instanceof Error ? error.message : String(error)}); it is remembered until xgw stops`);
    }
  }
}

/** The key of a delivery: the idempotency key within its channel and conversation. */
function deliveryRef(request: SendRequest, key: string): DeliveryRef {
  return { channelId: request.channel, target: targetKey(conversationOf(request)), key };
}

function conversationOf(request: SendRequest): ConversationTarget {
  return { peerId: request.peer, conversationType: request.conversationType ?? 'dm', conversationId: request.conversation ?? request.peer };
}

/** A conversation of a channel as the state keys it. */
function targetKey(target: ConversationTarget): string {
  return [target.conversationType, target.conversationId, target.peerId].map(encodeSegment).join(':');
}

/** The streaming of the answer to `replyTo` in a conversation (see Delivery.draft). */
function streamKey(channelId: string, target: ConversationTarget, replyTo: string): string {
  return `${channelId}\u0000${targetKey(target)}\u0000${replyTo}`;
}

function refId(ref: DeliveryRef): string {
  return JSON.stringify([ref.channelId, ref.target, ref.key]);
}
