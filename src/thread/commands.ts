import { openSync } from 'node:fs';
import { join } from 'node:path';
import { printJson, printLines, readStdin } from '../core/cli.js';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { RotatingFile } from '../core/rotating-file.js';
import { validate } from '../core/validate.js';
import { spawnLaunch, startHandler } from './dispatch/handler.js';
import { openThread, type Thread } from './thread.js';
import { describeSummary, migrateThreads, type MigrationResult } from './store/migrate.js';
import { openStoreAt, openThreadStore, storeSetting } from './store/choose.js';
import { threadName } from './store/name.js';
import type { OpenStoredThreadOptions, StoredThread, ThreadStore } from './store/types.js';
import { PushInputSchema, type ConsumerInfo, type PushInput } from './types.js';

/** The CLI's commands: flags in, library call, output out. Errors are thrown to runCli. */

interface Json {
  json?: boolean;
}
interface ThreadFlag extends Json {
  thread: string;
}

/** Runs `fn` on the thread at `path` in the home's store (store/choose.ts), closing both after. */
async function withThread<T>(path: string, fn: (thread: StoredThread) => Promise<T>, options: OpenStoredThreadOptions = {}): Promise<T> {
  return withStore(async (store, home) => {
    const thread = await store.open(threadName(home, path), options);
    try {
      return await fn(thread);
    } finally {
      await thread.close();
    }
  });
}

/** `thread dispatch` starts handlers as notifier does, on a SQLite thread (notifier's store so far). */
function withSqliteThread<T>(path: string, fn: (thread: Thread) => T): T {
  const thread = openThread(path);
  try {
    return fn(thread);
  } finally {
    thread.close();
  }
}

async function withStore<T>(fn: (store: ThreadStore, home: string) => Promise<T>): Promise<T> {
  const home = resolveHome();
  const store = await openThreadStore(home);
  try {
    return await fn(store, home);
  } finally {
    await store.close();
  }
}

export async function init(path: string, options: Json): Promise<void> {
  const created = await withStore(async (store, home) => {
    const thread = await store.init(threadName(home, path));
    await thread.close();
    return thread.path;
  });
  if (options.json) printJson({ path: created });
  else printLines([`created thread ${created}`]);
}

export interface PushFlags extends ThreadFlag {
  source?: string;
  type?: string;
  subtype?: string;
  content?: string;
  batch?: boolean;
  idempotencyKey?: string;
}

export async function push(options: PushFlags): Promise<void> {
  const defaults = { source: options.source, type: options.type, subtype: options.subtype };
  let inputs: PushInput[];
  if (options.batch) {
    if (options.idempotencyKey !== undefined) {
      throw usageError('--idempotency-key applies to a single push', 'give each batch line its own "idempotency_key" field');
    }
    inputs = parseBatch(await readStdin(usageError('--batch reads NDJSON from stdin', 'pipe events into the command')), defaults);
  } else {
    if (options.content === undefined) throw usageError('nothing to push', 'pass --content TEXT, or --batch with NDJSON on stdin');
    if (options.source === undefined) throw usageError('invalid event: source is missing', 'pass --source');
    if (options.type === undefined) throw usageError('invalid event: type is missing', 'pass --type');
    inputs = [{ ...defaults, content: options.content, idempotency_key: options.idempotencyKey } as PushInput];
  }
  if (inputs.length === 0) throw usageError('the batch on stdin is empty', 'pipe one JSON object per line into thread push --batch');
  const ids = (await withThread(options.thread, (thread) => thread.append(inputs))).map((result) => result.id);
  if (options.json) printJson(options.batch ? { ids } : { id: ids[0] });
  else printLines(ids.map(String));
}

export async function pop(options: ThreadFlag & { consumer: string; lastEventId?: number; limit?: number }): Promise<void> {
  const events = await withThread(options.thread, (thread) => thread.pop(options.consumer, { lastEventId: options.lastEventId, limit: options.limit }));
  printLines(events.map((event) => JSON.stringify(event)));
}

export async function ack(options: ThreadFlag & { consumer: string; eventId: number }): Promise<void> {
  const progress = await withThread(options.thread, (thread) => thread.ack(options.consumer, options.eventId));
  if (options.json) printJson({ consumer: options.consumer, progress });
  else printLines([String(progress)]);
}

export async function peek(options: ThreadFlag & { lastEventId?: number; limit?: number; filter?: string; last?: number }): Promise<void> {
  const events = await withThread(options.thread, (thread) => thread.peek({ afterId: options.lastEventId, limit: options.limit, filter: options.filter, last: options.last }), { readOnly: true });
  printLines(events.map((event) => JSON.stringify(event)));
}

export async function subscribe(options: ThreadFlag & { consumer: string; handler: string; filter?: string }): Promise<void> {
  const path = await withThread(options.thread, async (thread) => {
    await thread.subscribe({ consumer: options.consumer, handler: options.handler, filter: options.filter });
    return thread.path;
  });
  if (options.json) printJson({ thread: path, consumer: options.consumer, handler: options.handler, filter: options.filter ?? null });
  else printLines([`subscribed ${options.consumer} to ${path}`]);
}

export async function unsubscribe(options: ThreadFlag & { consumer: string }): Promise<void> {
  const path = await withThread(options.thread, async (thread) => {
    await thread.unsubscribe(options.consumer);
    return thread.path;
  });
  if (options.json) printJson({ thread: path, consumer: options.consumer, subscribed: false });
  else printLines([`unsubscribed ${options.consumer} from ${path} (progress kept)`]);
}

