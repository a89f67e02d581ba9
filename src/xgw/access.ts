import type { Logger } from '../core/logger.js';
import { PeerRateLimit } from './rate-limit.js';
import { agentExists, findRoute } from './route.js';
import { MAX_CODES_PER_PEER, MAX_PENDING_PAIRINGS, PAIRING_TTL_WHEN_FULL_MS, type GatewayState } from './state.js';
import type { ChannelConfig, InboundMessage, InboundOutcome, XgwConfig } from './types.js';

/**
 * Who may write through a channel, and to which agent: the channel's access (`open`, `allowlist`,
 * `pairing` and its codes), the routes, and each peer's rate limit. Decides; stores nothing of
 * the message (inbound.ts does).
 */
export class Access {
  /** Per channel: how many messages each peer has sent lately. */
  private readonly rates = new Map<string, PeerRateLimit>();

  constructor(
    private readonly home: string,
    private readonly state: GatewayState,
    private readonly logger: Logger,
    /** Whether an agent has an inbox here; where hosts share a store, its inbox there decides instead (inbound.ts). */
    private readonly checkAgents = true,
  ) {}

  /** Whether the peer's messages reach agents; a peer that is not may still pair. */
  admits(channel: ChannelConfig, peerId: string): boolean {
    // Under `allowlist` the list alone decides: a peer approved while the channel paired is not on it.
    return channel.access === 'open' || channel.allow.includes(peerId) || (channel.access === 'pairing' && this.state.isAdmitted(channel.id, peerId));
  }

  /**
   * The agent a message goes to, or the outcome that ends it here: a peer not admitted (given a
   * pairing code where the channel pairs), no route or no such agent, or past the rate limit.
   * `explicitAgent` (a terminal chat's `--agent`) picks the agent instead of the routes.
   */
  decide(channel: ChannelConfig, routes: XgwConfig['routes'], message: InboundMessage, explicitAgent: string | undefined): { agent: string } | InboundOutcome {
    const { logger, state } = this;
    if (!this.admits(channel, message.peerId)) {
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
    const agent = explicitAgent ?? findRoute(routes, channel.id, message.peerId)?.agent;
    if (!agent) {
      logger.warn(`${channel.id}: no route for ${JSON.stringify(message.peerId)}`);
      return { kind: 'no_route' };
    }
    if (this.checkAgents && !agentExists(this.home, agent)) {
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
    return { agent };
  }

  /** Forgets the peers' counts of a channel: under a new limit they start over, and a stopped channel's go. */
  forgetRates(channelId: string): void {
    this.rates.delete(channelId);
  }

  private rateLimit(channel: ChannelConfig): PeerRateLimit {
    let limit = this.rates.get(channel.id);
    if (!limit) {
      limit = new PeerRateLimit(channel.rate_limit);
      this.rates.set(channel.id, limit);
    }
    return limit;
  }
}
