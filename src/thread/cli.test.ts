import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { createTestHome, fixture, runTool, waitFor, type RunResult, type TestHome } from '../testing/index.js';
import { openThread } from './thread.js';
import type { ConsumerInfo, ThreadEvent, ThreadInfo } from './types.js';

let t: TestHome;
let dir: string;

beforeEach(() => {
  t = createTestHome();
  dir = join(t.home, 'demo');
});

afterEach(() => t.cleanup());

const ERROR_LINE = /^Error: .+ - .+\n$/;
const EVENT_KEYS = ['content', 'created_at', 'id', 'source', 'subtype', 'type'];
const CONSUMER_KEYS = ['consumer', 'failures', 'filter', 'handler', 'last_error', 'lease', 'pending', 'progress', 'retry_at', 'subscribed'];

function thread(args: string[], input?: string | Buffer): Promise<RunResult> {
  return runTool('thread', args, t.env, input);
}

/** Runs a command that must succeed: exit 0 and nothing on stderr. Returns stdout. */
async function ok(args: string[], input?: string | Buffer): Promise<string> {
  const result = await thread(args, input);
  expect(result, `thread ${args.join(' ')}`).toMatchObject({ code: 0, stderr: '' });
  return result.stdout;
}

/** Runs a command that must fail with `code` and an `Error: ... - ...` line on stderr. */
async function fails(code: 1 | 2, args: string[], input?: string | Buffer): Promise<string> {
  const result = await thread(args, input);
  expect(result.code, `thread ${args.join(' ')}: ${result.stderr}`).toBe(code);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(ERROR_LINE);
  return result.stderr;
}

async function init(path = dir): Promise<void> {
  await ok(['init', path]);
}

async function pushContent(path: string, ...contents: string[]): Promise<number[]> {
  const ids: number[] = [];
  for (const content of contents) ids.push(Number(await ok(['push', '--thread', path, '--source', 'self', '--type', 'message', '--content', content])));
  return ids;
}

function ndjson(stdout: string): ThreadEvent[] {
  if (stdout === '') return [];
  expect(stdout.endsWith('\n')).toBe(true);
  return stdout
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as ThreadEvent);
}

/** Reads the thread's state in-process (cheap enough to poll). */
function infoOf(path = dir): ThreadInfo {
  const opened = openThread(path, { home: t.home });
  try {
    return opened.info();
  } finally {
    opened.close();
  }
}

function consumerOf(name: string, path = dir): ConsumerInfo | undefined {
  return infoOf(path).consumers.find((c) => c.consumer === name);
}

