import Database from 'better-sqlite3';
import fc from 'fast-check';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClawError } from '../core/errors.js';
import { packageRoot } from '../core/package.js';
import { socketPath } from '../core/home.js';
import { listenSocket } from '../core/ipc.js';
import { createTestHome, expectClawError, waitFor, type TestHome } from '../testing/index.js';
import { listThreads } from './dispatch/registry.js';
import { initThread, openThread, type Thread } from './thread.js';
import { MAX_CONTENT_BYTES, type PushInput } from './types.js';

let t: TestHome;
let opened: Thread[];

beforeEach(() => {
  t = createTestHome();
  opened = [];
});

afterEach(() => {
  for (const thread of opened) thread.close();
  t.cleanup();
});

/** A fresh thread in the test home; closed after the test. */
function newThread(name = 'thread'): Thread {
  const thread = initThread(join(t.home, name), { home: t.home });
  opened.push(thread);
  return thread;
}

function reopen(thread: Thread): Thread {
  const again = openThread(thread.path, { home: t.home });
  opened.push(again);
  return again;
}

function msg(content: string, extra: Partial<PushInput> = {}): PushInput {
  return { source: 'self', type: 'message', content, ...extra };
}

function ids(events: { id: number }[]): number[] {
  return events.map((event) => event.id);
}

