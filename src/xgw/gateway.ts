import { isDeepStrictEqual } from 'node:util';
import { ClawError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { noticeFor, welcomeNotice } from './notices.js';
import { requireAgentId } from './route.js';
import { Access } from './access.js';
import { Delivery, type SendRequest, type SendResult } from './delivery.js';
import { Inbound } from './inbound.js';
import { createSqliteStore, type ThreadStore } from '../thread/index.js';
import { settleWithin } from './settle.js';
import { ChannelSupervisor, type SupervisorOptions } from './supervisor.js';
import type { GatewayState } from './state.js';
import type { ChannelAdapter, ChannelContext } from './channel.js';
import type { ControlSource } from './control-source.js';
import type { ConversationTarget, ChannelConfig, ChannelStatus, InboundMessage, InboundOutcome, XgwConfig } from './types.js';

export interface GatewayOptions {
  home: string;
  /** The config it starts with; `reconfigure` replaces it. */
  config: XgwConfig;
  state: GatewayState;
  logger: Logger;
  /** Where the agents' inboxes are. Default: the home's SQLite files. */
  store?: ThreadStore;
  /** How channels launched with `launchChannel` are kept started (start timeout, retry delays). */
  supervisor?: SupervisorOptions;
  /**
   * Which gateway owns each channel (ownership.ts), where hosts share the store: one this gateway
   * does not own is built but not started (`standBy`, `takeOver`). Default: it owns every channel.
   */
  ownership?: { owns(channelId: string): boolean; ownerOf(channelId: string): string | undefined };
  /** For the web chat's status page; see ChannelContext. */
  systemStatus?: () => Promise<unknown>;
  /** For the web chat's control page; see ChannelContext. */
  control?: ControlSource;
}

/**
 * The gateway proper, transport-free: the channels it runs and the config in force, and the door
 * for messages both ways: access and routing (access.ts) and the push into an agent's inbox
 * (inbound.ts) for inbound ones; idempotent delivery through a channel (delivery.ts) for outbound
 * ones. The daemon wires channels and the control socket to it; tests can drive it directly.
 */
export class Gateway {
  private readonly channels = new Map<string, ChannelAdapter>();
  private readonly supervisors = new Map<string, ChannelSupervisor>();
  /** Channels another host's gateway owns: built, not started. */
  private readonly parked = new Map<string, ChannelAdapter>();
  /** The first start attempts of launched channels. */
  private readonly launches: Promise<void>[] = [];
  private readonly access: Access;
  private readonly inbound: Inbound;
  private readonly delivery: Delivery;
  private stopping = false;

  /** Routes, access and channel settings in force (see `reconfigure`). */
  private config: XgwConfig;
  /** One reconfiguration at a time. */
  private reconfiguring: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: GatewayOptions) {
    this.config = options.config;
    const store = options.store ?? createSqliteStore(options.home);
    // An agent's directory is on one host; its inbox, in a shared store, is what says it exists.
    this.access = new Access(options.home, options.state, options.logger, store.kind === 'sqlite');
    this.inbound = new Inbound(options.home, store, options.state, options.logger, (id) => this.channels.get(id));
    this.delivery = new Delivery({
      state: options.state,
      logger: options.logger,
      adapter: (id) => this.channels.get(id),
      channels: () => this.config.channels,
      stopping: () => this.stopping,
    });
  }

  get currentConfig(): XgwConfig {
    return this.config;
  }

  /**
   * Takes a new config while running (`xgw reload`). Routes, and a channel's `allow`,
   * `rate_limit` and `groups` (which only the gateway reads), apply from the next message; a channel whose
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
      if (!isDeepStrictEqual(before.get(id)?.rate_limit, next.channels.find((channel) => channel.id === id)?.rate_limit)) this.access.forgetRates(id);
    }
    const retiring = [...changes.restarted, ...changes.stopped];
    if (retiring.length > 0) {
      await this.delivery.settle();
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
    this.parked.delete(id);
    this.channels.delete(id);
    this.supervisors.delete(id);
    await running?.stop();
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
      ...(this.options.control ? { control: this.options.control } : {}),
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
    if (this.options.ownership?.owns(channel.id) === false) {
      this.parked.set(channel.id, channel);
      return Promise.resolve();
    }
    const supervisor = new ChannelSupervisor(channel, this.context(), this.options.supervisor);
    this.channels.set(channel.id, channel);
    this.supervisors.set(channel.id, supervisor);
    const first = supervisor.start();
    this.launches.push(first);
    return first;
  }

  /** Starts a channel kept on standby: this gateway owns it now. */
  async takeOver(id: string): Promise<void> {
    const parked = this.parked.get(id);
    if (!parked || this.stopping) return;
    this.parked.delete(id);
    await this.launchChannel(parked);
  }

  /** Stops a channel another gateway owns now (after the deliveries under way), and keeps it built for a takeover. */
  async standBy(id: string): Promise<void> {
    const adapter = this.channels.get(id);
    if (!adapter) return;
    await this.delivery.settle();
    await this.retireChannel(id);
    this.parked.set(id, adapter);
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
    const standby = [...this.parked.values()].map(({ id, type }): ChannelStatus => ({ id, type, state: 'standby', detail: `owned by ${this.options.ownership?.ownerOf(id) ?? 'another host'}` }));
    return [...this.channelList().map((channel) => (this.supervisors.get(channel.id) ?? channel).status()), ...standby];
  }

  /**
   * Stops every channel, cancelling starts under way and pending retries. Deliveries under way
   * finish first (see Delivery.settle): a part the platform has been handed must be
   * written down, or the retry sends it again. New ones are refused meanwhile as unavailable
   * (`io`), which a retrying client waits out.
   */
  async stopChannels(): Promise<void> {
    this.stopping = true;
    await this.delivery.settle();
    await Promise.allSettled(this.channelList().map((channel) => (this.supervisors.get(channel.id) ?? channel).stop()));
  }

  /**
   * Admits, routes and stores one inbound message: access.ts decides whether and to which agent,
   * inbound.ts pushes it there (once, however often the platform delivers it).
   * `explicitAgent` (a terminal chat's `--agent`) picks the agent instead of the routes.
   */
  async receive(message: InboundMessage, explicitAgent?: string): Promise<InboundOutcome> {
    if (explicitAgent !== undefined) requireAgentId(explicitAgent);
    const channel = this.channelConfig(message.channelId);
    if (awaitsMention(channel, message)) {
      // Everyone's words in the group, admitted or not: they start no turn, and the group is where the bot was put.
      this.options.state.groupContext.keep(message, channel.groups.context);
      this.options.logger.debug(`${channel.id}: kept message ${JSON.stringify(message.messageId)} of group ${JSON.stringify(message.conversationId)} as its pending context`);
      return { kind: 'kept' };
    }
    const decided = this.access.decide(channel, this.config.routes, message, explicitAgent);
    return 'kind' in decided ? decided : this.inbound.push(channel, message, decided.agent);
  }

  /** Whether the peer's messages reach agents (see Access.admits). */
  admits(channelId: string, peerId: string): boolean {
    return this.access.admits(this.channelConfig(channelId), peerId);
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

  /** See Delivery.send. */
  send(request: SendRequest): Promise<SendResult> {
    return this.delivery.send(request);
  }

  /** See Delivery.typing. */
  typing(channelId: string, target: ConversationTarget): void {
    this.delivery.typing(channelId, target);
  }

  /** See Delivery.draft. */
  draft(channelId: string, target: ConversationTarget, replyTo: string, text: string): void {
    this.delivery.draft(channelId, target, replyTo, text);
  }

  /** See Delivery.toolProgress. */
  toolProgress(channelId: string, target: ConversationTarget, replyTo: string | undefined, command: string): void {
    this.delivery.toolProgress(channelId, target, replyTo, command);
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
  /** Channels whose settings changed beyond `allow`, `rate_limit` and `groups`: stopped, and started with the new ones. */
  restarted: string[];
  /** Channels whose `allow`, `rate_limit` or `groups` changed, applied without a restart. */
  updated: string[];
  /** Channels no longer in the config. */
  stopped: string[];
  /** Whether the routes changed. */
  routes: boolean;
}

/** The settings only the gateway reads: a change of them is applied without restarting the channel. */
const GATEWAY_SETTINGS = ['allow', 'rate_limit', 'groups'] as const;

/** A group message that does not address the bot, where the channel answers only those that do. */
function awaitsMention(channel: ChannelConfig, message: InboundMessage): channel is Extract<ChannelConfig, { groups: unknown }> {
  return message.conversationType !== 'dm' && message.addressed !== true && 'groups' in channel && channel.groups.require_mention;
}

/** Whether two configs of one channel differ only in what the gateway alone reads. */
function sameAdapterSettings(a: ChannelConfig, b: ChannelConfig): boolean {
  const adapterPart = (channel: ChannelConfig) => Object.fromEntries(Object.entries(channel).filter(([key]) => !(GATEWAY_SETTINGS as readonly string[]).includes(key)));
  return isDeepStrictEqual(adapterPart(a), adapterPart(b));
}
