// Over 400 lines: the gateway's one SQLite file, its schema and its queries side by side.
import { randomInt } from 'node:crypto';
import { dirname, relative } from 'node:path';
import type Database from 'better-sqlite3';
import type { NoticeKind } from '../core/message.js';
import { openSqlite } from '../core/sqlite.js';
import type { InboundMessage, OutboundMessage } from './types.js';
import type { MailboxEntry, MailboxFile } from './channels/webchat-protocol.js';

export type { MailboxEntry };
import { ensureDir } from '../core/home.js';
import { xgwStatePath } from '../core/layout.js';
import { GroupContextStore } from './group-context.js';

/**
 * The gateway's durable state, `$THECLAW_HOME/xgw/state.db`: pairing codes and admitted peers
 * (so `xgw pair approve` works with the daemon down), the idempotency keys of replies and the
 * parts of each that were sent (a retried delivery is acknowledged, or resumed after its last
 * sent part, not sent again, even after a restart), and each web chat or terminal peer's
 * mailbox (so a reply that arrives while the page is closed is shown later), and groups' pending
 * context (group-context.ts).
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS pairing_requests (
  code TEXT PRIMARY KEY, channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, peer_name TEXT,
  created_at TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS admitted (
  channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, admitted_at TEXT NOT NULL, via TEXT NOT NULL,
  PRIMARY KEY (channel_id, peer_id));
CREATE TABLE IF NOT EXISTS pairing_log (
  channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS pairing_log_peer ON pairing_log (channel_id, peer_id, at);
CREATE TABLE IF NOT EXISTS deliveries (
  channel_id TEXT NOT NULL, target TEXT NOT NULL, key TEXT NOT NULL, message_ids TEXT NOT NULL,
  complete INTEGER NOT NULL, updated_at TEXT NOT NULL,
  PRIMARY KEY (channel_id, target, key));
CREATE TABLE IF NOT EXISTS drafts (
  channel_id TEXT NOT NULL, target TEXT NOT NULL, reply_to TEXT NOT NULL, message_id TEXT NOT NULL, updated_at TEXT NOT NULL,
  PRIMARY KEY (channel_id, target, reply_to));
CREATE TABLE IF NOT EXISTS media_use (
  channel_id TEXT NOT NULL, peer_id TEXT NOT NULL, day TEXT NOT NULL, bytes INTEGER NOT NULL,
  PRIMARY KEY (channel_id, peer_id, day));
CREATE TABLE IF NOT EXISTS mailbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, channel_id TEXT NOT NULL, peer_id TEXT NOT NULL,
  role TEXT NOT NULL, text TEXT NOT NULL, reply_to TEXT, created_at TEXT NOT NULL,
  seen INTEGER NOT NULL DEFAULT 0, notice TEXT);
CREATE INDEX IF NOT EXISTS mailbox_peer ON mailbox (channel_id, peer_id, id);
`;

export const PAIRING_TTL_MS = 60 * 60 * 1000;
export const MAX_PENDING_PAIRINGS = 3;
/**
 * While a channel's slots are all taken, a code older than this gives its slot to the next
 * asker: strangers cannot keep the owner's real contacts out for an hour.
 */
export const PAIRING_TTL_WHEN_FULL_MS = 10 * 60 * 1000;
/** Codes one peer may be given per day: an expired code is not renewed again and again. */
export const MAX_CODES_PER_PEER = 3;
const DAY_MS = 24 * 60 * 60 * 1000;
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

/** Why no code was given. */
export type PairingRefusal = 'full' | 'peer_limit';

/** An admitted peer, as `xgw peer list` shows it. */
export interface AdmittedPeer {
  channel_id: string;
  peer_id: string;
  admitted_at: string;
  via: string;
}

/**
 * A peer approved while it waited: it is told so, and the message it first wrote (kept with its
 * code) goes to the agent. Stays until the running gateway has done both.
 */
export interface Welcome {
  channel_id: string;
  peer_id: string;
  admitted_at: string;
  first_message: InboundMessage | null;
}

