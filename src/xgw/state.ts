import { randomInt } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openSqlite } from '../core/sqlite.js';

/**
 * The gateway's durable state, `$THECLAW_HOME/xgw/state.db`: pairing codes and admitted peers
 * (so `xgw pair approve` works with the daemon down), the idempotency keys of delivered replies
 * (a retried delivery is acknowledged, not sent again, even after a restart), and each web chat
 * or terminal peer's mailbox (so a reply that arrives while the page is closed is shown later).
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS pairing_requests (
  code TEXT PRIMARY KEY, channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, peer_name TEXT,
  created_at TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS admitted (
  channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, admitted_at TEXT NOT NULL, via TEXT NOT NULL,
  PRIMARY KEY (channel_id, peer_id));
CREATE TABLE IF NOT EXISTS delivered (
  key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_ids TEXT NOT NULL, delivered_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mailbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, channel_id TEXT NOT NULL, peer_id TEXT NOT NULL,
  role TEXT NOT NULL, text TEXT NOT NULL, reply_to TEXT, created_at TEXT NOT NULL,
  seen INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS mailbox_peer ON mailbox (channel_id, peer_id, id);
`;

export const PAIRING_TTL_MS = 60 * 60 * 1000;
export const MAX_PENDING_PAIRINGS = 3;
// No 0/O, 1/I/L: a code is read off one screen and typed on another.
const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';

export interface PairingRequest {
  code: string;
  channel_id: string;
  peer_id: string;
  peer_name: string | null;
  created_at: string;
  expires_at: string;
}

export interface MailboxEntry {
  id: number;
  role: 'user' | 'agent' | 'system';
  text: string;
  reply_to: string | null;
  created_at: string;
}

export class GatewayState {
  private readonly db: Database.Database;

  constructor(home: string) {
    const dir = join(home, 'xgw');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.db = openSqlite(join(dir, 'state.db'));
    this.db.exec(SCHEMA);
  }

  isAdmitted(channelId: string, peerId: string): boolean {
    return this.db.prepare('SELECT 1 FROM admitted WHERE channel_id = ? AND peer_id = ?').get(channelId, peerId) !== undefined;
  }

  /**
   * The peer's pending code, or a new one; null when the channel already has the maximum of
   * pending codes (so a stranger cannot flood the owner with codes).
   */
  requestPairing(channelId: string, peerId: string, peerName: string | undefined, now = Date.now()): PairingRequest | null {
    return this.db
      .transaction(() => {
        this.db.prepare('DELETE FROM pairing_requests WHERE expires_at <= ?').run(now);
        const existing = this.db.prepare('SELECT * FROM pairing_requests WHERE channel_id = ? AND peer_id = ?').get(channelId, peerId) as PairingRow | undefined;
        if (existing) return toRequest(existing);
        const pending = this.db.prepare('SELECT COUNT(*) FROM pairing_requests WHERE channel_id = ?').pluck().get(channelId) as number;
        if (pending >= MAX_PENDING_PAIRINGS) return null;
        const row: PairingRow = {
          code: Array.from({ length: 8 }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join(''),
          channel_id: channelId,
          peer_id: peerId,
          peer_name: peerName ?? null,
          created_at: new Date(now).toISOString(),
          expires_at: now + PAIRING_TTL_MS,
        };
        this.db.prepare('INSERT INTO pairing_requests VALUES (@code, @channel_id, @peer_id, @peer_name, @created_at, @expires_at)').run(row);
        return toRequest(row);
      })
      .immediate();
  }

  pendingPairings(now = Date.now()): PairingRequest[] {
    return (this.db.prepare('SELECT * FROM pairing_requests WHERE expires_at > ? ORDER BY created_at').all(now) as PairingRow[]).map(toRequest);
  }

  /** Admits the peer behind a pending code; returns it, or null for an unknown or expired code. */
  approvePairing(code: string, now = Date.now()): PairingRequest | null {
    return this.db
      .transaction(() => {
        const row = this.db.prepare('SELECT * FROM pairing_requests WHERE code = ? AND expires_at > ?').get(code.toUpperCase(), now) as PairingRow | undefined;
        if (!row) return null;
        this.admit(row.channel_id, row.peer_id, 'pairing');
        this.db.prepare('DELETE FROM pairing_requests WHERE code = ?').run(row.code);
        return toRequest(row);
      })
      .immediate();
  }

  admit(channelId: string, peerId: string, via: string): void {
    this.db
      .prepare('INSERT INTO admitted VALUES (?, ?, ?, ?) ON CONFLICT (channel_id, peer_id) DO NOTHING')
      .run(channelId, peerId, new Date().toISOString(), via);
  }

  /** The platform ids a delivery with this key produced, if it was delivered before. */
  deliveredWith(key: string): string[] | null {
    const row = this.db.prepare('SELECT message_ids FROM delivered WHERE key = ?').pluck().get(key) as string | undefined;
    return row === undefined ? null : (JSON.parse(row) as string[]);
  }

  recordDelivery(key: string, channelId: string, messageIds: string[]): void {
    this.db
      .prepare('INSERT INTO delivered VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING')
      .run(key, channelId, JSON.stringify(messageIds), new Date().toISOString());
  }

  /** Adds to a peer's mailbox, keeping only its newest `limit` entries. Returns the entry. */
  addToMailbox(channelId: string, peerId: string, entry: Omit<MailboxEntry, 'id' | 'created_at'>, limit: number): MailboxEntry {
    return this.db
      .transaction(() => {
        const created_at = new Date().toISOString();
        const id = this.db
          .prepare('INSERT INTO mailbox (channel_id, peer_id, role, text, reply_to, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id')
          .pluck()
          .get(channelId, peerId, entry.role, entry.text, entry.reply_to, created_at) as number;
        this.db
          .prepare('DELETE FROM mailbox WHERE channel_id = ? AND peer_id = ? AND id <= (SELECT id FROM mailbox WHERE channel_id = ? AND peer_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)')
          .run(channelId, peerId, channelId, peerId, limit);
        return { id, created_at, ...entry };
      })
      .immediate();
  }

  /** A peer's mailbox after `afterId`, oldest first. */
  mailbox(channelId: string, peerId: string, afterId = 0): MailboxEntry[] {
    return this.db
      .prepare('SELECT id, role, text, reply_to, created_at FROM mailbox WHERE channel_id = ? AND peer_id = ? AND id > ? ORDER BY id')
      .all(channelId, peerId, afterId) as MailboxEntry[];
  }

  /** Entries of a peer's mailbox that no live client has been shown yet (terminal chat). */
  unseen(channelId: string, peerId: string): MailboxEntry[] {
    return this.db
      .prepare("SELECT id, role, text, reply_to, created_at FROM mailbox WHERE channel_id = ? AND peer_id = ? AND seen = 0 AND role != 'user' ORDER BY id")
      .all(channelId, peerId) as MailboxEntry[];
  }

  markSeen(ids: readonly number[]): void {
    const mark = this.db.prepare('UPDATE mailbox SET seen = 1 WHERE id = ?');
    this.db.transaction(() => ids.forEach((id) => mark.run(id))).immediate();
  }

  close(): void {
    this.db.close();
  }
}

interface PairingRow {
  code: string;
  channel_id: string;
  peer_id: string;
  peer_name: string | null;
  created_at: string;
  expires_at: number;
}

function toRequest(row: PairingRow): PairingRequest {
  return { ...row, expires_at: new Date(row.expires_at).toISOString() };
}
