import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { encodeSegment, formatAddress } from '../core/address.js';
import { ClawError, usageError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { formatMessageContent, type NoticeKind } from '../core/message.js';
import { MAX_CONTENT_BYTES, openThread } from '../thread/index.js';
import { noticeFor, welcomeNotice } from './notices.js';
import { PeerRateLimit } from './rate-limit.js';
import { findRoute, requireAgentId } from './route.js';
import { settleWithin } from './settle.js';
import { ChannelSupervisor, type SupervisorOptions } from './supervisor.js';
import { MAX_CODES_PER_PEER, MAX_PENDING_PAIRINGS, PAIRING_TTL_WHEN_FULL_MS, type DeliveryProgress, type DeliveryRef, type GatewayState } from './state.js';
import { splitChannelId, type ChannelAdapter, type ChannelConfig, type ChannelContext, type ChannelStatus, type InboundMessage, type InboundOutcome, type XgwConfig } from './types.js';

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
}

export interface SendResult {
  status: 'delivered' | 'duplicate';
  message_ids: string[];
}

export interface GatewayOptions {
  home: string;
  config: XgwConfig;
  state: GatewayState;
  logger: Logger;
  /** How channels launched with `launchChannel` are kept started (start timeout, retry delays). */
  supervisor?: SupervisorOptions;
  /** For the web chat's status page; see ChannelContext. */
  systemStatus?: () => Promise<unknown>;
}

/**
 * The gateway proper, transport-free: access, routing and the push into an agent's inbox for
 * inbound messages; idempotent delivery through a channel for outbound ones. The daemon wires
 * channels and the control socket to it; tests can drive it directly.
 */
export class Gateway {
  private readonly channels = new Map<string, ChannelAdapter>();
  private readonly supervisors = new Map<string, ChannelSupervisor>();
  /** The first start attempts of launched channels. */
  private readonly launches: Promise<void>[] = [];
  /** Deliveries under way, by key and target: a concurrent retry waits for the first. */
  private readonly inFlight = new Map<string, Promise<SendResult>>();
  /** Deliveries whose record could not be written to the state, by key and target. */
  private readonly unrecorded = new Map<string, DeliveryProgress>();
  /** Every delivery under way, keyed or not: `stopChannels` lets them finish first. */
  private readonly delivering = new Set<Promise<unknown>>();
  private stopping = false;

  /** Per channel: how many messages each peer has sent lately. */
  private readonly rates = new Map<string, PeerRateLimit>();

  constructor(private readonly options: GatewayOptions) {}

  private rateLimit(channel: ChannelConfig): PeerRateLimit {
    let limit = this.rates.get(channel.id);
    if (!limit) {
      limit = new PeerRateLimit(channel.rate_limit);
      this.rates.set(channel.id, limit);
    }
    return limit;
  }

  /** The context a channel starts with. */
  context(): ChannelContext {
    return {
      home: this.options.home,
      logger: this.options.logger,
      state: this.options.state,
      receive: (message) => this.receive(message),
      admits: (channelId, peerId) => this.admits(channelId, peerId),
      noticeFor,
      ...(this.options.systemStatus ? { systemStatus: this.options.systemStatus } : {}),
    };
  }

  /** Starts a channel and waits for it; a failure is thrown, not retried. */
  async startChannel(channel: ChannelAdapter): Promise<void> {
    this.channels.set(channel.id, channel);
    await channel.start(this.context());
  }

  /**
   * Starts a channel in the background and keeps trying until it runs (see ChannelSupervisor).
   * Resolves once the first attempt succeeded or failed; never rejects.
   */
  launchChannel(channel: ChannelAdapter): Promise<void> {
    const supervisor = new ChannelSupervisor(channel, this.context(), this.options.supervisor);
    this.channels.set(channel.id, channel);
    this.supervisors.set(channel.id, supervisor);
    const first = supervisor.start();
    this.launches.push(first);
    return first;
  }

  /** Resolves once every launched channel's first start attempt settled, or after `ms`. */
  async launched(ms: number): Promise<void> {
    await settleWithin(Promise.all(this.launches), ms);
  }

