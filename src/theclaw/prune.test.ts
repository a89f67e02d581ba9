import Database from 'better-sqlite3';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestHome, runTool, type TestHome } from '../testing/index.js';
import { initAgent } from '../agent/lifecycle.js';
import { openThread } from '../thread/index.js';
import { GatewayState } from '../xgw/index.js';
import type { PruneReport } from './prune.js';

let t: TestHome;
beforeEach(() => {
  t = createTestHome();
});
afterEach(() => t.cleanup());

const DAY = 86_400_000;

/** A log with `count` rotations, one a day back from now. */
function rotatedLogs(dir: string, count: number): string[] {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'agent.log'), 'current\n');
  const names = Array.from({ length: count }, (_, n) => {
    const stamp = new Date(Date.now() - n * DAY).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
    const name = `agent-${stamp}.log`;
    writeFileSync(join(dir, name), 'x'.repeat(1000) + '\n');
    return name;
  });
  return names; // newest first
}

/** Deliveries: complete and old, incomplete and old, complete and recent. */
function gatewayState(): void {
  const state = new GatewayState(t.home);
  for (const [key, complete] of [
    ['old-done', true],
    ['old-partial', false],
    ['new-done', true],
  ] as const) {
    state.recordDelivery({ channelId: 'telegram:main', target: 'dm:1', key }, ['1'], complete);
  }
  state.close();
  const db = new Database(join(t.home, 'xgw', 'state.db'));
  db.prepare("UPDATE deliveries SET updated_at = ? WHERE key LIKE 'old-%'").run(new Date(Date.now() - 40 * DAY).toISOString());
  db.close();
}

function deliveryKeys(): string[] {
  const db = new Database(join(t.home, 'xgw', 'state.db'), { readonly: true });
  try {
    return db.prepare('SELECT key FROM deliveries ORDER BY key').pluck().all() as string[];
  } finally {
    db.close();
  }
}

async function prune(args: string[]): Promise<PruneReport> {
  const result = await runTool('theclaw', ['prune', '--json', ...args], t.env);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as PruneReport;
}

describe('theclaw prune', () => {
  it('removes rotated logs beyond the newest 5 and complete delivery keys past the cut-off; keeps incomplete ones and the current log', async () => {
    const logs = join(t.home, 'agents', 'admin', 'logs');
    const names = rotatedLogs(logs, 8);
    gatewayState();

    const report = await prune(['--older-than', '30d']);
    expect(report).toMatchObject({ dry_run: false, rotated_logs: { files: 3, bytes: 3 * 1001 }, xgw: { deliveries: 1, mailbox: 0, pairing_requests: 0 } });
    expect(report.freed_bytes).toBeGreaterThanOrEqual(3 * 1001);
    expect(readdirSync(logs).sort()).toEqual(['agent.log', ...names.slice(0, 5)].sort());
    expect(deliveryKeys()).toEqual(['new-done', 'old-partial']);
  });

  it('removes old acknowledged thread events beyond the newest 1,000 of each thread, never one a consumer has yet to handle', async () => {
    const dir = await initAgent(t.home, 'admin');
    const inbox = openThread(dir.inbox, { home: t.home });
    try {
      inbox.pushBatch(Array.from({ length: 1_600 }, (_, i) => ({ source: 'self', type: 'message', content: `m${i + 1}` })));
      inbox.ack('inbox', 1_500); // the last 100 wait for the agent
    } finally {
      inbox.close();
    }
    const db = new Database(join(dir.inbox, 'events.db'));
    db.prepare('UPDATE events SET created_at = ?').run(new Date(Date.now() - 40 * DAY).toISOString());
    db.close();

    expect((await prune(['--dry-run'])).events).toEqual({ threads: 1, removed: 600 });
    expect((await prune([])).events).toEqual({ threads: 1, removed: 600 });
    const after = openThread(dir.inbox, { home: t.home });
    try {
      const ids = after.peek({ limit: 10_000 }).map((event) => event.id);
      expect([ids[0], ids.at(-1), ids.length]).toEqual([601, 1_600, 1_000]);
      expect(after.pop('inbox').map((event) => event.id)).toEqual(Array.from({ length: 100 }, (_, i) => 1_501 + i));
    } finally {
      after.close();
    }
  });

  it("removes a feed's old events once its sweep has read them, not those it has yet to read", async () => {
    const feed = openThread(join(t.home, 'feeds', 'toolcalls'), { home: t.home, create: true });
    try {
      feed.pushBatch(Array.from({ length: 1_300 }, (_, i) => ({ source: 'self', type: 'record', subtype: 'toolcall', content: `c${i + 1}` })));
      feed.ack('warden', 200); // the warden has read the first 200
    } finally {
      feed.close();
    }
    const db = new Database(join(t.home, 'feeds', 'toolcalls', 'events.db'));
    db.prepare('UPDATE events SET created_at = ?').run(new Date(Date.now() - 40 * DAY).toISOString());
    db.close();

    expect((await prune([])).events).toEqual({ threads: 1, removed: 200 });
  });

  it('--dry-run says what would go and changes nothing', async () => {
    const logs = join(t.home, 'logs');
    rotatedLogs(logs, 7);
    gatewayState();
    const before = readdirSync(logs).map((name) => [name, statSync(join(logs, name)).size]);

    const report = await prune(['--dry-run', '--keep-logs', '2']);
    expect(report).toMatchObject({ dry_run: true, rotated_logs: { files: 5, bytes: 5 * 1001 }, xgw: { deliveries: 1 } });
    expect(readdirSync(logs).map((name) => [name, statSync(join(logs, name)).size])).toEqual(before);
    expect(deliveryKeys()).toEqual(['new-done', 'old-done', 'old-partial']);
  });

  it('checkpoints a WAL that a writer left behind, truncating it', async () => {
    const file = join(t.home, 'data.db');
    const writer = new Database(file);
    writer.pragma('journal_mode = WAL');
    writer.pragma('wal_autocheckpoint = 0');
    writer.exec('CREATE TABLE t (x TEXT)');
    for (let n = 0; n < 200; n++) writer.prepare('INSERT INTO t VALUES (?)').run('y'.repeat(1000));
    const wal = statSync(`${file}-wal`).size;
    expect(wal).toBeGreaterThan(100_000);

    // The writer stays open, as a daemon's would.
    const report = await prune([]);
    expect(report.wal.files).toBe(1);
    expect(report.wal.bytes).toBe(wal);
    expect(statSync(`${file}-wal`).size).toBe(0);
    expect(writer.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(200);
    writer.close();
  });

  it('refuses a cut-off that is not a number of days', async () => {
    const result = await runTool('theclaw', ['prune', '--older-than', 'soon'], t.env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Error: --older-than "soon" is not a number of days - pass e.g. --older-than 30d');
  });
});