describe('thread --help', () => {
  it('prints the help on stderr and exits 2 when no command is given, with no Error line', async () => {
    const result = await thread([]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^Usage: thread /);
    expect(result.stderr).not.toMatch(/Error:|outputHelp/);
  });

  it('lists every command of the design', async () => {
    const stdout = await ok(['--help']);
    for (const command of ['init', 'push', 'pop', 'ack', 'peek', 'subscribe', 'unsubscribe', 'info', 'dispatch']) {
      expect(stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    }
  });

  it('an unknown command is a usage error', async () => {
    await fails(2, ['frobnicate']);
  });
});

describe('thread init', () => {
  it('creates the thread directory and prints its path', async () => {
    expect(await ok(['init', dir])).toBe(`created thread ${dir}\n`);
    expect(existsSync(join(dir, 'events.db'))).toBe(true);
    expect(existsSync(join(dir, 'logs'))).toBe(true);
  });

  it('prints {"path"} under --json', async () => {
    expect(JSON.parse(await ok(['init', dir, '--json']))).toEqual({ path: dir });
  });

  it('exits 1 with "Error: ... - ..." when the directory is already a thread', async () => {
    await init();
    await pushContent(dir, 'kept');
    const stderr = await fails(1, ['init', dir]);
    expect(stderr).toContain('already a thread');
    expect(infoOf().events).toBe(1);
  });
});

describe('thread push', () => {
  beforeEach(() => init());

  it('--content prints the new id, one higher each time', async () => {
    expect(await pushContent(dir, 'a', 'b', 'c')).toEqual([1, 2, 3]);
    expect(infoOf()).toMatchObject({ events: 3, last_id: 3 });
  });

  it('stores --subtype and the content byte for byte', async () => {
    const content = '{"text":"héllo \\"quoted\\"\\n"}';
    await ok(['push', '--thread', dir, '--source', 'self', '--type', 'record', '--subtype', 'decision', '--content', content]);
    expect(ndjson(await ok(['peek', '--thread', dir]))).toEqual([expect.objectContaining({ id: 1, source: 'self', type: 'record', subtype: 'decision', content })]);
  });

  it('--batch reads NDJSON from stdin and prints one id per line, flags giving defaults', async () => {
    const batch = [
      JSON.stringify({ content: 'a' }),
      '',
      JSON.stringify({ content: 'b', source: 'external:x', idempotency_key: 'kb' }),
      JSON.stringify({ content: { text: 'structured' }, type: 'record', subtype: 'usage' }),
      '',
    ].join('\n');
    const stdout = await ok(['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], batch);
    expect(stdout).toBe('1\n2\n3\n');
    const events = ndjson(await ok(['peek', '--thread', dir]));
    expect(events.map(({ source, type, subtype, content }) => ({ source, type, subtype, content }))).toEqual([
      { source: 'self', type: 'message', subtype: null, content: 'a' },
      { source: 'external:x', type: 'message', subtype: null, content: 'b' },
      { source: 'self', type: 'record', subtype: 'usage', content: '{"text":"structured"}' },
    ]);
  });

  it('--idempotency-key repeated prints the first id and stores nothing', async () => {
    const args = ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--idempotency-key', 'msg-1'];
    expect(await ok([...args, '--content', 'first'])).toBe('1\n');
    expect(await ok([...args, '--content', 'second'])).toBe('1\n');
    expect(ndjson(await ok(['peek', '--thread', dir])).map((e) => e.content)).toEqual(['first']);
    expect(await pushContent(dir, 'next')).toEqual([2]);
  });

  it('--json prints {"id":N} for one event and {"ids":[...]} for a batch', async () => {
    const base = ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--json'];
    expect(JSON.parse(await ok([...base, '--content', 'one']))).toEqual({ id: 1 });
    const batch = `${JSON.stringify({ content: 'a' })}\n${JSON.stringify({ content: 'b' })}\n`;
    expect(JSON.parse(await ok([...base, '--batch'], batch))).toEqual({ ids: [2, 3] });
  });

  it('a malformed NDJSON line exits 2 naming the line, and nothing of the batch is stored', async () => {
    const batch = `${JSON.stringify({ content: 'a' })}\n{"content": "b"\n${JSON.stringify({ content: 'c' })}\n`;
    const stderr = await fails(2, ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], batch);
    expect(stderr).toContain('line 2');
    expect(infoOf()).toMatchObject({ events: 0, last_id: 0 });
  });

  it('an invalid event in a batch exits 2 and stores nothing', async () => {
    const batch = `${JSON.stringify({ content: 'a' })}\n${JSON.stringify({ content: 'b', type: 'Message!' })}\n`;
    const stderr = await fails(2, ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], batch);
    expect(stderr).toContain('batch line 2');
    expect(infoOf().events).toBe(0);
  });

  it('invalid UTF-8 on stdin exits 2 and stores nothing', async () => {
    const batch = Buffer.concat([Buffer.from('{"content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\n')]);
    const stderr = await fails(2, ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], batch);
    expect(stderr).toContain('UTF-8');
    expect(infoOf().events).toBe(0);
  });

  it('an empty batch exits 2', async () => {
    await fails(2, ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], '');
  });

  it('missing --thread exits 2 with the exact commander message and a help hint', async () => {
    const result = await thread(['push', '--source', 'self', '--type', 'message', '--content', 'x']);
    expect(result).toEqual({
      code: 2,
      stdout: '',
      stderr: "Error: required option '--thread <path>' not specified - see 'thread push --help'\n",
    });
  });

  it('a push without --source or --type says which flag is missing', async () => {
    expect(await thread(['push', '--thread', dir, '--type', 'message', '--content', 'x'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'Error: invalid event: source is missing - pass --source\n',
    });
    expect((await thread(['push', '--thread', dir, '--source', 'self', '--content', 'x'])).stderr).toBe('Error: invalid event: type is missing - pass --type\n');
    const batch = await thread(['push', '--thread', dir, '--type', 'message', '--batch'], '{"content":"a"}\n{"content":"b","source":"self"}\n');
    expect(batch.code).toBe(2);
    expect(batch.stderr).toMatch(/^Error: invalid event on batch line 1: source is missing - /);
    expect(infoOf().events).toBe(0);
  });

  it('a thread directory that does not exist exits 1 and creates nothing', async () => {
    const missing = join(t.home, 'missing');
    const stderr = await fails(1, ['push', '--thread', missing, '--source', 'self', '--type', 'message', '--content', 'x']);
    expect(stderr).toContain('is not a thread');
    expect(existsSync(missing)).toBe(false);
  });

  it.each([
    ['an invalid type', ['--source', 'self', '--type', 'Message!', '--content', 'x']],
    ['an empty source', ['--source', '', '--type', 'message', '--content', 'x']],
    ['no content and no --batch', ['--source', 'self', '--type', 'message']],
    ['both --content and --batch', ['--source', 'self', '--type', 'message', '--content', 'x', '--batch']],
    ['--idempotency-key with --batch', ['--source', 'self', '--type', 'message', '--batch', '--idempotency-key', 'k']],
  ])('%s exits 2 and stores nothing', async (_, args) => {
    await fails(2, ['push', '--thread', dir, ...args], `${JSON.stringify({ content: 'a' })}\n`);
    expect(infoOf().events).toBe(0);
  });
});

