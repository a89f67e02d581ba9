/**
 * How many messages one peer may hand one channel in a window: a person (or a script, or a
 * stranger's bot) pasting a hundred messages in a minute would otherwise start a hundred model
 * turns. A sliding window: the times of the last `limit` accepted messages per peer.
 */
export interface RateLimitSettings {
  messages: number;
  per_seconds: number;
}

export type RateDecision = { ok: true } | { ok: false; retryAfterSeconds: number /** The first refusal since the peer was last let through: the one to tell. */; first: boolean };

/** Past this many peers, those whose windows are empty are forgotten. */
const PRUNE_AT = 10_000;

export class PeerRateLimit {
  private readonly windows = new Map<string, { times: number[]; refused: boolean }>();

  constructor(private readonly settings: RateLimitSettings) {}

  take(peer: string, now = Date.now()): RateDecision {
    const windowMs = this.settings.per_seconds * 1000;
    if (this.windows.size > PRUNE_AT) this.prune(now - windowMs);
    const window = this.windows.get(peer) ?? { times: [], refused: false };
    while (window.times.length > 0 && window.times[0]! <= now - windowMs) window.times.shift();
    this.windows.set(peer, window);
    if (window.times.length < this.settings.messages) {
      window.times.push(now);
      window.refused = false;
      return { ok: true };
    }
    const first = !window.refused;
    window.refused = true;
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((window.times[0]! + windowMs - now) / 1000)), first };
  }

  private prune(before: number): void {
    for (const [peer, window] of this.windows) if ((window.times.at(-1) ?? 0) <= before) this.windows.delete(peer);
  }
}