describe('push', () => {
  it('returns strictly increasing ids, starting at 1', () => {
    const thread = newThread();
    const pushed = Array.from({ length: 5 }, (_, n) => thread.push(msg(`m${n}`)));
    expect(pushed).toEqual([1, 2, 3, 4, 5]);
    expect(ids(thread.peek())).toEqual(pushed);
    expect(thread.info()).toMatchObject({ events: 5, last_id: 5 });
  });

  it('stores the event fields as given, with subtype null when not given', () => {
    const thread = newThread();
    thread.push({ source: 'external:webchat:main:dm:1:1', type: 'message', content: '{"text":"hi"}' });
    thread.push({ source: 'self', type: 'record', subtype: 'toolcall', content: 'x' });
    const [first, second] = thread.peek();
    expect(first).toMatchObject({ id: 1, source: 'external:webchat:main:dm:1:1', type: 'message', subtype: null, content: '{"text":"hi"}' });
    expect(second).toMatchObject({ id: 2, type: 'record', subtype: 'toolcall' });
    expect(new Date(first!.created_at).toISOString()).toBe(first!.created_at);
  });

  it('pushBatch returns ids in input order', () => {
    const thread = newThread();
    thread.push(msg('before'));
    expect(thread.pushBatch([msg('a'), msg('b'), msg('c')])).toEqual([2, 3, 4]);
    expect(thread.peek().map((event) => event.content)).toEqual(['before', 'a', 'b', 'c']);
  });

  it('pushBatch is all-or-nothing: an invalid event in the middle stores nothing and leaves no gap', () => {
    const thread = newThread();
    thread.push(msg('first'));
    const before = thread.info();
    const error = expectClawError(() => thread.pushBatch([msg('a'), { source: 'self', type: 'Message!', content: 'b' }, msg('c')]), 'usage');
    expect(error.message).toContain('event 2');
    expect(thread.info()).toEqual(before);
    expect(thread.peek().map((event) => event.content)).toEqual(['first']);
    expect(thread.push(msg('next'))).toBe(2);
  });

  it('pushBatch with an oversized event at the end stores none of the earlier ones', () => {
    const thread = newThread();
    expectClawError(() => thread.pushBatch([msg('a'), msg('b'), msg('x'.repeat(MAX_CONTENT_BYTES + 1))]), 'usage');
    expect(thread.info()).toMatchObject({ events: 0, last_id: 0 });
  });

  it('a repeated idempotency key returns the first id, stores nothing and leaves no gap in the ids', () => {
    const thread = newThread();
    const first = thread.push(msg('original', { idempotency_key: 'k1' }));
    const again = thread.push(msg('different content', { idempotency_key: 'k1' }));
    expect(again).toBe(first);
    expect(thread.peek().map((event) => event.content)).toEqual(['original']);
    expect(thread.push(msg('next'))).toBe(first + 1);
  });

  it('a repeated idempotency key within one batch returns the first id for each repeat', () => {
    const thread = newThread();
    thread.push(msg('stored earlier', { idempotency_key: 'old' }));
    const result = thread.pushBatch([
      msg('a', { idempotency_key: 'k' }),
      msg('a again', { idempotency_key: 'k' }),
      msg('old again', { idempotency_key: 'old' }),
      msg('b'),
      msg('a third time', { idempotency_key: 'k' }),
    ]);
    expect(result).toEqual([2, 2, 1, 3, 2]);
    expect(thread.peek().map((event) => event.content)).toEqual(['stored earlier', 'a', 'b']);
    expect(thread.info()).toMatchObject({ events: 3, last_id: 3 });
    expect(thread.push(msg('c'))).toBe(4);
  });

  it('the idempotency key is remembered across processes opening the thread again', () => {
    const thread = newThread();
    const first = thread.push(msg('a', { idempotency_key: 'x' }));
    thread.close();
    expect(reopen(thread).push(msg('a', { idempotency_key: 'x' }))).toBe(first);
  });

  it('never reuses an id, even after the newest events were deleted from the database', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b'), msg('c')]);
    const db = new Database(join(thread.path, 'events.db'));
    db.prepare('DELETE FROM events WHERE id >= 2').run();
    db.close();
    expect(thread.push(msg('d'))).toBe(4);
    thread.close();
    expect(reopen(thread).push(msg('e'))).toBe(5);
  });

  it.each([
    ['content over 1 MiB', msg('x'.repeat(MAX_CONTENT_BYTES + 1)), 'content'],
    ['content over 1 MiB in UTF-8 bytes though not in characters', msg('é'.repeat(MAX_CONTENT_BYTES / 2 + 1)), 'content'],
    ['an empty source', { source: '', type: 'message', content: 'x' }, 'source'],
    ['a source with a control character', { source: 'self\nevil', type: 'message', content: 'x' }, 'source'],
    ["a type like 'Message!'", { source: 'self', type: 'Message!', content: 'x' }, 'type'],
    ['an upper-case subtype', { source: 'self', type: 'record', subtype: 'ToolCall', content: 'x' }, 'subtype'],
    ['a missing content', { source: 'self', type: 'message' } as PushInput, 'content'],
  ])('rejects %s as a usage error and stores nothing', (_, input, field) => {
    const thread = newThread();
    const error = expectClawError(() => thread.push(input), 'usage');
    expect(error.message).toContain(field);
    expect(thread.info()).toMatchObject({ events: 0, last_id: 0 });
    expect(existsSync(join(thread.path, 'events.jsonl'))).toBe(false);
  });

  it('accepts content of exactly 1 MiB', () => {
    const thread = newThread();
    const id = thread.push(msg('x'.repeat(MAX_CONTENT_BYTES)));
    expect(thread.peek()[0]).toMatchObject({ id, content: 'x'.repeat(MAX_CONTENT_BYTES) });
  });
});

