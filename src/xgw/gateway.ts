import { isDeepStrictEqual } from 'node:util';
import { encodeSegment, formatAddress } from '../core/address.js';
import { storeFile } from '../core/agent-files.js';
import { agentInboxPath, INBOX_CONSUMER } from '../core/layout.js';
import { ClawError, isClawError, usageError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { formatMessageContent, type Attachment, type NoticeKind } from '../core/message.js';
import { MAX_CONTENT_BYTES, openThread } from '../thread/index.js';
import { noticeFor, welcomeNotice } from './notices.js';
import { PeerRateLimit } from './rate-limit.js';
import { agentExists, findRoute, requireAgentId } from './route.js';
import { settleWithin } from './settle.js';
import { ChannelSupervisor, type SupervisorOptions } from './supervisor.js';
import { MAX_CODES_PER_PEER, MAX_PENDING_PAIRINGS, PAIRING_TTL_WHEN_FULL_MS, type DeliveryProgress, type DeliveryRef, type GatewayState } from './state.js';
import {
  showsToolProgress,
  splitChannelId,
  type ConversationTarget,
  type ChannelAdapter,
  type ChannelConfig,
  type ChannelContext,
  type ChannelStatus,
  type InboundMessage,
  type InboundOutcome,
  type OutboundFile,
  type XgwConfig,
} from './types.js';

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

export interface GatewayOptions {
  home: string;
  /** The config it starts with; `reconfigure` replaces it. */
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
/**
 * Shortest time between two typing actions in one conversation: Telegram shows one for 5 s, and
 * a run asks every 4 s (so this must stay below that, or every other ask would be dropped).
 */
export const TYPING_INTERVAL_MS = 3_000;

/** The streaming of one answer (see Gateway.draft). */
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
  /** Conversations told that their agent is stopped, until a message finds it started again. */
  private readonly toldStopped = new Set<string>();
  /** Answers being streamed (see `draft`), by channel, conversation and the message answered. */
  private readonly drafts = new Map<string, DraftStream>();
  /** When typing was last shown per conversation (see `typing`). */
  private readonly typingShown = new Map<string, number>();

  /** Routes, access and channel settings in force (see `reconfigure`). */
  private config: XgwConfig;
  /** One reconfiguration at a time. */
  private reconfiguring: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: GatewayOptions) {
    this.config = options.config;
  }

  get currentConfig(): XgwConfig {
    return this.config;
  }

  /**
   * Takes a new config while running (`xgw reload`). Routes, and a channel's `allow` and
   * `rate_limit` (which only the gateway reads), apply from the next message; a channel whose
   * other settings changed is stopped and started again with them, a new one is started, a
   * removed one stopped — each after the deliveries under way — and every other channel keeps
   * running untouched (a web chat's open sockets, Telegram's long poll). The adapters are all
   * built before anything changes, so one that cannot be (its token variable unset) leaves the
   * running config as it was. Resolves once the started channels made their first start attempt
   * (or after `waitMs`).
   */
  reconfigure(next: XgwConfig, build: (channel: ChannelConfig) => Promise<ChannelAdapter>, waitMs: number): Promise<ConfigChanges> {
    const run = this.reconfiguring.then(() => this.applyConfig(next, build, waitMs));
    this.reconfiguring = run.catch(() => {});
    return run;
  }

  private async applyConfig(next: XgwConfig, build: (channel: ChannelConfig) => Promise<ChannelAdapter>, waitMs: number): Promise<ConfigChanges> {
    const before = new Map(this.config.channels.map((channel) => [channel.id, channel]));
    const nextIds = new Set(next.channels.map((channel) => channel.id));
    const changes: ConfigChanges = {
      started: next.channels.filter((channel) => !before.has(channel.id)).map((channel) => channel.id),
      restarted: next.channels.filter((channel) => before.has(channel.id) && !sameAdapterSettings(before.get(channel.id)!, channel)).map((channel) => channel.id),
      updated: next.channels
        .filter((channel) => before.has(channel.id) && sameAdapterSettings(before.get(channel.id)!, channel) && !isDeepStrictEqual(before.get(channel.id), channel))
        .map((channel) => channel.id),
      stopped: [...before.keys()].filter((id) => !nextIds.has(id)),
      routes: !isDeepStrictEqual(this.config.routes, next.routes),
    };
    if (this.stopping) throw new ClawError('io', 'xgw is stopping', { suggestion: 'its next start reads the config' });
    const adapters = await Promise.all(next.channels.filter((channel) => changes.started.includes(channel.id) || changes.restarted.includes(channel.id)).map((channel) => build(channel)));
    this.config = next;
    for (const id of [...changes.updated, ...changes.restarted, ...changes.stopped]) {
      // A peer's count starts over under a new limit; a stopped channel's is forgotten.
      if (!isDeepStrictEqual(before.get(id)?.rate_limit, next.channels.find((channel) => channel.id === id)?.rate_limit)) this.rates.delete(id);
    }
    const retiring = [...changes.restarted, ...changes.stopped];
    if (retiring.length > 0) {
      await settleWithin(Promise.allSettled([...this.delivering]), STOP_DELIVERIES_MS);
      await Promise.allSettled(retiring.map((id) => this.retireChannel(id)));
    }
    const firsts = adapters.map((adapter) => this.launchChannel(adapter));
    await settleWithin(Promise.all(firsts), waitMs);
    const { logger } = this.options;
    const said = (Object.entries(changes) as [string, string[] | boolean][]).flatMap(([what, value]) =>
      value === true ? [`${what} changed`] : Array.isArray(value) && value.length > 0 ? [`${what}: ${value.join(', ')}`] : [],
    );
    logger.info(`config reloaded (${said.join('; ') || 'nothing changed'})`);
    return changes;
  }

  /** Stops a channel and forgets it. */
  private async retireChannel(id: string): Promise<void> {
    const running = this.supervisors.get(id) ?? this.channels.get(id);
    this.channels.delete(id);
    this.supervisors.delete(id);
    await running?.stop();
  }

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
      receive: (message, explicitAgent) => this.receive(message, explicitAgent),
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
    const agent = explicitAgent ?? findRoute(this.config.routes, channel.id, message.peerId)?.agent;
    if (!agent) {
      logger.warn(`${channel.id}: no route for ${JSON.stringify(message.peerId)}`);
      return { kind: 'no_route' };
    }
    if (!agentExists(home, agent)) {
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
    if (message.unsupported) {
      logger.info(`${channel.id}: ${JSON.stringify(message.peerId)} sent ${message.unsupported}, which no agent takes yet`);
      return { kind: 'unsupported', what: message.unsupported };
    }
    const attachments = message.files?.length ? await this.storeFiles(channel, message, agent) : [];
    if (!Array.isArray(attachments)) return attachments;
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
      attachments,
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
    const thread = openThread(agentInboxPath(home, agent), { home });
    try {
      // The channel id has exactly one ':' (see its schema); the other segments are encoded.
      const key = `${channel.id}:${encodeSegment(message.conversationId)}:${encodeSegment(message.messageId)}`;
      const { id: eventId, duplicate } = thread.pushOnce({ source, type: 'message', content, idempotency_key: key });
      const agentStopped = thread.consumer(INBOX_CONSUMER)?.subscribed !== true;
      const conversation = `${agent}:${channel.id}:${encodeSegment(message.conversationId)}`;
      const addressed = message.conversationType === 'dm' || message.addressed === true;
      const notify = agentStopped && addressed && !duplicate && !this.toldStopped.has(conversation);
      if (notify) this.toldStopped.add(conversation);
      if (!agentStopped) this.toldStopped.delete(conversation);
      logger.info(`${channel.id}: ${duplicate ? 'duplicate of' : 'pushed'} event ${eventId} from ${JSON.stringify(message.peerId)} to ${agent}${agentStopped ? ' (stopped: it waits)' : ''}`);
      return { kind: 'accepted', agent, eventId, duplicate, agentStopped, notify };
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
   * Downloads the message's files into the agent's `files/` (see files.ts), within the channel's
   * `media` limits: a file too large, past the peer's quota of the day, or that cannot be fetched
   * is the message's outcome (the person is told), and nothing of the message reaches the agent.
   */
  private async storeFiles(channel: ChannelConfig, message: InboundMessage, agent: string): Promise<Attachment[] | InboundOutcome> {
    const { state, logger, home } = this.options;
    const { max_bytes: maxBytes, peer_daily_bytes: quota } = channel.media;
    const adapter = this.channels.get(channel.id);
    const day = new Date().toISOString().slice(0, 10);
    const attachments: Attachment[] = [];
    for (const file of message.files ?? []) {
      const refused = (reason: 'file_too_large' | 'over_quota'): InboundOutcome => {
        logger.info(`${channel.id}: refused a file from ${JSON.stringify(message.peerId)}: ${reason === 'file_too_large' ? `more than ${maxBytes} bytes` : `past the ${quota} bytes a day`}`);
        return { kind: 'refused', reason, limit_bytes: reason === 'file_too_large' ? maxBytes : quota };
      };
      if ((file.bytes ?? 0) > maxBytes) return refused('file_too_large');
      const used = state.mediaUsed(channel.id, message.peerId, day);
      if (used + (file.bytes ?? 0) > quota) return refused('over_quota');
      let bytes: Buffer;
      try {
        if (!adapter?.download) throw new ClawError('io', `${channel.id} cannot download files`);
        bytes = await adapter.download(file, maxBytes);
      } catch (error) {
        if (isClawError(error, 'usage')) return refused('file_too_large');
        logger.warn(`${channel.id}: could not fetch a file from ${JSON.stringify(message.peerId)}: ${error instanceof Error ? error.message : String(error)}`);
        return { kind: 'file_failed' };
      }
      if (used + bytes.length > quota) return refused('over_quota');
      const path = storeFile(home, agent, bytes, file);
      state.recordMediaUse(channel.id, message.peerId, day, bytes.length);
      attachments.push({ type: file.kind, path, bytes: bytes.length, ...(file.mime_type ? { mime_type: file.mime_type } : {}), ...(file.name ? { name: file.name } : {}) });
    }
    return attachments;
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
    if (request.text.trim() === '' && !request.files?.length) return Promise.reject(usageError('the text is empty', 'pass --text or text on stdin'));
    if (!this.config.channels.some((channel) => channel.id === request.channel)) {
      const ids = this.config.channels.map((channel) => channel.id).join(', ') || 'none';
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

  /**
   * Shows that the agent works on an answer in this conversation, if its channel can. At most
   * once per TYPING_INTERVAL_MS per conversation, however many runs ask: Telegram shows it for 5 s.
   * Never waited for, and a failure is only logged: it is a courtesy, not a delivery.
   */
  typing(channelId: string, target: ConversationTarget): void {
    const channel = this.channels.get(channelId);
    if (!channel?.typing || this.stopping) return;
    const key = `${channelId}\u0000${target.conversationType}\u0000${target.conversationId}`;
    const now = Date.now();
    if (now - (this.typingShown.get(key) ?? 0) < TYPING_INTERVAL_MS) return;
    for (const [shown, at] of this.typingShown) if (now - at >= TYPING_INTERVAL_MS) this.typingShown.delete(shown);
    this.typingShown.set(key, now);
    channel.typing(target).catch((error: unknown) => this.options.logger.debug(`${channelId}: could not show typing: ${error instanceof Error ? error.message : String(error)}`));
  }

  /**
   * Shows the answer to `replyTo` as it is written, where the channel streams (its `stream`
   * setting and a `draft` method): at most once per the channel's draft interval per answer, the
   * newest text winning, one draft call at a time. Never waited for, and a failure is only logged:
   * the answer itself comes through `send`, which replaces the draft (see `deliver`).
   */
  draft(channelId: string, target: ConversationTarget, replyTo: string, text: string): void {
    const channel = this.channels.get(channelId);
    const config = this.config.channels.find((c) => c.id === channelId);
    if (!channel?.draft || this.stopping || !config || !('stream' in config) || !config.stream) return;
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
    const channel = this.channels.get(channelId);
    const config = this.config.channels.find((c) => c.id === channelId);
    if (!channel?.toolProgress || this.stopping || !config || !showsToolProgress(config)) return;
    if (replyTo !== undefined && this.drafts.get(streamKey(channelId, target, replyTo))?.ended) return;
    channel
      .toolProgress(target, replyTo, command)
      .catch((error: unknown) => this.options.logger.debug(`${channelId}: could not show tool progress: ${error instanceof Error ? error.message : String(error)}`));
  }

  private forgetDrafts(now: number): void {
    for (const [key, stream] of this.drafts) if (now - stream.touchedAt > DRAFT_FORGOTTEN_MS) this.drafts.delete(key);
  }

  private async showDraft(channel: ChannelAdapter, target: ConversationTarget, replyTo: string, text: string): Promise<void> {
    const { state, logger } = this.options;
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
    if (this.channels.get(channelId)?.draft) this.drafts.set(key, stream);
    await stream.busy;
    return this.options.state.draftOf(channelId, targetKey(target), replyTo) ?? undefined;
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
    if (draft !== undefined) this.options.state.dropDraft(channel.id, targetKey(target), request.replyTo!);
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
    const channel = this.config.channels.find((c) => c.id === id);
    if (!channel) throw new ClawError('not_found', `no channel ${id} in the xgw config`, { suggestion: 'see the channels with: xgw status' });
    return channel;
  }
}

/** What `reconfigure` did, by channel id. */
export interface ConfigChanges {
  /** Channels new in the config. */
  started: string[];
  /** Channels whose settings changed beyond `allow` and `rate_limit`: stopped, and started with the new ones. */
  restarted: string[];
  /** Channels whose `allow` or `rate_limit` changed, applied without a restart. */
  updated: string[];
  /** Channels no longer in the config. */
  stopped: string[];
  /** Whether the routes changed. */
  routes: boolean;
}

/** The settings only the gateway reads: a change of them is applied without restarting the channel. */
const GATEWAY_SETTINGS = ['allow', 'rate_limit'] as const;

/** Whether two configs of one channel differ only in what the gateway alone reads. */
function sameAdapterSettings(a: ChannelConfig, b: ChannelConfig): boolean {
  const adapterPart = (channel: ChannelConfig) => Object.fromEntries(Object.entries(channel).filter(([key]) => !(GATEWAY_SETTINGS as readonly string[]).includes(key)));
  return isDeepStrictEqual(adapterPart(a), adapterPart(b));
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

/** The streaming of the answer to `replyTo` in a conversation (see Gateway.draft). */
function streamKey(channelId: string, target: ConversationTarget, replyTo: string): string {
  return `${channelId}\u0000${targetKey(target)}\u0000${replyTo}`;
}

function refId(ref: DeliveryRef): string {
  return JSON.stringify([ref.channelId, ref.target, ref.key]);
}