  channelList(): ChannelAdapter[] {
    return [...this.channels.values()];
  }

  /** Each channel's state; a launched channel waiting to try its start again shows as `error`. */
  channelStatuses(): ChannelStatus[] {
    return this.channelList().map((channel) => (this.supervisors.get(channel.id) ?? channel).status());
  }

  /**
   * Stops every channel, cancelling starts under way and pending retries. Deliveries under way
   * finish first (within `STOP_DELIVERIES_MS`): a part the platform has been handed must be
   * written down, or the retry sends it again. New ones are refused meanwhile as unavailable
   * (`io`), which a retrying client waits out.
   */
  async stopChannels(): Promise<void> {
    this.stopping = true;
    await settleWithin(Promise.allSettled([...this.delivering]), STOP_DELIVERIES_MS);
    await Promise.allSettled(this.channelList().map((channel) => (this.supervisors.get(channel.id) ?? channel).stop()));
  }

  /**
   * Admits, routes and stores one inbound message. The push uses the platform's message id as
   * idempotency key, so a message the platform delivers twice reaches the agent once.
   * `explicitAgent` (a terminal chat's `--agent`) picks the agent instead of the routes.
   */
  async receive(message: InboundMessage, explicitAgent?: string): Promise<InboundOutcome> {
    const { logger, state, home } = this.options;
    if (explicitAgent !== undefined) requireAgentId(explicitAgent);
    const channel = this.channelConfig(message.channelId);
    if (!this.admits(channel.id, message.peerId)) {
      if (channel.access === 'allowlist') {
        logger.info(`${channel.id}: ignored a message from ${JSON.stringify(message.peerId)}, who is not on the allowlist`);
        return { kind: 'denied', reason: 'not on the allowlist' };
      }
      if (message.conversationType !== 'dm') {
        // A code posted in a group is public, and strangers there would use up the pending slots.
        logger.info(
          `${channel.id}: ignored a message from ${JSON.stringify(message.peerId)} in ${message.conversationType} ${JSON.stringify(message.conversationId)}: unknown peers pair in a direct chat`,
        );
        return { kind: 'denied', reason: 'unknown peers pair in a direct chat' };
      }
      const request = state.requestPairing(channel.id, message.peerId, message.peerName, Date.now(), message);
      if (request === 'full') {
        logger.warn(
          `${channel.id}: ${JSON.stringify(message.peerId)} asked to pair, but all ${MAX_PENDING_PAIRINGS} pairing slots are taken (see them with: xgw pair list; revoke strangers with: xgw peer revoke ${channel.id} <peer>; codes older than ${PAIRING_TTL_WHEN_FULL_MS / 60_000} min give way to the next asker)`,
        );
        return { kind: 'denied', reason: 'too many pending pairing requests' };
      }
      if (request === 'peer_limit') {
        logger.info(`${channel.id}: ${JSON.stringify(message.peerId)} asked to pair again, but had ${MAX_CODES_PER_PEER} codes today`);
        return { kind: 'denied', reason: 'too many codes for this peer today' };
      }
      logger.info(`${channel.id}: pairing code ${request.code} for ${JSON.stringify(message.peerId)} (approve with: xgw pair approve ${request.code})`);
      return { kind: 'pairing', code: request.code, expiresAt: request.expires_at };
    }
    const agent = explicitAgent ?? findRoute(this.options.config.routes, channel.id, message.peerId)?.agent;
    if (!agent) {
      logger.warn(`${channel.id}: no route for ${JSON.stringify(message.peerId)}`);
      return { kind: 'no_route' };
    }
    const inbox = join(home, 'agents', agent, 'inbox');
    if (!existsSync(join(inbox, 'events.db'))) {
      logger.error(`${channel.id}: the route for ${JSON.stringify(message.peerId)} names agent ${agent}, which does not exist`);
      return { kind: 'missing_agent', agent };
    }
    const rate = this.rateLimit(channel).take(message.peerId);
    if (!rate.ok) {
      if (rate.first)
        logger.warn(
          `${channel.id}: ${JSON.stringify(message.peerId)} sent more than ${channel.rate_limit.messages} messages in ${channel.rate_limit.per_seconds} s; refusing their messages for ${rate.retryAfterSeconds} s`,
        );
      const { messages: limit, per_seconds } = channel.rate_limit;
      return { kind: 'rate_limited', limit, per_seconds, retry_after_seconds: rate.retryAfterSeconds, notify: rate.first };
    }
    const { type: channelType, instance } = splitChannelId(channel.id);
    const source = formatAddress({
      kind: 'external',
      channelType,
      instance,
      conversationType: message.conversationType,
      conversationId: message.conversationId,
      peerId: message.peerId,
    });
    const content = formatMessageContent({
      text: message.text,
      attachments: [],
      reply_context: {
        kind: 'external',
        channel_id: channel.id,
        conversation_type: message.conversationType,
        conversation_id: message.conversationId,
        peer_id: message.peerId,
        message_id: message.messageId,
      },
      ...(message.addressed !== undefined && { addressed: message.addressed }),
    });
    // Refused whole rather than stored cut: a platform (or a client) may send more than a thread takes.
    if (Buffer.byteLength(content) > MAX_CONTENT_BYTES) {
      logger.warn(
        `${channel.id}: refused message ${JSON.stringify(message.messageId)} from ${JSON.stringify(message.peerId)}: ${Buffer.byteLength(content)} bytes, more than the ${MAX_CONTENT_BYTES} an inbox event holds`,
      );
      return { kind: 'refused', reason: 'too_long', limit_bytes: MAX_CONTENT_BYTES };
    }
    const thread = openThread(inbox, { home });
    try {
      // The channel id has exactly one ':' (see its schema); the other segments are encoded.
      const key = `${channel.id}:${encodeSegment(message.conversationId)}:${encodeSegment(message.messageId)}`;
      const { id: eventId, duplicate } = thread.pushOnce({ source, type: 'message', content, idempotency_key: key });
      logger.info(`${channel.id}: ${duplicate ? 'duplicate of' : 'pushed'} event ${eventId} from ${JSON.stringify(message.peerId)} to ${agent}`);
      return { kind: 'accepted', agent, eventId, duplicate };
    } finally {
      thread.close();
    }
  }