/**
 * Where a reply goes, and its idempotency key: a key is remembered per channel and conversation,
 * so the same key never suppresses a delivery anywhere else.
 */
export interface DeliveryRef {
  channelId: string;
  /** The conversation and peer, as the gateway encodes them (see `deliveryTarget`). */
  target: string;
  key: string;
}

/** The platform ids of the parts of a reply sent so far, and whether that was all of them. */
export interface DeliveryProgress {
  messageIds: string[];
  complete: boolean;
}

/** Rows of the table before it was keyed per channel and conversation: they match any target. */
const LEGACY_TARGET = '';

/**
 * A reply (or notice) the agent sent, as a web chat or terminal mailbox keeps it: its files by
 * their path relative to `home` (the home can move).
 */
export function agentEntry(message: OutboundMessage, home: string): Omit<MailboxEntry, 'id' | 'created_at'> {
  const files = (message.files ?? []).map((file) => ({
    name: file.name,
    bytes: file.bytes ?? 0,
    ref: relative(home, file.path),
    ...(file.kind === 'image' && file.mime_type ? { image: file.mime_type } : {}),
  }));
  return { role: 'agent', text: message.text, reply_to: message.replyTo ?? null, ...(message.notice ? { notice: message.notice } : {}), ...(files.length ? { files } : {}) };
}

const MAILBOX_COLUMNS = 'id, role, text, reply_to, created_at, notice, files, message_id, agent';
const PAIRING_COLUMNS = 'code, channel_id, peer_id, peer_name, created_at, expires_at';

/** A mailbox row as an entry: `notice`, `files`, `message_id` and `agent` only where there are. */
function toEntry({
  notice,
  files,
  message_id,
  agent,
  ...row
}: Omit<MailboxEntry, 'notice' | 'files' | 'message_id' | 'agent'> & { notice: NoticeKind | null; files: string | null; message_id: string | null; agent: string | null }): MailboxEntry {
  return {
    ...row,
    ...(notice === null ? {} : { notice }),
    ...(files === null ? {} : { files: JSON.parse(files) as MailboxFile[] }),
    ...(message_id === null ? {} : { message_id }),
    ...(agent === null ? {} : { agent }),
  };
}

export class GatewayState {
  private readonly db: Database.Database;
  /** Groups' pending context (group-context.ts), in the same file. */
  readonly groupContext: GroupContextStore;

  constructor(home: string) {
    const file = xgwStatePath(home);
    ensureDir(dirname(file));
    this.db = openSqlite(file);
    this.db.exec(SCHEMA);
    this.migrate();
    this.groupContext = new GroupContextStore(this.db);
  }

  /**
   * Earlier versions kept delivered keys in `delivered`, keyed by the key alone (so a key
   * suppressed deliveries to every channel). Its rows move to `deliveries` under their channel,
   * for any conversation of it, as they applied before. Mailboxes get their later columns (`agent`
   * null: an entry from before shows in any terminal chat of its peer, as it did).
   */
  private migrate(): void {
    this.db
      .transaction(() => {
        const columns = (table: string) => this.db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(table) as string[];
        if (!columns('mailbox').includes('notice')) this.db.exec('ALTER TABLE mailbox ADD COLUMN notice TEXT');
        if (!columns('mailbox').includes('files')) this.db.exec('ALTER TABLE mailbox ADD COLUMN files TEXT');
        if (!columns('mailbox').includes('message_id')) this.db.exec('ALTER TABLE mailbox ADD COLUMN message_id TEXT');
        if (!columns('mailbox').includes('agent')) this.db.exec('ALTER TABLE mailbox ADD COLUMN agent TEXT');
        if (!columns('pairing_requests').includes('first_message')) this.db.exec('ALTER TABLE pairing_requests ADD COLUMN first_message TEXT');
        if (!columns('admitted').includes('welcome')) this.db.exec('ALTER TABLE admitted ADD COLUMN welcome TEXT');
        const legacy = this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'delivered'").get();
        if (!legacy) return;
        this.db.prepare('INSERT OR IGNORE INTO deliveries SELECT channel_id, ?, key, message_ids, 1, delivered_at FROM delivered').run(LEGACY_TARGET);
        this.db.exec('DROP TABLE delivered');
      })
      .immediate();
  }

