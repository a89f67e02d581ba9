import { isHostsOwnChannel } from '../core/address.js';
import type { Logger } from '../core/logger.js';
import { channelKey, type Placements } from '../thread/index.js';
import { splitChannelId } from './types.js';

/** How long a channel's claim lasts by default, unless renewed (`channel_claim_seconds`). */
export const DEFAULT_CLAIM_SECONDS = 30;

const isHostsOwn = (id: string) => isHostsOwnChannel(splitChannelId(id).type);

/** What ownership changes in the gateway: a channel to serve, or to leave to its owner. */
export interface OwnedChannels {
  /** The channels configured now. */
  channelIds(): string[];
  /** This gateway got the channel: start it (resolves after the first start attempt, never rejects). */
  gained(id: string): Promise<void>;
  /** Another host's gateway owns it (`ownerOf`): stop it here, if it runs. */
  lost(id: string): Promise<void>;
}

/**
 * Which gateway serves each channel when hosts share a PostgreSQL store: the one whose claim on
 * `channel:<id>` (placements.ts) holds. Each beat, every third of the claim's time, renews this
 * host's claims and tries the others, so that a channel whose owner died (its claim lapsed) is
 * taken over; on the way out the claims are released, for a takeover without the wait.
 * A channel is served by at most one gateway as long as each beats in time: one that could not
 * renew (the database away, or not answering: a beat then hangs) stops its channels before its
 * claims lapse.
 */
export class ChannelOwnership {
  private readonly held = new Set<string>();
  /** Channels on standby, by the owner they were last seen with. */
  private readonly standby = new Map<string, string>();
  /** When the last beat that renewed every claim began. */
  private renewedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  private inBeat = false;
  private readonly claimMs: number;

  constructor(
    private readonly placements: Placements,
    private readonly host: string,
    private readonly home: string,
    private readonly logger: Logger,
    claimSeconds = DEFAULT_CLAIM_SECONDS,
  ) {
    this.claimMs = Math.round(claimSeconds * 1000);
  }

  /** Whether this gateway owns the channel now. */
  owns(id: string): boolean {
    return isHostsOwn(id) || this.held.has(id);
  }

  /** The host whose gateway owns a channel this one does not, as last seen. */
  ownerOf(id: string): string | undefined {
    return this.standby.get(id);
  }

  /** Beats once now, then every third of the claim's time until `stop`. */
  async start(channels: OwnedChannels): Promise<void> {
    await this.beat(channels);
    this.timer = setInterval(() => {
      // Checked here, not in the beat: one that hangs on a connection nobody answers renews nothing.
      if (this.lapsing()) void this.standDown(channels);
      if (this.inBeat) return;
      this.inBeat = true;
      this.beating = this.beat(channels).finally(() => {
        this.inBeat = false;
      });
    }, this.claimMs / 3);
  }

  /** Stops beating and releases this host's claims. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    for (const id of this.held) await this.placements.release(channelKey(id), this.host).catch(() => {});
    this.held.clear();
  }

  private async beat(channels: OwnedChannels): Promise<void> {
    try {
      await this.placements.seen(this.host, this.home);
      const ids = channels.channelIds().filter((id) => !isHostsOwn(id));
      for (const id of [...this.held]) {
        if (ids.includes(id)) continue;
        this.held.delete(id);
        await this.placements.release(channelKey(id), this.host);
      }
      const beganAt = Date.now();
      for (const id of ids) {
        const { claimed, placement } = await this.placements.claim(channelKey(id), this.host, { ttlMs: this.claimMs });
        if (claimed) {
          this.standby.delete(id);
          if (this.held.has(id)) continue;
          this.held.add(id);
          this.logger.info(`${id}: owned by this gateway (${this.host}) now`);
          // Not awaited: a slow first start (up to its timeout) must not hold back the other renewals.
          void channels.gained(id);
        } else if (this.held.delete(id) || this.standby.get(id) !== placement.host) {
          this.standby.set(id, placement.host);
          this.logger.info(`${id}: on standby, owned by ${placement.host}`);
          await channels.lost(id);
        }
      }
      this.renewedAt = beganAt;
    } catch (error) {
      this.logger.warn(`cannot renew the claims on the channels: ${error instanceof Error ? error.message : String(error)}`);
      if (this.lapsing()) await this.standDown(channels);
    }
  }

  /** Whether the claims went unrenewed so long that they may lapse before the next beat. */
  private lapsing(): boolean {
    return this.held.size > 0 && Date.now() - this.renewedAt >= (this.claimMs * 2) / 3;
  }

  /** Claims not renewed lapse, and another gateway may take the channels then: stop them first. */
  private async standDown(channels: OwnedChannels): Promise<void> {
    const seconds = Math.round((Date.now() - this.renewedAt) / 1000);
    // All at once: the timer's check and a failed beat may both stand down, and each channel stops once.
    const stopping = [...this.held];
    this.held.clear();
    for (const id of stopping) {
      this.standby.set(id, 'nobody');
      this.logger.warn(`${id}: stopped, its claim could not be renewed for ${seconds}s; it starts again once the store answers`);
      await channels.lost(id);
    }
  }
}
