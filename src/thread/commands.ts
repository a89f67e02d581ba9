import { openSync } from 'node:fs';
import { join } from 'node:path';
import { printJson, printLines, readStdin } from '../core/cli.js';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { RotatingFile } from '../core/rotating-file.js';
import { validate } from '../core/validate.js';
import { spawnLaunch, startHandler } from './dispatch/handler.js';
import { initThread, openThread, type Thread } from './thread.js';
import { PushInputSchema, type ConsumerInfo, type PushInput } from './types.js';

/** The CLI's commands: flags in, library call, output out. Errors are thrown to runCli. */

interface Json {
  json?: boolean;
}
interface ThreadFlag extends Json {
  thread: string;
}

function withThread<T>(path: string, fn: (thread: Thread) => T, options: { readOnly?: boolean } = {}): T {
  const thread = openThread(path, options);
  try {
    return fn(thread);
  } finally {
    thread.close();
  }
}

export function init(path: string, options: Json): void {
  const thread = initThread(path);
  thread.close();
  if (options.json) printJson({ path: thread.path });
  else printLines([`created thread ${thread.path}`]);
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
  const ids = withThread(options.thread, (thread) => thread.pushBatch(inputs));
  if (options.json) printJson(options.batch ? { ids } : { id: ids[0] });
  else printLines(ids.map(String));
}

export function pop(options: ThreadFlag & { consumer: string; lastEventId?: number; limit?: number }): void {
  const events = withThread(options.thread, (thread) => thread.pop(options.consumer, { lastEventId: options.lastEventId, limit: options.limit }));
  printLines(events.map((event) => JSON.stringify(event)));
}

export function ack(options: ThreadFlag & { consumer: string; eventId: number }): void {
  const progress = withThread(options.thread, (thread) => thread.ack(options.consumer, options.eventId));
  if (options.json) printJson({ consumer: options.consumer, progress });
  else printLines([String(progress)]);
}

export function peek(options: ThreadFlag & { lastEventId?: number; limit?: number; filter?: string; last?: number }): void {
  const events = withThread(options.thread, (thread) => thread.peek({ afterId: options.lastEventId, limit: options.limit, filter: options.filter, last: options.last }), { readOnly: true });
  printLines(events.map((event) => JSON.stringify(event)));
}

export function subscribe(options: ThreadFlag & { consumer: string; handler: string; filter?: string }): void {
  const path = withThread(options.thread, (thread) => {
    thread.subscribe({ consumer: options.consumer, handler: options.handler, filter: options.filter });
    return thread.path;
  });
  if (options.json) printJson({ thread: path, consumer: options.consumer, handler: options.handler, filter: options.filter ?? null });
  else printLines([`subscribed ${options.consumer} to ${path}`]);
}

export function unsubscribe(options: ThreadFlag & { consumer: string }): void {
  const path = withThread(options.thread, (thread) => {
    thread.unsubscribe(options.consumer);
    return thread.path;
  });
  if (options.json) printJson({ thread: path, consumer: options.consumer, subscribed: false });
  else printLines([`unsubscribed ${options.consumer} from ${path} (progress kept)`]);
}

export function info(options: ThreadFlag): void {
  const info = withThread(options.thread, (thread) => thread.info());
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
  const failed: string[] = [];
  const started = withThread(options.thread, (thread) => {
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