describe('pop and ack', () => {
  it('pop without ack returns the same events again (at-least-once), also to a new reader', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b'), msg('c')]);
    const first = thread.pop('worker');
    expect(ids(first)).toEqual([1, 2, 3]);
    expect(thread.pop('worker')).toEqual(first);
    expect(reopen(thread).pop('worker')).toEqual(first);
    expect(thread.consumer('worker')).toMatchObject({ progress: 0, pending: 3 });
  });

  it('ack moves progress and pop then returns only later events', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b'), msg('c')]);
    expect(thread.ack('worker', 2)).toBe(2);
    expect(ids(thread.pop('worker'))).toEqual([3]);
    expect(thread.consumer('worker')).toMatchObject({ progress: 2, pending: 1 });
  });

  it('pop with lastEventId acknowledges that id first, then returns the events after it', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b'), msg('c')]);
    expect(ids(thread.pop('worker', { lastEventId: 1 }))).toEqual([2, 3]);
    expect(thread.consumer('worker')!.progress).toBe(1);
  });

  it('pop honours limit', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 10 }, (_, n) => msg(`m${n}`)));
    expect(ids(thread.pop('worker', { limit: 3 }))).toEqual([1, 2, 3]);
    expect(ids(thread.pop('worker', { lastEventId: 3, limit: 3 }))).toEqual([4, 5, 6]);
  });

  it('ack of a lower id keeps the higher progress', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 5 }, (_, n) => msg(`m${n}`)));
    expect(thread.ack('worker', 4)).toBe(4);
    expect(thread.ack('worker', 2)).toBe(4);
    expect(thread.ack('worker', 0)).toBe(4);
    expect(thread.consumer('worker')!.progress).toBe(4);
    expect(ids(thread.pop('worker'))).toEqual([5]);
  });

  it('pop with an old lastEventId does not replay acknowledged events (the anchor bug)', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 5 }, (_, n) => msg(`m${n}`)));
    // A handler read up to 5 and acknowledged it...
    expect(ids(thread.pop('worker', { lastEventId: 2 }))).toEqual([3, 4, 5]);
    thread.ack('worker', 5);
    // ...and a caller that still passes the id it had before must not get 3..5 again.
    expect(thread.pop('worker', { lastEventId: 2 })).toEqual([]);
    expect(thread.consumer('worker')!.progress).toBe(5);
    thread.push(msg('m5'));
    expect(ids(thread.pop('worker', { lastEventId: 2 }))).toEqual([6]);
  });

  it('a consumer looping pop --last-event-id <last id seen> gets every event exactly once and finishes', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 11 }, (_, n) => msg(`m${n}`)));
    const seen: number[] = [];
    let last: number | undefined;
    for (let round = 0; round < 20; round++) {
      const batch = thread.pop('worker', { lastEventId: last, limit: 3 });
      if (batch.length === 0) break;
      seen.push(...ids(batch));
      last = batch.at(-1)!.id;
    }
    expect(seen).toEqual(Array.from({ length: 11 }, (_, n) => n + 1));
    expect(thread.consumer('worker')!.progress).toBe(11);
  });

  it('ack of an id past the newest event is a not_found error and stores nothing', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b')]);
    const before = thread.info();
    const error = expectClawError(() => thread.ack('worker', 3), 'not_found');
    expect(error.message).toContain('3');
    expect(thread.info()).toEqual(before);
    expect(thread.consumer('worker')).toBeNull();
    thread.ack('worker', 1);
    expectClawError(() => thread.ack('worker', 99), 'not_found');
    expect(thread.consumer('worker')!.progress).toBe(1);
  });

  it('pop with a lastEventId past the newest event is a not_found error and keeps progress', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b')]);
    thread.ack('worker', 1);
    expectClawError(() => thread.pop('worker', { lastEventId: 7 }), 'not_found');
    expect(thread.consumer('worker')!.progress).toBe(1);
    expect(ids(thread.pop('worker'))).toEqual([2]);
  });

  it.each([-1, 1.5, Number.NaN])('refuses the event id %s as a usage error', (eventId) => {
    const thread = newThread();
    thread.push(msg('a'));
    expectClawError(() => thread.ack('worker', eventId), 'usage');
    expect(thread.consumer('worker')).toBeNull();
  });

  it('refuses a consumer name with a slash or a space as a usage error', () => {
    const thread = newThread();
    expectClawError(() => thread.pop('../evil'), 'usage');
    expectClawError(() => thread.ack('a b', 0), 'usage');
    expect(thread.info().consumers).toEqual([]);
  });

  it('pop applies the subscription filter, and progress covers the events it skipped', () => {
    const thread = newThread();
    thread.subscribe({ consumer: 'worker', handler: 'true', filter: "type = 'message' AND source != 'self'" });
    thread.pushBatch([
      msg('from peer', { source: 'external:a' }),
      { source: 'self', type: 'record', subtype: 'toolcall', content: 'r' },
      msg('from self'),
      msg('from peer 2', { source: 'external:b' }),
    ]);
    const popped = thread.pop('worker');
    expect(popped.map((event) => event.content)).toEqual(['from peer', 'from peer 2']);
    expect(thread.consumer('worker')!.pending).toBe(2);
    expect(thread.pop('worker', { lastEventId: popped.at(-1)!.id })).toEqual([]);
    expect(thread.consumer('worker')).toMatchObject({ progress: 4, pending: 0 });
    expect(thread.hasPending('worker')).toBe(false);
  });

  it('consumers keep separate progress', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b')]);
    thread.ack('one', 2);
    expect(ids(thread.pop('two'))).toEqual([1, 2]);
    expect(thread.pop('one')).toEqual([]);
  });
});

