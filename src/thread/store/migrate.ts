import { createHash, type Hash } from 'node:crypto';
import { ClawError } from '../../core/errors.js';
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
}

/**
 * Copies every thread of `from` into `to`, then reads them back from `to` and compares counts and
 * hashes with what was read from `from`. A target that already holds one of the threads is
 * refused before anything is copied. Each thread is written in one transaction, so a copy that
 * stops part-way leaves whole threads; the source is only read. Leases are not copied (they name
 * processes of this host); everything else of a consumer is. The source should not change
 * meanwhile: stop TheClaw first (`theclaw down`).
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
  const source = summarise(from);
  for (const name of names) {
    const dump = await from.dump(name);
    source.add(dump);
    await to.load(dump);
  }
  const target = summarise(to);
  for (const name of names) target.add(await to.dump(name));
  const result = { from: source.done(), to: target.done() };
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

function summarise(store: ThreadStore): { add(dump: ThreadDump): void; done(): StoreSummary } {
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
      for (const c of dump.consumers) hash.update(`${JSON.stringify([c.consumer, c.progress, c.subscribed, c.handler, c.filter, c.failures, c.last_error, c.retry_at])}\n`);
    },
    done: () => ({ kind: store.kind, location: store.location, ...counts, sha256: hash.digest('hex') }),
  };
}
