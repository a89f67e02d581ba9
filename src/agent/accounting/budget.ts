import type Database from 'better-sqlite3';
import { openSqlite } from '../../core/sqlite.js';
import type { AgentDir } from '../agent-dir.js';
import type { AgentConfig } from '../types.js';

/**
 * Spend caps: tokens an agent may use in a day, in all and per person (or conversation), from
 * what its usage records say (a ledger in its state.db, added to as they are written, so no
 * thread is read to know). Before a model call the turn reserves what it may cost (its input
 * and the model's largest answer); a call that would pass a cap is not made. Days are UTC days.
 */
export type BudgetCaps = AgentConfig['budget'];

export class SpendLedger {
  private db: Database.Database | undefined;
  /** Tokens reserved by the calls under way in this run, by who they are for. */
  private readonly reserved = new Map<string, number>();

  constructor(
    private readonly dir: AgentDir,
    private readonly caps: BudgetCaps,
  ) {}

  private open(): Database.Database {
    if (!this.db) {
      this.db = openSqlite(this.dir.state);
      this.db.exec(
        'CREATE TABLE IF NOT EXISTS spend (day TEXT NOT NULL, peer TEXT NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (day, peer)); CREATE TABLE IF NOT EXISTS budget_reports (day TEXT NOT NULL, cap TEXT NOT NULL, PRIMARY KEY (day, cap))',
      );
    }
    return this.db;
  }

  /** Whether any cap is set: with none, nothing is kept or checked. */
  get capped(): boolean {
    return this.caps.daily_tokens !== undefined || this.caps.per_peer_daily_tokens !== undefined;
  }

  /**
   * Reserves `tokens` for a call for `peer`, or says which cap it would pass (the reason, for
   * the person) and reserves nothing. `release` gives the reservation back once the call's
   * usage is recorded (or it failed).
   */
  reserve(peer: string, tokens: number, now = new Date()): { over: { cap: 'daily_tokens' | 'per_peer_daily_tokens'; reason: string } | null; release: () => void } {
    const none = { over: null, release: () => {} };
    if (!this.capped) return none;
    const day = dayOf(now);
    const db = this.open();
    const reservedAll = [...this.reserved.values()].reduce((sum, n) => sum + n, 0);
    const spentAll = (db.prepare('SELECT COALESCE(SUM(tokens), 0) FROM spend WHERE day = ?').pluck().get(day) as number) + reservedAll;
    const spentPeer = ((db.prepare('SELECT tokens FROM spend WHERE day = ? AND peer = ?').pluck().get(day, peer) as number | undefined) ?? 0) + (this.reserved.get(peer) ?? 0);
    const { daily_tokens: all, per_peer_daily_tokens: each } = this.caps;
    if (all !== undefined && spentAll + tokens > all) return { over: { cap: 'daily_tokens', reason: `today's budget of ${all.toLocaleString('en')} tokens is used up` }, release: () => {} };
    if (each !== undefined && spentPeer + tokens > each)
      return { over: { cap: 'per_peer_daily_tokens', reason: `your share of today's budget (${each.toLocaleString('en')} tokens) is used up` }, release: () => {} };
    this.reserved.set(peer, (this.reserved.get(peer) ?? 0) + tokens);
    let released = false;
    return {
      over: null,
      release: () => {
        if (released) return;
        released = true;
        this.reserved.set(peer, (this.reserved.get(peer) ?? 0) - tokens);
      },
    };
  }

  /** What a call used, as its usage record says. */
  spent(peer: string, tokens: number, now = new Date()): void {
    if (!this.capped) return;
    this.open().prepare('INSERT INTO spend VALUES (?, ?, ?) ON CONFLICT (day, peer) DO UPDATE SET tokens = tokens + excluded.tokens').run(dayOf(now), peer, tokens);
  }

  /** True the first time a cap is reported on a day: the owner hears of it once. */
  firstReport(cap: string, now = new Date()): boolean {
    return this.open().prepare('INSERT OR IGNORE INTO budget_reports VALUES (?, ?)').run(dayOf(now), cap).changes === 1;
  }

  close(): void {
    this.db?.close();
  }
}

function dayOf(now: Date): string {
  return now.toISOString().slice(0, 10);
}