  isAdmitted(channelId: string, peerId: string): boolean {
    return this.db.prepare('SELECT 1 FROM admitted WHERE channel_id = ? AND peer_id = ?').get(channelId, peerId) !== undefined;
  }

  /**
   * The peer's pending code, or a new one (keeping `first`, the message it came with, for when it
   * is approved). Refused when the channel's slots are taken (codes older than
   * PAIRING_TTL_WHEN_FULL_MS give theirs up first) or the peer had its codes for the day.
   */
  requestPairing(channelId: string, peerId: string, peerName: string | undefined, now = Date.now(), first?: InboundMessage): PairingRequest | PairingRefusal {
    return this.db
      .transaction(() => {
        this.db.prepare('DELETE FROM pairing_requests WHERE expires_at <= ?').run(now);
        this.db.prepare('DELETE FROM pairing_log WHERE at <= ?').run(now - DAY_MS);
        const existing = this.db.prepare(`SELECT ${PAIRING_COLUMNS} FROM pairing_requests WHERE channel_id = ? AND peer_id = ?`).get(channelId, peerId) as PairingRow | undefined;
        if (existing) return toRequest(existing);
        const given = this.db.prepare('SELECT COUNT(*) FROM pairing_log WHERE channel_id = ? AND peer_id = ?').pluck().get(channelId, peerId) as number;
        if (given >= MAX_CODES_PER_PEER) return 'peer_limit';
        const pending = () => this.db.prepare('SELECT COUNT(*) FROM pairing_requests WHERE channel_id = ?').pluck().get(channelId) as number;
        if (pending() >= MAX_PENDING_PAIRINGS) {
          this.db.prepare('DELETE FROM pairing_requests WHERE channel_id = ? AND expires_at - ? <= ?').run(channelId, PAIRING_TTL_MS, now - PAIRING_TTL_WHEN_FULL_MS);
          if (pending() >= MAX_PENDING_PAIRINGS) return 'full';
        }
        const row: PairingRow = {
          code: Array.from({ length: 8 }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join(''),
          channel_id: channelId,
          peer_id: peerId,
          peer_name: peerName ?? null,
          created_at: new Date(now).toISOString(),
          expires_at: now + PAIRING_TTL_MS,
        };
        this.db
          .prepare('INSERT INTO pairing_requests VALUES (@code, @channel_id, @peer_id, @peer_name, @created_at, @expires_at, @first_message)')
          .run({ ...row, first_message: first ? JSON.stringify(first) : null });
        this.db.prepare('INSERT INTO pairing_log VALUES (?, ?, ?)').run(channelId, peerId, now);
        return toRequest(row);
      })
      .immediate();
  }

  pendingPairings(now = Date.now()): PairingRequest[] {
    return (this.db.prepare(`SELECT ${PAIRING_COLUMNS} FROM pairing_requests WHERE expires_at > ? ORDER BY created_at`).all(now) as PairingRow[]).map(toRequest);
  }

  /** Admits the peer behind a pending code; returns it, or null for an unknown or expired code. */
  approvePairing(code: string, now = Date.now()): PairingRequest | null {
    return this.db
      .transaction(() => {
        const row = this.db.prepare('SELECT * FROM pairing_requests WHERE code = ? AND expires_at > ?').get(code.toUpperCase(), now) as (PairingRow & { first_message: string | null }) | undefined;
        if (!row) return null;
        this.admit(row.channel_id, row.peer_id, 'pairing');
        this.db.prepare('UPDATE admitted SET welcome = ? WHERE channel_id = ? AND peer_id = ?').run(row.first_message ?? 'null', row.channel_id, row.peer_id);
        this.db.prepare('DELETE FROM pairing_requests WHERE code = ?').run(row.code);
        const { first_message: _first, ...request } = row;
        return toRequest(request);
      })
      .immediate();
  }

  admit(channelId: string, peerId: string, via: string): void {
    this.db
      .prepare('INSERT INTO admitted (channel_id, peer_id, admitted_at, via) VALUES (?, ?, ?, ?) ON CONFLICT (channel_id, peer_id) DO NOTHING')
      .run(channelId, peerId, new Date().toISOString(), via);
  }

  admittedPeers(): AdmittedPeer[] {
    return this.db.prepare('SELECT channel_id, peer_id, admitted_at, via FROM admitted ORDER BY channel_id, admitted_at').all() as AdmittedPeer[];
  }

  /** Takes back a peer's admission and any code it holds; false when it had neither. */
  revoke(channelId: string, peerId: string): boolean {
    return this.db
      .transaction(() => {
        const admitted = this.db.prepare('DELETE FROM admitted WHERE channel_id = ? AND peer_id = ?').run(channelId, peerId).changes;
        const pending = this.db.prepare('DELETE FROM pairing_requests WHERE channel_id = ? AND peer_id = ?').run(channelId, peerId).changes;
        return admitted + pending > 0;
      })
      .immediate();
  }

  /** Approved peers not yet told so (see Welcome). */
  pendingWelcomes(): Welcome[] {
    const rows = this.db.prepare('SELECT channel_id, peer_id, admitted_at, welcome FROM admitted WHERE welcome IS NOT NULL').all() as (Omit<Welcome, 'first_message'> & { welcome: string })[];
    return rows.map(({ welcome, ...row }) => ({ ...row, first_message: JSON.parse(welcome) as InboundMessage | null }));
  }

  welcomed(channelId: string, peerId: string): void {
    this.db.prepare('UPDATE admitted SET welcome = NULL WHERE channel_id = ? AND peer_id = ?').run(channelId, peerId);
  }

  /** What was sent under this key to this target before, or null. */
  deliveryProgress(ref: DeliveryRef): DeliveryProgress | null {
    const row = this.db
      .prepare('SELECT message_ids, complete FROM deliveries WHERE channel_id = ? AND key = ? AND target IN (?, ?) ORDER BY complete DESC LIMIT 1')
      .get(ref.channelId, ref.key, ref.target, LEGACY_TARGET) as { message_ids: string; complete: number } | undefined;
    return row === undefined ? null : { messageIds: JSON.parse(row.message_ids) as string[], complete: row.complete === 1 };
  }

  /**
   * Records the parts sent so far under the key (`complete` once all were sent). A complete
   * record is never turned back into a partial one.
   */
  recordDelivery(ref: DeliveryRef, messageIds: readonly string[], complete: boolean): void {
    this.db
      .prepare(
        `INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (channel_id, target, key) DO UPDATE SET message_ids = excluded.message_ids, complete = excluded.complete,
           updated_at = excluded.updated_at WHERE complete = 0`,
      )
      .run(ref.channelId, ref.target, ref.key, JSON.stringify(messageIds), complete ? 1 : 0, new Date().toISOString());
  }

  /** Bytes of files a peer sent on `day` (YYYY-MM-DD), for its daily quota. */
  mediaUsed(channelId: string, peerId: string, day: string): number {
    return (this.db.prepare('SELECT bytes FROM media_use WHERE channel_id = ? AND peer_id = ? AND day = ?').pluck().get(channelId, peerId, day) as number | undefined) ?? 0;
  }

  /** Counts a stored file against the peer's quota; older days are forgotten. */
  recordMediaUse(channelId: string, peerId: string, day: string, bytes: number): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM media_use WHERE day < ?').run(day);
      this.db.prepare('INSERT INTO media_use VALUES (?, ?, ?, ?) ON CONFLICT (channel_id, peer_id, day) DO UPDATE SET bytes = bytes + excluded.bytes').run(channelId, peerId, day, bytes);
    })();
  }

  /**
   * The platform message that shows the answer to `replyTo` as it is written (see
   * Gateway.draft), or null. Kept across a restart: the answer must replace it, not follow it.
   */
  draftOf(channelId: string, target: string, replyTo: string): string | null {
    const row = this.db.prepare('SELECT message_id FROM drafts WHERE channel_id = ? AND target = ? AND reply_to = ?').pluck().get(channelId, target, replyTo) as string | undefined;
    return row ?? null;
  }

  recordDraft(channelId: string, target: string, replyTo: string, messageId: string): void {
    this.db.prepare('INSERT OR REPLACE INTO drafts VALUES (?, ?, ?, ?, ?)').run(channelId, target, replyTo, messageId, new Date().toISOString());
  }

  dropDraft(channelId: string, target: string, replyTo: string): void {
    this.db.prepare('DELETE FROM drafts WHERE channel_id = ? AND target = ? AND reply_to = ?').run(channelId, target, replyTo);
  }

  /** Adds to a peer's mailbox, keeping only its newest `limit` entries. Returns the entry. */
  addToMailbox(channelId: string, peerId: string, entry: Omit<MailboxEntry, 'id' | 'created_at'>, limit: number): MailboxEntry {
    return this.db
      .transaction(() => {
        const created_at = new Date().toISOString();
        const id = this.db
          .prepare('INSERT INTO mailbox (channel_id, peer_id, role, text, reply_to, created_at, notice, files, message_id, agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id')
          .pluck()
          .get(
            channelId,
            peerId,
            entry.role,
            entry.text,
            entry.reply_to,
            created_at,
            entry.notice ?? null,
            entry.files?.length ? JSON.stringify(entry.files) : null,
            entry.message_id ?? null,
            entry.agent ?? null,
          ) as number;
        this.db
          .prepare('DELETE FROM mailbox WHERE channel_id = ? AND peer_id = ? AND id <= (SELECT id FROM mailbox WHERE channel_id = ? AND peer_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)')
          .run(channelId, peerId, channelId, peerId, limit);
        return { id, created_at, ...entry };
      })
      .immediate();
  }

  /** A peer's mailbox after `afterId`, oldest first. */
  mailbox(channelId: string, peerId: string, afterId = 0): MailboxEntry[] {
    return (
      this.db.prepare(`SELECT ${MAILBOX_COLUMNS} FROM mailbox WHERE channel_id = ? AND peer_id = ? AND id > ? ORDER BY id`).all(channelId, peerId, afterId) as Parameters<typeof toEntry>[0][]
    ).map(toEntry);
  }

  /** Whether the peer's mailbox holds a message with the file `ref` (which its page may then fetch). */
  hasFile(channelId: string, peerId: string, ref: string): boolean {
    const rows = this.db.prepare("SELECT files FROM mailbox WHERE channel_id = ? AND peer_id = ? AND role = 'agent' AND files IS NOT NULL").pluck().all(channelId, peerId) as string[];
    return rows.some((files) => (JSON.parse(files) as MailboxFile[]).some((file) => file.ref === ref));
  }

  /** The text of the peer's message that its client gave this id, if the mailbox still has it. */
  messageText(channelId: string, peerId: string, messageId: string): string | undefined {
    return this.db.prepare("SELECT text FROM mailbox WHERE channel_id = ? AND peer_id = ? AND role = 'user' AND message_id = ?").pluck().get(channelId, peerId, messageId) as string | undefined;
  }

  /**
   * Entries of a peer's mailbox that no live client has been shown yet (terminal chat): with
   * `agent`, that agent's and those of no agent; without, all.
   */
  unseen(channelId: string, peerId: string, agent?: string): MailboxEntry[] {
    const ofAgent = agent === undefined ? '' : 'AND (agent IS NULL OR agent = @agent)';
    return (
      this.db
        .prepare(`SELECT ${MAILBOX_COLUMNS} FROM mailbox WHERE channel_id = @channelId AND peer_id = @peerId AND seen = 0 AND role != 'user' ${ofAgent} ORDER BY id`)
        .all({ channelId, peerId, ...(agent === undefined ? {} : { agent }) }) as Parameters<typeof toEntry>[0][]
    ).map(toEntry);
  }

  markSeen(ids: readonly number[]): void {
    const mark = this.db.prepare('UPDATE mailbox SET seen = 1 WHERE id = ?');
    this.db
      .transaction(() => {
        for (const id of ids) mark.run(id);
      })
      .immediate();
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