export async function info(options: ThreadFlag): Promise<void> {
  const info = await withThread(options.thread, (thread) => thread.info());
  if (options.json) printJson(info);
  else
    printLines([
      `thread   ${info.path}`,
      `events   ${info.events} (last id ${info.last_id})`,
      ...(info.consumers.length === 0 ? ['consumers: none'] : ['consumers:', ...info.consumers.map(describeConsumer)]),
    ]);
}

export function dispatch(options: ThreadFlag): void {
  const home = resolveHome();
  const setting = storeSetting(home);
  if (setting.url !== null) {
    throw new ClawError('invalid', `thread dispatch runs the handlers of SQLite threads only so far, and ${setting.from} names PostgreSQL`, {
      suggestion: 'start notifier (notifier start), which runs the handlers of a PostgreSQL store on every host that shares it',
    });
  }
  const failed: string[] = [];
  const started = withSqliteThread(options.thread, (thread) => {
    // The handlers outlive this command; their output goes to the thread's own log directory,
    // rotated like every log (the handlers write into it through their fd, uncounted).
    const log = new RotatingFile(join(thread.path, 'logs', 'handlers.log'));
    log.rotateIfFull();
    const out = openSync(log.path, 'a');
    return thread.subscriptions().flatMap((subscription) => {
      const result = startHandler(thread, subscription, { home, launch: spawnLaunch(['ignore', out, out]) });
      if (result.started) {
        result.run.child.unref();
        return [{ consumer: subscription.consumer, pid: result.run.pid }];
      }
      if (result.reason === 'spawn_failed') failed.push(`${subscription.consumer}: ${result.error}`);
      return [];
    });
  });
  if (failed.length > 0) {
    throw new ClawError('io', `could not start ${failed.join('; ')}${started.length ? ` (started: ${started.map((s) => s.consumer).join(', ')})` : ''}`, {
      suggestion: 'fix the handler command and subscribe again',
    });
  }
  if (options.json) printJson({ started });
  else printLines(started.length ? started.map((s) => `started ${s.consumer} (pid ${s.pid})`) : ['nothing to dispatch']);
}

export interface MigrateFlags extends Json {
  to: string;
  from?: string;
}

/** `thread migrate`: every thread of one store copied into another, then counted and hashed on both sides. */
export async function migrate(options: MigrateFlags): Promise<void> {
  const from = options.from === undefined ? await openThreadStore(resolveHome()) : await openStoreAt(options.from);
  let result: MigrationResult;
  try {
    const to = await openStoreAt(options.to);
    try {
      if (to.location === from.location) throw usageError(`--to names the store the threads are in (${to.location})`, 'name another database or home');
      result = await migrateThreads(from, to);
    } finally {
      await to.close();
    }
  } finally {
    await from.close();
  }
  if (options.json) printJson(result);
  else
    printLines([
      `from ${result.from.kind} ${result.from.location}: ${describeSummary(result.from)}`,
      `to   ${result.to.kind} ${result.to.location}: ${describeSummary(result.to)}`,
      `copied ${result.to.threads} threads; counts and hashes match`,
      ...describePlacements(result),
    ]);
}

function describePlacements({ to, placements }: MigrationResult): string[] {
  const lines = to.kind === 'postgres' ? [`placed ${placements.agents} agents; ${placements.hosts} hosts`] : [];
  if (placements.elsewhere.length > 0) lines.push(`placed on other hosts (their directories are there): ${placements.elsewhere.join(', ')}`);
  return lines;
}

function describeConsumer(c: ConsumerInfo): string {
  const parts = [`progress ${c.progress}`, `pending ${c.pending}`, c.subscribed ? `handler ${c.handler}` : 'not subscribed'];
  if (c.filter) parts.push(`filter ${c.filter}`);
  if (c.lease) parts.push(`running pid ${c.lease.pid}`);
  if (c.failures > 0) parts.push(`${c.failures} failures, last: ${c.last_error}`, `retry at ${c.retry_at}`);
  return `  ${c.consumer}: ${parts.join(', ')}`;
}

/**
 * Parses an NDJSON batch; any bad line rejects the whole batch before anything is stored, with an
 * error that names the line (1-based, counting blank lines). Bytes that are not UTF-8 are refused
 * rather than replaced: content is text, and a push must store what it was given or nothing.
 */
export function parseBatch(data: Buffer, defaults: Partial<PushInput>): PushInput[] {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const inputs: PushInput[] = [];
  let start = 0;
  for (let index = 0; start <= data.length; index++) {
    // A newline byte never occurs inside a multi-byte UTF-8 sequence: splitting bytes is safe.
    const newline = data.indexOf(0x0a, start);
    const end = newline === -1 ? data.length : newline;
    const bytes = data.subarray(start, end);
    start = end + 1;
    const where = `batch line ${index + 1}`;
    let line: string;
    try {
      line = decoder.decode(bytes);
    } catch {
      throw usageError(`${where} is not valid UTF-8`, 'send UTF-8 encoded NDJSON (binary data must be encoded first, e.g. as base64 text)');
    }
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw usageError(`${where} is not JSON`, 'send one JSON object per line');
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw usageError(`${where} is not a JSON object`, 'send objects like {"content": "..."}');
    }
    const event = { ...defaults, ...value } as PushInput & { content: unknown };
    // Structured content is stored as its JSON text: content is always a string in the thread.
    if (typeof event.content === 'object' && event.content !== null) event.content = JSON.stringify(event.content);
    inputs.push(validate(PushInputSchema, event, { what: `event on ${where}`, kind: 'usage', suggestion: 'see thread push --help' }));
  }
  return inputs;
}
