import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { ClawError } from '../../core/errors.js';
import { ensureDir } from '../../core/home.js';
import { RotatingFile } from '../../core/rotating-file.js';
import { dbPath, openDatabase } from '../db.js';
import { registerThread } from '../dispatch/registry.js';
import { initThread, openThread, type Thread } from '../thread.js';
import { localPlacements } from './placements.js';
import type { OpenStoredThreadOptions, StoredConsumer, StoredEvent, StoredThread, ThreadDump, ThreadStore } from './types.js';

/**
 * The SQLite store: today's thread directories in the home (`events.db`, `events.jsonl`, `logs/`),
 * unchanged on disk, behind the store interface. Each call is the synchronous `Thread` call it
 * was; only `dump` and `load` read and write the tables directly, ids and keys as they are.
 */
export function createSqliteStore(home: string): ThreadStore {
  // A name is the path itself, not resolved as a moved home's (layout.ts resolveHomeRef): a path
  // given outside the home must name that thread, not one that looks alike in the home.
  const pathOf = (name: string) => (isAbsolute(name) ? name : join(home, name));
  return {
    kind: 'sqlite',
    location: home,
    placements: localPlacements(home),
    init: async (name) => new SqliteThread(name, initThread(pathOf(name), { home })),
    open: async (name, options: OpenStoredThreadOptions = {}) => new SqliteThread(name, openThread(pathOf(name), { home, ...options })),
    list: async () => findThreads(home).sort(),
    dump: async (name) => dumpThread(name, pathOf(name)),
    load: async (dump) => {
      if (isAbsolute(dump.name)) {
        throw new ClawError('invalid', `thread ${dump.name} is outside the home, so it has no place in ${home}`, {
          suggestion: 'copy it by hand with thread peek and thread push --batch, or leave it where it is',
        });
      }
      loadThread(home, pathOf(dump.name), dump);
    },
    close: async () => {},
  };
}

/** An open SQLite thread behind the store interface (for tests that made it with `openThread`). */
export function sqliteStoredThread(name: string, thread: Thread): StoredThread {
  return new SqliteThread(name, thread);
}

class SqliteThread implements StoredThread {
  readonly path: string;
  constructor(
    readonly name: string,
    private readonly thread: Thread,
  ) {
    this.path = thread.path;
  }
  append: StoredThread['append'] = async (inputs, options) => this.thread.append(inputs, options);
  findByKey: StoredThread['findByKey'] = async (key) => this.thread.findByKey(key);
  pop: StoredThread['pop'] = async (consumer, options) => this.thread.pop(consumer, options);
  ack: StoredThread['ack'] = async (consumer, eventId) => this.thread.ack(consumer, eventId);
  peek: StoredThread['peek'] = async (options) => this.thread.peek(options);
  subscribe: StoredThread['subscribe'] = async (options) => this.thread.subscribe(options);
  unsubscribe: StoredThread['unsubscribe'] = async (consumer) => this.thread.unsubscribe(consumer);
  info: StoredThread['info'] = async () => this.thread.info();
  consumer: StoredThread['consumer'] = async (name) => this.thread.consumer(name);
  subscriptions: StoredThread['subscriptions'] = async () => this.thread.subscriptions();
  hasPending: StoredThread['hasPending'] = async (consumer) => this.thread.hasPending(consumer);
  prune: StoredThread['prune'] = async (options) => this.thread.prune(options);
  takeLease: StoredThread['takeLease'] = async (consumer, holder) => this.thread.dispatch.takeLease(consumer, holder);
  transferLease: StoredThread['transferLease'] = async (consumer, fromPid, to) => this.thread.dispatch.transferLease(consumer, fromPid, to);
  releaseLease: StoredThread['releaseLease'] = async (consumer, pid) => this.thread.dispatch.releaseLease(consumer, pid);
  recordRun: StoredThread['recordRun'] = async (consumer, outcome) => this.thread.dispatch.recordRun(consumer, outcome);
  retryNow: StoredThread['retryNow'] = async (consumer) => this.thread.dispatch.retryNow(consumer);
  close: StoredThread['close'] = async () => this.thread.close();
}

/**
 * Where no thread is: the agents' working directories, which their commands write (a file named
 * events.db there is theirs, not a thread), and what the owner moved aside as damaged.
 */
const isNoThreadDir = (entry: string) => entry === 'workdir' || entry === 'workdirs' || entry.startsWith('damaged-') || entry.endsWith('.damaged');

/** The home's threads: every directory under it with an `events.db`, by its name (links are not followed). */
function findThreads(home: string, dir = home, prefix = ''): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  const found = entries.includes('events.db') && prefix !== '' ? [prefix] : [];
  for (const entry of entries) {
    if (isNoThreadDir(entry)) continue;
    const path = join(dir, entry);
    if (lstatSync(path, { throwIfNoEntry: false })?.isDirectory()) found.push(...findThreads(home, path, prefix ? `${prefix}/${entry}` : entry));
  }
  return found;
}

const CONSUMER_COLUMNS = 'consumer, progress, subscribed, handler, filter, failures, last_error, retry_at';

function dumpThread(name: string, dir: string): ThreadDump {
  const db = openDatabase(dir, false);
  try {
    return db.transaction(() => ({
      name,
      last_id: db.prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").pluck().get() as number,
      events: db.prepare('SELECT id, created_at, source, type, subtype, content, idempotency_key FROM events ORDER BY id').all() as StoredEvent[],
      consumers: (db.prepare(`SELECT ${CONSUMER_COLUMNS} FROM consumers ORDER BY consumer`).all() as (Omit<StoredConsumer, 'subscribed' | 'run_on'> & { subscribed: number })[]).map((row) => ({
        ...row,
        subscribed: row.subscribed === 1,
        run_on: null,
      })),
    }))();
  } finally {
    db.close();
  }
}

/** A dumped thread as a new thread directory: its rows as they were, its JSONL copy, and its registry entry if subscribed. */
function loadThread(home: string, dir: string, dump: ThreadDump): void {
  if (existsSync(dbPath(dir))) {
    throw new ClawError('conflict', `${dir} is already a thread`, { suggestion: 'migrate into a home (or database) that does not hold these threads yet' });
  }
  // Made here as initThread makes one (its directory with logs/, the schema), in one opening.
  ensureDir(join(dir, 'logs'));
  const db = openDatabase(dir, true);
  try {
    const now = new Date().toISOString();
    db.transaction(() => {
      const insert = db.prepare('INSERT INTO events (id, created_at, source, type, subtype, content, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?)');
      for (const e of dump.events) insert.run(e.id, e.created_at, e.source, e.type, e.subtype, e.content, e.idempotency_key);
      // The sequence goes where the source's was: ids pruned there are not given again here.
      db.prepare("DELETE FROM sqlite_sequence WHERE name = 'events'").run();
      db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)").run(dump.last_id);
      const consumer = db.prepare(`INSERT INTO consumers (${CONSUMER_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
      for (const c of dump.consumers) consumer.run(c.consumer, c.progress, c.subscribed ? 1 : 0, c.handler, c.filter, c.failures, c.last_error, c.retry_at, now);
    }).immediate();
  } finally {
    db.close();
  }
  if (dump.events.length > 0) {
    const lines = dump.events.map(({ idempotency_key: _, ...event }) => JSON.stringify(event));
    new RotatingFile(join(dir, 'events.jsonl')).append(`${lines.join('\n')}\n`, lines.length);
  }
  if (dump.consumers.some((c) => c.subscribed)) registerThread(home, dir);
}