  /** Whether the peer's messages reach agents (see `receive`); a peer that is not may still pair. */
  admits(channelId: string, peerId: string): boolean {
    const channel = this.channelConfig(channelId);
    // Under `allowlist` the list alone decides: a peer approved while the channel paired is not on it.
    return channel.access === 'open' || channel.allow.includes(peerId) || (channel.access === 'pairing' && this.options.state.isAdmitted(channel.id, peerId));
  }

  /**
   * Tells each peer approved by `xgw pair approve` (in this process's absence, or just now) that
   * it may write, and passes on the message it first wrote. What fails (its channel not up yet)
   * is tried again on the next call: at start and after each approval.
   */
  async welcomeApproved(): Promise<void> {
    const { state, logger } = this.options;
    for (const welcome of state.pendingWelcomes()) {
      const first = welcome.first_message;
      try {
        await this.send({
          channel: welcome.channel_id,
          peer: welcome.peer_id,
          conversation: first?.conversationId ?? welcome.peer_id,
          idempotencyKey: `welcome:${welcome.admitted_at}`,
          text: welcomeNotice(first !== null),
        });
        const outcome = first === null ? null : await this.receive(first);
        if (outcome && outcome.kind !== 'accepted') logger.warn(`${welcome.channel_id}: the first message of ${JSON.stringify(welcome.peer_id)} was not passed on (${outcome.kind})`);
        state.welcomed(welcome.channel_id, welcome.peer_id);
      } catch (error) {
        logger.warn(`${welcome.channel_id}: could not welcome ${JSON.stringify(welcome.peer_id)} yet: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
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
    if (request.text.trim() === '') return Promise.reject(usageError('the text is empty', 'pass --text or text on stdin'));
    if (!this.options.config.channels.some((channel) => channel.id === request.channel)) {
      const ids = this.options.config.channels.map((channel) => channel.id).join(', ') || 'none';
      return Promise.reject(usageError(`no channel ${request.channel} is configured`, `pass one of the configured channels (${ids}) to --channel`));
    }
    if (this.stopping) return Promise.reject(new ClawError('io', 'xgw is stopping', { suggestion: 'send it again once xgw has started' }));
    if (request.idempotencyKey === undefined) return this.track(this.deliver(request, undefined));
    const ref = deliveryRef(request, request.idempotencyKey);
    const id = refId(ref);
    const running = this.inFlight.get(id);
    if (running) return running.then((result) => ({ ...result, status: 'duplicate' as const }));
    const promise = this.track(this.deliver(request, ref)).finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, promise);
    return promise;
  }

  private track<T>(delivery: Promise<T>): Promise<T> {
    this.delivering.add(delivery);
    void delivery.catch(() => {}).finally(() => this.delivering.delete(delivery));
    return delivery;
  }

  private async deliver(request: SendRequest, ref: DeliveryRef | undefined): Promise<SendResult> {
    const { logger } = this.options;
    const channel = this.channels.get(request.channel);
    if (!channel) throw new ClawError('io', `${request.channel} is not running`, { suggestion: 'see its state with: xgw status' });
    const earlier = ref && this.progress(ref);
    if (earlier?.complete) return { status: 'duplicate', message_ids: earlier.messageIds };
    const { messageIds } = await channel.send(
      {
        peerId: request.peer,
        conversationType: request.conversationType ?? 'dm',
        conversationId: request.conversation ?? request.peer,
        replyTo: request.replyTo,
        text: request.text,
        ...(request.notice ? { notice: request.notice } : {}),
      },
      { sent: earlier?.messageIds, onPart: ref && ((ids) => this.recordProgress(ref, ids, false)) },
    );
    if (ref) this.recordProgress(ref, messageIds, true);
    const resumed = earlier?.messageIds.length ? ` (resumed after ${earlier.messageIds.length} part(s) sent before)` : '';
    logger.info(`${channel.id}: delivered ${messageIds.length} message(s) to ${JSON.stringify(request.peer)}${ref ? ` (key ${ref.key})` : ''}${resumed}`);
    return { status: 'delivered', message_ids: messageIds };
  }

  /** What was sent under a key: what this process could not write down, else the stored record. */
  private progress(ref: DeliveryRef): DeliveryProgress | null {
    return this.unrecorded.get(refId(ref)) ?? this.options.state.deliveryProgress(ref);
  }

  /**
   * Writes down the parts sent so far. The parts are out, so a failed write must not fail the
   * delivery (a retry would send them again): it is logged, and this process remembers them.
   */
  private recordProgress(ref: DeliveryRef, messageIds: readonly string[], complete: boolean): void {
    const id = refId(ref);
    try {
      this.options.state.recordDelivery(ref, messageIds, complete);
      this.unrecorded.delete(id);
    } catch (error) {
      this.unrecorded.set(id, { messageIds: [...messageIds], complete });
      this.options.logger.error(`${ref.channelId}: could not record the delivery under key ${ref.key} (${error instanceof Error ? error.message : String(error)}); it is remembered until xgw stops`);
    }
  }

  private channelConfig(id: string): ChannelConfig {
    const channel = this.options.config.channels.find((c) => c.id === id);
    if (!channel) throw new ClawError('not_found', `no channel ${id} in the xgw config`, { suggestion: 'see the channels with: xgw status' });
    return channel;
  }
}

/** The key of a delivery: the idempotency key within its channel and conversation. */
function deliveryRef(request: SendRequest, key: string): DeliveryRef {
  const target = [request.conversationType ?? 'dm', request.conversation ?? request.peer, request.peer].map(encodeSegment).join(':');
  return { channelId: request.channel, target, key };
}

function refId(ref: DeliveryRef): string {
  return JSON.stringify([ref.channelId, ref.target, ref.key]);
}