describe('peek', () => {
  it('returns events oldest first after lastEventId, up to limit, and consumes nothing', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 10 }, (_, n) => msg(`m${n}`)));
    expect(ids(thread.peek({ afterId: 3, limit: 4 }))).toEqual([4, 5, 6, 7]);
    expect(ids(thread.peek({ limit: 2 }))).toEqual([1, 2]);
    expect(thread.info().consumers).toEqual([]);
  });

  it('last K returns the newest K, oldest first', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 10 }, (_, n) => msg(`m${n}`)));
    expect(ids(thread.peek({ last: 3 }))).toEqual([8, 9, 10]);
    expect(ids(thread.peek({ last: 50 }))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('last K applies the filter and lastEventId', () => {
    const thread = newThread();
    thread.pushBatch(Array.from({ length: 10 }, (_, n) => (n % 2 === 0 ? msg(`m${n}`) : { source: 'self', type: 'record', content: `r${n}` })));
    // messages are ids 1, 3, 5, 7, 9
    expect(ids(thread.peek({ last: 2, filter: "type = 'message'" }))).toEqual([7, 9]);
    expect(ids(thread.peek({ last: 10, filter: "type = 'message'", afterId: 4 }))).toEqual([5, 7, 9]);
  });

  it('applies a filter', () => {
    const thread = newThread();
    thread.pushBatch([msg('a', { source: 'external:x' }), msg('b'), { source: 'self', type: 'record', subtype: 'usage', content: 'u' }]);
    expect(thread.peek({ filter: "source LIKE 'external:%'" }).map((e) => e.content)).toEqual(['a']);
    expect(thread.peek({ filter: 'subtype IS NOT NULL' }).map((e) => e.content)).toEqual(['u']);
    expect(thread.peek({ filter: 'id IN (1, 3)' }).map((e) => e.content)).toEqual(['a', 'u']);
  });

  it('rejects an invalid filter with a usage error naming the position', () => {
    const thread = newThread();
    thread.push(msg('a'));
    const error = expectClawError(() => thread.peek({ filter: "type = 'message' AND" }), 'usage');
    expect(error.message).toMatch(/position 21/);
    expect(error.suggestion).toBeTruthy();
  });

  it.each(['0) UNION SELECT * FROM events --', "type = 'x' OR 1=1; DROP TABLE events; --", 'content = 1'])('rejects the injection attempt %j and leaves the events intact', (filter) => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b')]);
    const error = expectClawError(() => thread.peek({ filter }), 'usage');
    expect(error.message).toMatch(/position \d+/);
    expectClawError(() => thread.subscribe({ consumer: 'worker', handler: 'true', filter }), 'usage');
    expect(thread.info()).toMatchObject({ events: 2, consumers: [] });
  });
});