describe('thread pop', () => {
  beforeEach(async () => {
    await init();
    // In-process: pop is under test here, and push --batch (tested above) needs a process of its own for its stdin.
    const opened = openThread(dir, { home: t.home });
    try {
      opened.pushBatch(['a', 'b', 'c', 'd'].map((content) => ({ source: 'self', type: 'message', content })));
    } finally {
      opened.close();
    }
  });

  it('prints NDJSON lines, each with exactly id, created_at, source, type, subtype, content', async () => {
    const stdout = await ok(['pop', '--thread', dir, '--consumer', 'worker']);
    const events = ndjson(stdout);
    expect(events.map((e) => e.id)).toEqual([1, 2, 3, 4]);
    for (const event of events) {
      expect(Object.keys(event).sort()).toEqual(EVENT_KEYS);
      expect(event).toMatchObject({ source: 'self', type: 'message', subtype: null });
    }
    expect(stdout.split('\n')[0]).toMatch(/^\{"id":1,"created_at":"[^"]+","source":"self","type":"message","subtype":null,"content":"a"\}$/);
  });

  it('without an ack returns the same events again', async () => {
    const first = await ok(['pop', '--thread', dir, '--consumer', 'worker']);
    expect(await ok(['pop', '--thread', dir, '--consumer', 'worker'])).toBe(first);
  });

  it('--last-event-id acknowledges that id first and returns the events after it', async () => {
    expect(ndjson(await ok(['pop', '--thread', dir, '--consumer', 'worker', '--last-event-id', '2'])).map((e) => e.id)).toEqual([3, 4]);
    expect(consumerOf('worker')).toMatchObject({ progress: 2, pending: 2 });
  });

  it('an old --last-event-id does not move progress back nor replay acknowledged events', async () => {
    await ok(['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '4']);
    expect(await ok(['pop', '--thread', dir, '--consumer', 'worker', '--last-event-id', '1'])).toBe('');
    expect(consumerOf('worker')!.progress).toBe(4);
  });

  it('--limit bounds the events returned', async () => {
    expect(ndjson(await ok(['pop', '--thread', dir, '--consumer', 'worker', '--limit', '3'])).map((e) => e.id)).toEqual([1, 2, 3]);
  });

  it.each([
    ['--limit 0', ['--limit', '0']],
    ['--limit abc', ['--limit', 'abc']],
    ['--last-event-id -1', ['--last-event-id', '-1']],
  ])('%s exits 2 and acknowledges nothing', async (_, args) => {
    await fails(2, ['pop', '--thread', dir, '--consumer', 'worker', ...args]);
    expect(consumerOf('worker')).toBeUndefined();
  });

  it('--last-event-id past the newest event exits 1 and keeps progress', async () => {
    const stderr = await fails(1, ['pop', '--thread', dir, '--consumer', 'worker', '--last-event-id', '9']);
    expect(stderr).toContain('does not exist');
    expect(consumerOf('worker')).toBeUndefined();
  });

  it('prints nothing when nothing is pending', async () => {
    expect(await ok(['pop', '--thread', dir, '--consumer', 'worker', '--last-event-id', '4'])).toBe('');
  });

  it('a missing --consumer exits 2', async () => {
    await fails(2, ['pop', '--thread', dir]);
  });
});

describe('thread ack', () => {
  beforeEach(async () => {
    await init();
    await pushContent(dir, 'a', 'b', 'c');
  });

  it('prints the stored progress, which never moves back', async () => {
    expect(await ok(['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '2'])).toBe('2\n');
    expect(await ok(['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '1'])).toBe('2\n');
    expect(consumerOf('worker')!.progress).toBe(2);
  });

  it('--json prints {"consumer","progress"}', async () => {
    expect(JSON.parse(await ok(['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '3', '--json']))).toEqual({ consumer: 'worker', progress: 3 });
  });

  it('an id past the newest event exits 1 and stores nothing', async () => {
    await fails(1, ['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '4']);
    expect(consumerOf('worker')).toBeUndefined();
  });

  it('a missing --event-id exits 2', async () => {
    await fails(2, ['ack', '--thread', dir, '--consumer', 'worker']);
  });
});

describe('thread peek', () => {
  beforeEach(async () => {
    await init();
    const lines = Array.from({ length: 10 }, (_, n) => JSON.stringify(n % 2 === 0 ? { content: `m${n}`, source: `external:peer${n}` } : { content: `r${n}`, type: 'record', subtype: 'toolcall' }));
    await ok(['push', '--thread', dir, '--source', 'self', '--type', 'message', '--batch'], lines.join('\n'));
  });

  const peekIds = async (...args: string[]) => ndjson(await ok(['peek', '--thread', dir, ...args])).map((e) => e.id);

  it('prints every event oldest first, and consumes nothing', async () => {
    expect(await peekIds()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(infoOf().consumers).toEqual([]);
  });

  it('--filter selects matching events', async () => {
    expect(await peekIds('--filter', "type = 'message' AND source LIKE 'external:%'")).toEqual([1, 3, 5, 7, 9]);
    expect(await peekIds('--filter', "subtype = 'toolcall' AND id > 6")).toEqual([8, 10]);
  });

  it('--last K prints the newest K oldest first, with the filter applied', async () => {
    expect(await peekIds('--last', '3')).toEqual([8, 9, 10]);
    expect(await peekIds('--last', '2', '--filter', "type = 'message'")).toEqual([7, 9]);
  });

  it('--last-event-id and --limit page through the events', async () => {
    expect(await peekIds('--last-event-id', '4', '--limit', '3')).toEqual([5, 6, 7]);
  });

  it('a bad filter exits 2 and the error names the position', async () => {
    const stderr = await fails(2, ['peek', '--thread', dir, '--filter', "type = 'message' AND"]);
    expect(stderr).toMatch(/position 21/);
  });

  it('an SQL injection attempt is a bad filter', async () => {
    const stderr = await fails(2, ['peek', '--thread', dir, '--filter', '0) UNION SELECT * FROM events --']);
    expect(stderr).toMatch(/position 1/);
    expect(infoOf().events).toBe(10);
  });

  it('--json with a bad filter prints {"error","suggestion"} on stdout and exits 2', async () => {
    const result = await thread(['peek', '--thread', dir, '--filter', 'type = message', '--json']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('');
    const error = JSON.parse(result.stdout) as Record<string, string>;
    expect(Object.keys(error).sort()).toEqual(['error', 'suggestion']);
    expect(error.error).toMatch(/position 8/);
  });

  it('--last with --limit exits 2', async () => {
    await fails(2, ['peek', '--thread', dir, '--last', '2', '--limit', '3']);
  });
});

describe('thread subscribe and unsubscribe', () => {
  beforeEach(async () => {
    await init();
    await pushContent(dir, 'a', 'b');
  });

  it('subscribe exits 0 and the consumer shows as subscribed with its handler and filter', async () => {
    expect(await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'my-handler --verbose', '--filter', "type = 'message'"])).toBe(`subscribed worker to ${dir}\n`);
    expect(consumerOf('worker')).toMatchObject({ subscribed: true, handler: 'my-handler --verbose', filter: "type = 'message'", pending: 2 });
  });

  it('subscribe --json prints {"thread","consumer","handler","filter"}', async () => {
    expect(JSON.parse(await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h', '--json']))).toEqual({
      thread: dir,
      consumer: 'worker',
      handler: 'h',
      filter: null,
    });
  });

  it('subscribe with a bad filter exits 2 with the position and keeps the previous subscription', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h', '--filter', "type = 'message'"]);
    const stderr = await fails(2, ['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'other', '--filter', "type = 'message' OR"]);
    expect(stderr).toMatch(/position \d+/);
    expect(consumerOf('worker')).toMatchObject({ handler: 'h', filter: "type = 'message'" });
  });

  it('unsubscribe exits 0, keeps progress, and --json prints {"thread","consumer","subscribed":false}', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h']);
    await ok(['ack', '--thread', dir, '--consumer', 'worker', '--event-id', '1']);
    expect(JSON.parse(await ok(['unsubscribe', '--thread', dir, '--consumer', 'worker', '--json']))).toEqual({
      thread: dir,
      consumer: 'worker',
      subscribed: false,
    });
    expect(consumerOf('worker')).toMatchObject({ subscribed: false, progress: 1 });
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h']);
    expect(ndjson(await ok(['pop', '--thread', dir, '--consumer', 'worker'])).map((e) => e.id)).toEqual([2]);
  });

  it('unsubscribe prints a line saying progress is kept', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h']);
    expect(await ok(['unsubscribe', '--thread', dir, '--consumer', 'worker'])).toBe(`unsubscribed worker from ${dir} (progress kept)\n`);
  });

  it('unsubscribe of an unknown consumer exits 1', async () => {
    const stderr = await fails(1, ['unsubscribe', '--thread', dir, '--consumer', 'nobody']);
    expect(stderr).toContain('nobody');
  });
});

describe('thread info', () => {
  beforeEach(async () => {
    await init();
    await pushContent(dir, 'a', 'b', 'c');
  });

  it('--json prints path, events, last_id and consumers with their full state', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h --x', '--filter', 'id > 1']);
    await ok(['ack', '--thread', dir, '--consumer', 'reader', '--event-id', '1']);
    const info = JSON.parse(await ok(['info', '--thread', dir, '--json'])) as ThreadInfo;
    expect(Object.keys(info).sort()).toEqual(['consumers', 'events', 'last_id', 'path']);
    expect(info).toMatchObject({ path: dir, events: 3, last_id: 3 });
    for (const consumer of info.consumers) expect(Object.keys(consumer).sort()).toEqual(CONSUMER_KEYS);
    expect(info.consumers).toEqual([
      { consumer: 'reader', progress: 1, pending: 2, subscribed: false, handler: null, filter: null, lease: null, failures: 0, last_error: null, retry_at: null },
      { consumer: 'worker', progress: 0, pending: 2, subscribed: true, handler: 'h --x', filter: 'id > 1', lease: null, failures: 0, last_error: null, retry_at: null },
    ]);
  });

  it('prints a readable summary without --json', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'h']);
    const stdout = await ok(['info', '--thread', dir]);
    expect(stdout).toContain('events   3 (last id 3)');
    expect(stdout).toContain('worker: progress 0, pending 3, handler h');
  });

  it('a missing thread exits 1, and with --json prints the error as JSON on stdout', async () => {
    await fails(1, ['info', '--thread', join(t.home, 'nope')]);
    const result = await thread(['info', '--thread', join(t.home, 'nope'), '--json']);
    expect(result.code).toBe(1);
    expect(Object.keys(JSON.parse(result.stdout) as object).sort()).toEqual(['error', 'suggestion']);
  });
});

describe('thread dispatch', () => {
  beforeEach(() => init());

  it('prints "nothing to dispatch" when no handler has pending events', async () => {
    expect(await ok(['dispatch', '--thread', dir])).toBe('nothing to dispatch\n');
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'never-run-me']);
    expect(await ok(['dispatch', '--thread', dir])).toBe('nothing to dispatch\n');
    expect(JSON.parse(await ok(['dispatch', '--thread', dir, '--json']))).toEqual({ started: [] });
  });

  it('starts a subscribed handler that has pending events, which pops and acks them', async () => {
    const seen = join(t.home, 'seen.txt');
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', joinCommand([process.execPath, fixture('handler.mjs'), seen])]);
    await pushContent(dir, 'a', 'b');
    const stdout = await ok(['dispatch', '--thread', dir]);
    expect(stdout).toMatch(/^started worker \(pid \d+\)\n$/);
    await waitFor(() => consumerOf('worker')?.progress === 2 && consumerOf('worker')?.lease === null, 'the handler to ack both events');
    expect(readFileSync(seen, 'utf8')).toBe('1\n2\n');
    expect(await ok(['dispatch', '--thread', dir])).toBe('nothing to dispatch\n');
  });

  it('--json prints {"started":[{"consumer","pid"}]}', async () => {
    const seen = join(t.home, 'seen.txt');
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', joinCommand([process.execPath, fixture('handler.mjs'), seen])]);
    await pushContent(dir, 'a');
    const result = JSON.parse(await ok(['dispatch', '--thread', dir, '--json'])) as { started: { consumer: string; pid: number }[] };
    expect(result.started).toEqual([{ consumer: 'worker', pid: expect.any(Number) }]);
    await waitFor(() => consumerOf('worker')?.progress === 1 && consumerOf('worker')?.lease === null, 'the handler to finish');
  });

  it('rotates a full handlers.log before handing it to the handlers', async () => {
    const logs = join(dir, 'logs');
    writeFileSync(join(logs, 'handlers.log'), 'old output\n'.repeat(10_000));
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', joinCommand(['bash', '-c', 'echo fresh output'])]);
    await pushContent(dir, 'a');
    await ok(['dispatch', '--thread', dir]);
    const rotated = readdirSync(logs).filter((name) => /^handlers-\d{8}-\d{6}(-\d+)?\.log$/.test(name));
    expect(rotated).toHaveLength(1);
    expect(readFileSync(join(logs, rotated[0]!), 'utf8').split('\n')).toHaveLength(10_001);
    await waitFor(() => readFileSync(join(logs, 'handlers.log'), 'utf8') === 'fresh output\n', 'the handler output in the new log');
  });

  it('a handler that cannot be started exits 1 with the error and leaves no lease behind', async () => {
    await ok(['subscribe', '--thread', dir, '--consumer', 'worker', '--handler', 'no-such-program-anywhere --flag']);
    await pushContent(dir, 'a');
    const stderr = await fails(1, ['dispatch', '--thread', dir]);
    expect(stderr).toMatch(/^Error: could not start worker: cannot run "no-such-program-anywhere --flag": program not found/);
    expect(consumerOf('worker')).toMatchObject({ lease: null, progress: 0, pending: 1 });
  });
});

describe('a thread path with spaces and quotes', () => {
  it('works for every command', async () => {
    const parent = join(t.home, "my threads; it's $HOME");
    mkdirSync(parent);
    const path = join(parent, 'the "inbox"');
    expect(await ok(['init', path])).toBe(`created thread ${path}\n`);
    expect(await ok(['push', '--thread', path, '--source', 'self', '--type', 'message', '--content', 'a'])).toBe('1\n');
    expect(await ok(['push', '--thread', path, '--source', 'self', '--type', 'message', '--batch'], '{"content":"b"}\n{"content":"c"}\n')).toBe('2\n3\n');
    expect(ndjson(await ok(['peek', '--thread', path, '--last', '1'])).map((e) => e.content)).toEqual(['c']);
    expect(ndjson(await ok(['pop', '--thread', path, '--consumer', 'reader', '--limit', '2'])).map((e) => e.id)).toEqual([1, 2]);
    expect(await ok(['ack', '--thread', path, '--consumer', 'reader', '--event-id', '2'])).toBe('2\n');
    const seen = join(parent, 'seen file.txt');
    await ok(['subscribe', '--thread', path, '--consumer', 'worker', '--handler', joinCommand([process.execPath, fixture('handler.mjs'), seen])]);
    expect(await ok(['dispatch', '--thread', path])).toMatch(/^started worker \(pid \d+\)\n$/);
    await waitFor(() => consumerOf('worker', path)?.progress === 3 && consumerOf('worker', path)?.lease === null, 'the handler to ack all events');
    expect(readFileSync(seen, 'utf8')).toBe('1\n2\n3\n');
    const info = JSON.parse(await ok(['info', '--thread', path, '--json'])) as ThreadInfo;
    expect(info).toMatchObject({ path, events: 3, last_id: 3 });
    expect(info.consumers.map((c) => [c.consumer, c.progress])).toEqual([
      ['reader', 2],
      ['worker', 3],
    ]);
    await ok(['unsubscribe', '--thread', path, '--consumer', 'worker']);
    expect(consumerOf('worker', path)!.subscribed).toBe(false);
  });
});
