import { createHash, type Hash } from 'node:crypto';
import { join } from 'node:path';
import { ClawError } from '../../core/errors.js';
import { hostName } from '../../core/host.js';
import { agentOfPath } from '../../core/layout.js';
import { agentKey } from './placements.js';
import type { StoreKind, ThreadDump, ThreadStore } from './types.js';

/** What a store holds, counted and hashed the same way whichever store it is. */
export interface StoreSummary {
  kind: StoreKind;
  location: string;
  threads: number;
  events: number;
  consumers: number;
  /** sha256 over every thread in name order: its name, last id, events (with keys) and consumers. */
  sha256: string;
}

export interface MigrationResult {
  from: StoreSummary;
  to: StoreSummary;
  placements: PlacementsCopy;
}

/** What became of the placements (placements.ts): where each agent runs, and the hosts. */
export interface PlacementsCopy {
  /** Agents' placements written into the target (PostgreSQL only). */
  agents: number;
  /** Hosts written into the target's `hosts` (PostgreSQL only). */
  hosts: number;
  /** Agents placed on another host than the target's (`<id> on <host>`): their directories are there. */
  elsewhere: string[];
}

/**
 * Copies every thread of `from` into `to`, then reads them back from `to` and compares counts and
 * hashes with what was read from `from`. A target that already holds one of the threads is
 * refused before anything is copied. Each thread is written in one transaction, so a copy that
 * stops part-way leaves whole threads; the source is only read. Leases are not copied (they name
 * processes of this host); everything else of a consumer is (run_on where the target is
 * PostgreSQL). The placements follow (migratePlacements). The source should not change meanwhile:
 * stop TheClaw first (`theclaw down`).
 */
export async function migrateThreads(from: ThreadStore, to: ThreadStore): Promise<MigrationResult> {
  const names = await from.list();
  const present = new Set(await to.list());
  const clashes = names.filter((name) => present.has(name));
  if (clashes.length > 0) {
    throw new ClawError('conflict', `${to.location} already holds ${clashes.length} of the threads to copy (${clashes.slice(0, 3).join(', ')}${clashes.length > 3 ? ', …' : ''})`, {
      suggestion: 'migrate into an empty database or a new home',
    });
  }
  // A consumer's run_on is PostgreSQL's (SQLite has one host): hashed only where the copy keeps it.
  const keepsRunOn = to.kind === 'postgres';
  const source = summarise(from, keepsRunOn);
  for (const name of names) {
    const dump = await from.dump(name);
    source.add(dump);
    await to.load(dump);
  }
  const target = summarise(to, keepsRunOn);
  for (const name of names) target.add(await to.dump(name));
  const result = { from: source.done(), to: target.done(), placements: await migratePlacements(from, to, names) };
  if (result.from.sha256 !== result.to.sha256 || result.from.events !== result.to.events || result.from.consumers !== result.to.consumers) {
    throw new ClawError('io', `the copy in ${to.location} differs from ${from.location} (${describeSummary(result.from)}; copied: ${describeSummary(result.to)})`, {
      suggestion: "see the target store's log; remove what was copied and migrate again",
    });
  }
  return result;
}

export function describeSummary(summary: StoreSummary): string {
  return `${summary.threads} threads, ${summary.events} events, ${summary.consumers} consumers, sha256 ${summary.sha256}`;
}

function summarise(store: ThreadStore, keepsRunOn: boolean): { add(dump: ThreadDump): void; done(): StoreSummary } {
  const hash: Hash = createHash('sha256');
  const counts = { threads: 0, events: 0, consumers: 0 };
  return {
    add(dump) {
      counts.threads++;
      counts.events += dump.events.length;
      counts.consumers += dump.consumers.length;
      // One JSON line per row, in a fixed column order, so that both stores' rows hash alike.
      hash.update(`${JSON.stringify(['thread', dump.name, dump.last_id])}\n`);
      for (const e of dump.events) hash.update(`${JSON.stringify([e.id, e.created_at, e.source, e.type, e.subtype, e.content, e.idempotency_key])}\n`);
      for (const c of dump.consumers) {
        const row = [c.consumer, c.progress, c.subscribed, c.handler, c.filter, c.failures, c.last_error, c.retry_at];
        // Only a run_on that is there: a copy without any hashes as before run_on was copied.
        if (keepsRunOn && c.run_on !== null) row.push(c.run_on);
        hash.update(`${JSON.stringify(row)}\n`);
      }
    },
    done: () => ({ kind: store.kind, location: store.location, ...counts, sha256: hash.digest('hex') }),
  };
}

/**
 * The placements, after the threads. PostgreSQL to PostgreSQL: the agents' rows (a channel's
 * claim names a running gateway, and lapses: not copied) and the hosts with their homes. A home's
 * SQLite into PostgreSQL: its agents (those with threads) become the placements of the host it
 * is (`hostName` of that home), which joins the hosts. Into SQLite: one host, nothing to store;
 * agents placed on another host are named, since their directories are there, not in this home.
 */
async function migratePlacements(from: ThreadStore, to: ThreadStore, names: readonly string[]): Promise<PlacementsCopy> {
  const copy: PlacementsCopy = { agents: 0, hosts: 0, elsewhere: [] };
  if (to.kind === 'sqlite') {
    const here = hostName(to.location);
    for (const placement of await from.placements.list(agentKey(''))) {
      if (placement.host !== here) copy.elsewhere.push(`${placement.key.slice(agentKey('').length)} on ${placement.host}`);
    }
    return copy;
  }
  if (from.kind === 'postgres') {
    const hosts = await from.placements.hosts();
    for (const host of hosts) await to.placements.seen(host.name, host.home);
    copy.hosts = hosts.length;
    for (const placement of await from.placements.list(agentKey(''))) {
      await to.placements.assign(placement.key, placement.host);
      copy.agents++;
    }
    return copy;
  }
  const home = from.location;
  const here = hostName(home);
  await to.placements.seen(here, home);
  copy.hosts = 1;
  const agents = new Set(names.map((name) => agentOfPath(home, join(home, name))).filter((id) => id !== null));
  for (const id of [...agents].sort()) {
    // One placed in the target already (by its host, before) stays where it is.
    const { claimed, placement } = await to.placements.claim(agentKey(id), here);
    if (claimed) copy.agents++;
    else copy.elsewhere.push(`${id} on ${placement.host}`);
  }
  return copy;
}