describe('subscribe and unsubscribe', () => {
  it('an invalid filter at subscribe stores nothing and keeps the previous subscription', () => {
    const thread = newThread();
    thread.subscribe({ consumer: 'worker', handler: 'my-handler --flag', filter: "type = 'message'" });
    thread.push(msg('a'));
    const before = thread.info();
    const error = expectClawError(() => thread.subscribe({ consumer: 'worker', handler: 'other', filter: "type = 'message' AND (" }), 'usage');
    expect(error.message).toMatch(/position \d+/);
    expect(thread.info()).toEqual(before);
    expect(thread.consumer('worker')).toMatchObject({ subscribed: true, handler: 'my-handler --flag', filter: "type = 'message'" });
    expectClawError(() => thread.subscribe({ consumer: 'newcomer', handler: 'x', filter: 'bogus' }), 'usage');
    expect(thread.consumer('newcomer')).toBeNull();
  });

  it('a handler that cannot be split is refused at subscribe and stores nothing', () => {
    const thread = newThread();
    expectClawError(() => thread.subscribe({ consumer: 'worker', handler: 'handler "unclosed' }), 'usage');
    expectClawError(() => thread.subscribe({ consumer: 'worker', handler: '   ' }), 'usage');
    expect(thread.info().consumers).toEqual([]);
  });

  it('subscribe records handler and filter, registers the thread with notifier and keeps existing progress', () => {
    const thread = newThread();
    thread.pushBatch([msg('a'), msg('b')]);
    thread.ack('worker', 1);
    thread.subscribe({ consumer: 'worker', handler: 'run it', filter: "type = 'message'" });
    expect(thread.consumer('worker')).toMatchObject({ progress: 1, pending: 1, subscribed: true, handler: 'run it', filter: "type = 'message'" });
    const registry = join(t.home, 'notifier', 'threads');
    const registered = readdirSync(registry)
      .filter((name) => name.endsWith('.json'))
      .map((name) => (JSON.parse(readFileSync(join(registry, name), 'utf8')) as { path: string }).path);
    expect(registered).toEqual(['thread']); // relative to the home, which can move
  });

  it('never stores a subscription without its registry entry: when the registry cannot be written, subscribe fails and stores nothing', () => {
    // A subscriber killed between the two writes must not leave a subscription that notifier's
    // sweep never looks at: the entry is written inside the subscription's transaction.
    const thread = newThread();
    thread.push(msg('waiting'));
    mkdirSync(join(t.home, 'notifier'), { recursive: true });
    writeFileSync(join(t.home, 'notifier', 'threads'), 'not a directory');
    expect(() => thread.subscribe({ consumer: 'worker', handler: 'h' })).toThrow();
    expect(thread.consumer('worker')?.subscribed ?? false).toBe(false);
    expect(thread.subscriptions()).toEqual([]);
  });

  it('unsubscribe keeps progress and a later subscribe resumes where it stopped', () => {
    const thread = newThread();
    thread.subscribe({ consumer: 'worker', handler: 'h' });
    thread.pushBatch([msg('a'), msg('b'), msg('c')]);
    expect(ids(thread.pop('worker', { limit: 2 }))).toEqual([1, 2]);
    thread.ack('worker', 2);
    thread.unsubscribe('worker');
    expect(thread.consumer('worker')).toMatchObject({ subscribed: false, progress: 2 });
    expect(thread.subscriptions()).toEqual([]);
    thread.pushBatch([msg('d'), msg('e')]);
    thread.subscribe({ consumer: 'worker', handler: 'h' });
    expect(thread.consumer('worker')).toMatchObject({ subscribed: true, progress: 2, pending: 3 });
    expect(ids(thread.pop('worker'))).toEqual([3, 4, 5]);
  });

  it('a subscribe with a changed handler or filter, or after unsubscribe, clears the failures and backoff; an unchanged one keeps them', () => {
    const thread = newThread();
    const fail = () => thread.dispatch.recordRun('worker', { ok: false, error: 'exited 1', retryAt: new Date(Date.now() + 60_000) });
    const clean = { failures: 0, last_error: null, retry_at: null };
    thread.subscribe({ consumer: 'worker', handler: 'broken' });
    fail();
    thread.subscribe({ consumer: 'worker', handler: 'broken' });
    expect(thread.consumer('worker')).toMatchObject({ failures: 1, last_error: 'exited 1' });
    thread.subscribe({ consumer: 'worker', handler: 'fixed' });
    expect(thread.consumer('worker')).toMatchObject(clean);
    fail();
    thread.subscribe({ consumer: 'worker', handler: 'fixed', filter: "type = 'message'" });
    expect(thread.consumer('worker')).toMatchObject(clean);
    fail();
    thread.unsubscribe('worker');
    thread.subscribe({ consumer: 'worker', handler: 'fixed', filter: "type = 'message'" });
    expect(thread.consumer('worker')).toMatchObject(clean);
  });

  it('the last unsubscribe takes the thread out of the notifier registry, and a new subscribe puts it back', () => {
    const thread = newThread();
    thread.subscribe({ consumer: 'one', handler: 'h' });
    thread.subscribe({ consumer: 'two', handler: 'h' });
    thread.unsubscribe('one');
    expect(listThreads(t.home)).toEqual([thread.path]);
    thread.unsubscribe('two');
    expect(listThreads(t.home)).toEqual([]);
    thread.subscribe({ consumer: 'one', handler: 'h' });
    expect(listThreads(t.home)).toEqual([thread.path]);
  });

  it('unsubscribe of an unknown consumer is not_found', () => {
    const thread = newThread();
    expectClawError(() => thread.unsubscribe('nobody'), 'not_found');
    expect(thread.info().consumers).toEqual([]);
  });

  it('a stored filter that no longer compiles disables only its own consumer', () => {
    const thread = newThread();
    thread.subscribe({ consumer: 'good', handler: 'true', filter: "type = 'message'" });
    thread.subscribe({ consumer: 'bad', handler: 'true', filter: "type = 'message'" });
    thread.push(msg('waiting'));
    // As if the database had been edited by hand: a filter subscribe would have refused.
    const db = new Database(join(thread.path, 'events.db'));
    db.prepare("UPDATE consumers SET filter = '0) UNION SELECT' WHERE consumer = 'bad'").run();
    db.close();
    const again = reopen(thread);
    const byName = Object.fromEntries(again.subscriptions().map((c) => [c.consumer, c]));
    expect(byName.good).toMatchObject({ pending: 1, last_error: null });
    expect(byName.bad).toMatchObject({ pending: 0 });
    expect(byName.bad!.last_error).toMatch(/stored filter is invalid/);
    expect(again.hasPending('good')).toBe(true);
    expect(again.hasPending('bad')).toBe(false);
    expect(again.info().consumers).toHaveLength(2);
  });
});

