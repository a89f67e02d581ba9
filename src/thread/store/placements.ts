import type { Sql } from 'postgres';
import { hostName } from '../../core/host.js';

/**
 * Where things run when hosts share one store (issue 26 §2). A placement puts a key on a host:
 * `agent:<id>` (an agent's directory and turns; no expiry, moved by `agent move`) or
 * `channel:<name>` (the gateway that owns a channel; an expiry its heartbeat renews, so another
 * gateway takes the channel over when the owner dies). `hosts` lists the hosts sharing the store,
 * each with its home, so that one host can find another's agents' directories.
 *
 * SQLite has one host: every key is here, every claim succeeds, nothing is stored.
 */
export interface Placements {
  /**
   * Puts `key` on `host`, atomically, only if the key is free, its claim expired, or it is
   * `host`'s already (then renewed). Two hosts claiming at once: exactly one gets it.
   */
  claim(key: string, host: string, options?: ClaimOptions): Promise<ClaimResult>;
  /** Puts `key` on `host` whoever holds it (`agent move`'s switch), without an expiry. */
  assign(key: string, host: string): Promise<Placement>;
  /** Frees `key` if `host` holds it; says whether it did. */
  release(key: string, host: string): Promise<boolean>;
  /** The key's placement, expired or not (`isLive` tells), or null where nobody claimed it. */
  get(key: string): Promise<Placement | null>;
  /** Every placement whose key starts with `prefix` (all by default), by key. */
  list(prefix?: string): Promise<Placement[]>;
  /** Records that `host` runs with this home, now (a daemon calls it as it starts and beats). */
  seen(host: string, home: string): Promise<void>;
  /** The hosts sharing the store, by name. */
  hosts(): Promise<HostEntry[]>;
}

export interface ClaimOptions {
  /** How long the claim lasts unless claimed again (renewed). Default: for ever. */
  ttlMs?: number;
}

export interface ClaimResult {
  claimed: boolean;
  /** The key's placement after the attempt: ours, or the holder's. */
  placement: Placement;
}

export interface Placement {
  key: string;
  host: string;
  /** When the claim ends unless renewed; null: never (an agent's). */
  expiresAt: Date | null;
  updatedAt: Date;
}

export interface HostEntry {
  name: string;
  /** The host's THECLAW_HOME, as that host sees it. */
  home: string;
  seenAt: Date;
}

/** Whether a placement still holds at `now` (one without expiry always does). */
export function isLive(placement: Placement, now = new Date()): boolean {
  return placement.expiresAt === null || placement.expiresAt.getTime() > now.getTime();
}

/** A placement key's forms. */
export const agentKey = (agent: string) => `agent:${agent}`;
export const channelKey = (channel: string) => `channel:${channel}`;

/** SQLite's: one host, this one; nothing is stored, so every key is here. */
export function localPlacements(home: string): Placements {
  const here = () => ({ key: '', host: hostName(home), expiresAt: null, updatedAt: new Date() });
  return {
    claim: async (key, host) => ({ claimed: true, placement: { ...here(), key, host } }),
    assign: async (key, host) => ({ ...here(), key, host }),
    release: async () => true,
    get: async (key) => ({ ...here(), key }),
    list: async () => [],
    seen: async () => {},
    hosts: async () => [{ name: hostName(home), home, seenAt: new Date() }],
  };
}

interface PlacementRow {
  key: string;
  host: string;
  expires_at: Date | null;
  updated_at: Date;
}

const placement = (row: PlacementRow): Placement => ({ key: row.key, host: row.host, expiresAt: row.expires_at, updatedAt: row.updated_at });

/** What the PostgreSQL store lends: its pool, and its guard that turns failures into ClawErrors naming it. */
export interface PlacementDatabase {
  readonly sql: Sql;
  guard<T>(fn: () => Promise<T>): Promise<T>;
}

/** PostgreSQL's: rows of `theclaw.placements` and `theclaw.hosts` (postgres-schema.ts), times by the server's clock. */
export function postgresPlacements(db: PlacementDatabase): Placements {
  // `db.sql` is read at each call: the store passes itself while its fields are still being set.
  const get = async (key: string) => {
    const [row] = await db.guard(() => db.sql<PlacementRow[]>`SELECT key, host, expires_at, updated_at FROM theclaw.placements WHERE key = ${key}`);
    return row ? placement(row) : null;
  };
  return {
    async claim(key, host, options = {}) {
      const ttlMs = options.ttlMs ?? null;
      // One statement: a fresh key is inserted; a held one is taken only if ours or expired. Two
      // claimers of a fresh key meet at its unique index, and the second sees the first's row.
      const [row] = await db.guard(
        () => db.sql<PlacementRow[]>`
          INSERT INTO theclaw.placements AS p (key, host, expires_at, updated_at)
          VALUES (${key}, ${host}, now() + ${ttlMs}::bigint * interval '1 millisecond', now())
          ON CONFLICT (key) DO UPDATE SET host = EXCLUDED.host, expires_at = EXCLUDED.expires_at, updated_at = now()
          WHERE p.host = EXCLUDED.host OR p.expires_at <= now()
          RETURNING key, host, expires_at, updated_at`,
      );
      if (row) return { claimed: true, placement: placement(row) };
      const holder = await get(key);
      // Released between the two statements: nobody holds it, so try again.
      return holder ? { claimed: false, placement: holder } : this.claim(key, host, options);
    },
    async assign(key, host) {
      const [row] = await db.guard(
        () => db.sql<PlacementRow[]>`
          INSERT INTO theclaw.placements (key, host, expires_at, updated_at) VALUES (${key}, ${host}, NULL, now())
          ON CONFLICT (key) DO UPDATE SET host = EXCLUDED.host, expires_at = NULL, updated_at = now()
          RETURNING key, host, expires_at, updated_at`,
      );
      return placement(row as PlacementRow);
    },
    async release(key, host) {
      const rows = await db.guard(() => db.sql`DELETE FROM theclaw.placements WHERE key = ${key} AND host = ${host} RETURNING key`);
      return rows.length > 0;
    },
    get,
    async list(prefix = '') {
      const rows = await db.guard(() => db.sql<PlacementRow[]>`SELECT key, host, expires_at, updated_at FROM theclaw.placements WHERE starts_with(key, ${prefix}) ORDER BY key`);
      return rows.map(placement);
    },
    async seen(host, home) {
      await db.guard(() => db.sql`INSERT INTO theclaw.hosts (name, home, seen_at) VALUES (${host}, ${home}, now()) ON CONFLICT (name) DO UPDATE SET home = EXCLUDED.home, seen_at = now()`);
    },
    async hosts() {
      const rows = await db.guard(() => db.sql<{ name: string; home: string; seen_at: Date }[]>`SELECT name, home, seen_at FROM theclaw.hosts ORDER BY name`);
      return rows.map((row) => ({ name: row.name, home: row.home, seenAt: row.seen_at }));
    },
  };
}