describe('events.jsonl', () => {
  it('holds one JSON line per stored event, matching what peek returns', () => {
    const thread = newThread();
    thread.push(msg('single', { idempotency_key: 'k' }));
    thread.push(msg('repeat', { idempotency_key: 'k' })); // stores nothing
    thread.pushBatch([msg('b1'), { source: 'self', type: 'record', subtype: 'decision', content: 'line\nbreak "quoted"' }]);
    expect(() => thread.pushBatch([msg('never'), { source: '', type: 'message', content: 'x' }])).toThrow(ClawError);
    thread.push(msg('last'));
    const lines = readFileSync(join(thread.path, 'events.jsonl'), 'utf8').split('\n');
    expect(lines.at(-1)).toBe('');
    const parsed = lines.slice(0, -1).map((line) => JSON.parse(line) as unknown);
    expect(parsed).toEqual(thread.peek({ limit: 1000 }));
    expect(parsed).toHaveLength(4);
  });

  it('a push whose copy cannot be written still succeeds, logs a warning and pokes notifier', async () => {
    const pokes: unknown[] = [];
    const server = await listenSocket(socketPath(t.home, 'notifier'), (message) => void pokes.push(message));
    try {
      const thread = newThread();
      mkdirSync(join(thread.path, 'events.jsonl')); // appending to a directory fails
      expect(thread.push(msg('stored anyway'))).toBe(1);
      expect(ids(thread.peek())).toEqual([1]);
      expect(readFileSync(join(thread.path, 'logs', 'thread.log'), 'utf8')).toMatch(/\[WARN\] events 1-1 are stored but missing from events.jsonl/);
      await waitFor(() => pokes.length > 0, 'the poke');
      expect(pokes[0]).toEqual({ op: 'poke', thread: thread.path });
    } finally {
      server.close();
    }
  });
});

describe('opening threads', () => {
  it('opening a directory that is not a thread is not_found and creates nothing', () => {
    const empty = join(t.home, 'empty');
    mkdirSync(empty);
    expectClawError(() => openThread(empty, { home: t.home }), 'not_found');
    expect(existsSync(join(empty, 'events.db'))).toBe(false);
    const missing = join(t.home, 'missing');
    const error = expectClawError(() => openThread(missing, { home: t.home }), 'not_found');
    expect(error.suggestion).toContain('thread init');
    expect(existsSync(missing)).toBe(false);
  });

  it('initThread creates events.db and logs/', () => {
    const thread = newThread('made');
    expect(existsSync(join(thread.path, 'events.db'))).toBe(true);
    expect(existsSync(join(thread.path, 'logs'))).toBe(true);
    expect(thread.info()).toEqual({ path: join(t.home, 'made'), events: 0, last_id: 0, consumers: [] });
  });

  it('initThread on an existing thread is a conflict and leaves it untouched', () => {
    const thread = newThread('twice');
    thread.push(msg('keep me'));
    expectClawError(() => initThread(thread.path, { home: t.home }), 'conflict');
    expect(
      reopen(thread)
        .peek()
        .map((event) => event.content),
    ).toEqual(['keep me']);
  });

  it('a file that is not a thread database is refused, not overwritten', () => {
    const dir = join(t.home, 'notdb');
    mkdirSync(dir);
    writeFileSync(join(dir, 'events.db'), '');
    // Not made moments ago, so no creator is waited for (see the next test).
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'events.db'), aMinuteAgo, aMinuteAgo);
    // An empty file is a valid empty SQLite database without our schema: as good as no thread.
    const error = expectClawError(() => openThread(dir, { home: t.home }), 'not_found');
    expect(error.message).toContain('its database has no schema');
  });

  it('a thread whose creator has made its file but not yet its schema is opened once the schema is made, not refused', async () => {
    // A busy machine can hold a creator up between the two; a reader (agent status listing the
    // conversations) meets the file in that moment.
    const path = join(t.home, 'being-made');
    mkdirSync(path);
    writeFileSync(join(path, 'events.db'), '');
    const library = pathToFileURL(join(packageRoot(), 'dist', 'thread', 'index.js')).href;
    const script = `
      import { openThread } from ${JSON.stringify(library)};
      const alive = setInterval(() => {}, 60_000);
      // Held up for a moment after being told to go on, as a busy machine holds a process up.
      process.once('SIGUSR2', () => setTimeout(() => {
        openThread(process.argv[1], { create: true }).close();
        clearInterval(alive);
      }, 300));
      process.stdout.write('ready\\n');
    `;
    const creator = spawn(process.execPath, ['--input-type=module', '-e', script, path], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    creator.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => creator.once('close', resolve));
    await new Promise<void>((resolve, reject) => {
      creator.stdout.once('data', () => resolve());
      creator.once('exit', (code) => reject(new Error(`the creator exited with ${code}: ${stderr}`)));
    });
    creator.kill('SIGUSR2'); // it makes the schema in a moment, while this process opens the thread
    const thread = openThread(path, { home: t.home });
    opened.push(thread);
    expect(thread.info()).toMatchObject({ events: 0 });
    expect(await exited, stderr).toBe(0);
  });

  it('a database written over is damaged: the error names the file and moves it aside, never deletes it', () => {
    const thread = newThread('damaged');
    thread.push(msg('lost'));
    thread.close();
    writeFileSync(join(thread.path, 'events.db'), 'garbage, not SQLite. '.repeat(500));
    for (const create of [false, true]) {
      const error = expectClawError(() => openThread(thread.path, { home: t.home, create }), 'damaged');
      expect(error.message).toBe(`the thread database ${join(thread.path, 'events.db')} is damaged (file is not a database)`);
      expect(error.suggestion).toBe(`move the thread away to start it afresh: mv ${JSON.stringify(thread.path)} ${JSON.stringify(`${thread.path}.damaged`)}`);
    }
    expect(readFileSync(join(thread.path, 'events.db'), 'utf8')).toMatch(/^garbage/);
  });

  it('two openThread(create: true) in one process on the same new path both succeed and share the events', () => {
    const path = join(t.home, 'shared');
    const a = openThread(path, { create: true, home: t.home });
    const b = openThread(path, { create: true, home: t.home });
    opened.push(a, b);
    expect(a.push(msg('from a'))).toBe(1);
    expect(b.push(msg('from b'))).toBe(2);
    expect(a.peek().map((event) => event.content)).toEqual(['from a', 'from b']);
  });

  it('processes opening the same new path with create: true at the same moment all succeed and the schema is created once', async () => {
    const path = join(t.home, 'raced');
    const library = pathToFileURL(join(packageRoot(), 'dist', 'thread', 'index.js')).href;
    const script = `
      import { openThread } from ${JSON.stringify(library)};
      process.stdout.write('ready\\n');
      await new Promise((resolve) => process.stdin.once('data', resolve));
      const thread = openThread(process.argv[1], { create: true });
      const id = thread.push({ source: 'self', type: 'message', content: process.argv[2] });
      thread.close();
      process.stdout.write(id + '\\n');
      process.stdin.destroy();
    `;
    const results = await startTogether(Array.from({ length: 6 }, (_, n) => [process.execPath, ['--input-type=module', '-e', script, path, `p${n}`]] as const));
    for (const result of results) expect(result.code, result.stderr).toBe(0);
    const pushed = results.map((result) => Number(result.stdout.trim().split('\n').at(-1)));
    expect([...pushed].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6]);
    const thread = openThread(path, { home: t.home });
    opened.push(thread);
    expect(thread.info()).toMatchObject({ events: 6, last_id: 6 });
    const db = new Database(join(path, 'events.db'), { readonly: true });
    try {
      expect(db.prepare("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('events', 'consumers')").pluck().get()).toBe(2);
      expect(db.pragma('user_version', { simple: true })).toBe(1);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  });
});

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Starts processes that each print `ready` and then wait for a line on stdin; once all are ready
 * they are released together (a barrier, not a sleep), and their results are collected.
 */
async function startTogether(commands: readonly (readonly [string, readonly string[]])[]): Promise<ChildResult[]> {
  const children = commands.map(([command, args]) => {
    const child = spawn(command, args, { env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const result: ChildResult = { code: null, stdout: '', stderr: '' };
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (result.stderr += chunk));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: string) => {
        result.stdout += chunk;
        if (result.stdout.includes('ready\n')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`child exited with ${code} before it was ready: ${result.stderr}`)));
    });
    const done = new Promise<ChildResult>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve({ ...result, code }));
    });
    return { child, ready, done };
  });
  await Promise.all(children.map((c) => c.ready));
  for (const { child } of children) child.stdin.end('go\n');
  return Promise.all(children.map((c) => c.done));
}

describe('prune', () => {
  const FUTURE = new Date(Date.now() + 86_400_000).toISOString(); // every event counts as old

  it('never removes an event a consumer has yet to handle, keeps the newest `keep`, and removes the rest of the old ones (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 3 }), fc.integer({ min: 0, max: 20 }), fc.boolean(), (count, progresses, keep, dryRun) => {
        const thread = newThread(`p-${Math.random().toString(36).slice(2)}`);
        if (count > 0) thread.pushBatch(Array.from({ length: count }, (_, i) => ({ source: 'self', type: 'message', content: `e${i + 1}` })));
        progresses.forEach((progress, i) => {
          thread.ack(`c${i}`, Math.min(progress, count));
        });
        const floor = progresses.length > 0 ? Math.min(...progresses.map((p) => Math.min(p, count))) : count;
        const removable = Math.max(0, Math.min(floor, count - keep));
        expect(thread.prune({ before: FUTURE, keep, dryRun })).toBe(removable);
        const ids = thread.peek({ limit: 1000 }).map((event) => event.id);
        expect(ids).toEqual(Array.from({ length: dryRun ? count : count - removable }, (_, i) => i + 1 + (dryRun ? 0 : removable)));
        // New events keep counting on: ids are never reused.
        expect(thread.push({ source: 'self', type: 'message', content: 'next' })).toBe(count + 1);
      }),
      { numRuns: 60 },
    );
  });

  it('removes nothing newer than the cut-off', () => {
    const thread = newThread('recent');
    thread.pushBatch([1, 2, 3].map((i) => ({ source: 'self', type: 'message', content: `e${i}` })));
    thread.ack('c', 3);
    expect(thread.prune({ before: new Date(Date.now() - 60_000).toISOString(), keep: 0 })).toBe(0);
    expect(thread.peek()).toHaveLength(3);
  });
});
