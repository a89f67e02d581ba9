import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { agentDir } from '../agent/agent-dir.js';
import { initAgent } from '../agent/lifecycle.js';
import { daemonHolder } from '../core/daemon.js';
import { isClawError } from '../core/errors.js';
import { socketPath } from '../core/home.js';
import { createTestHome, expectClawError, expectRefused, run, runTool, type TestHome } from '../testing/index.js';
import { TimerStore } from '../notifier/timers.js';
import { parseBatch } from '../thread/commands.js';
import { initThread, openThread, type Thread } from '../thread/thread.js';
import { MAX_CONTENT_BYTES } from '../thread/types.js';
import { requireAgentId } from '../xgw/route.js';
import { threadSnapshot } from './support.js';

/**
 * Bad input at the boundaries that need no running system: what a user or a script hands the
 * CLIs (NDJSON batches, arguments, filters, ids) and the config files the tools and daemons read.
 * Every refusal is `Error: <what> - <how to fix>` (or `{"error","suggestion"}` under --json) with
 * the README's exit code, and leaves what was stored exactly as it was, SQLite file sound.
 * The running system's boundaries (web chat, Telegram, the inbox) are in bad-input-pipeline.test.ts.
 */

let t: TestHome;
let thread: string;

beforeAll(async () => {
  t = createTestHome();
  thread = join(t.home, 'demo');
  const demo = initThread(thread, { home: t.home });
  demo.pushBatch([
    { source: 'self', type: 'message', content: '{"text":"kept"}', idempotency_key: 'k1' },
    { source: 'external:telegram:main:dm:1:1', type: 'message', content: 'plain' },
    { source: 'self', type: 'record', subtype: 'usage', content: '{}' },
  ]);
  demo.close();
  await initAgent(t.home, 'helper');
});

afterAll(() => t.cleanup());

const pushBatch = (stdin: Buffer | string, json: boolean) =>
  runTool('thread', ['push', '--thread', thread, '--source', 'self', '--type', 'message', '--batch', ...(json ? ['--json'] : [])], t.env, stdin);

const lines = (...parts: (string | Buffer)[]) => Buffer.concat(parts.flatMap((part) => [Buffer.from(part), Buffer.from('\n')]));
const good = (text: string) => JSON.stringify({ content: text });

describe('thread push --batch', () => {
  const cases: [string, Buffer, RegExp][] = [
    ['a line that is not JSON', lines(good('a'), 'nope', good('c')), /batch line 2 is not JSON/],
    ['a line cut off at the end', Buffer.from(`${good('a')}\n{"content":"b`), /batch line 2 is not JSON/],
    ['a JSON array', lines(good('a'), good('b'), '[1,2]'), /batch line 3 is not a JSON object/],
    ['content that is a number', lines(good('a'), '{"content":5}'), /batch line 2: content must be a string/],
    ['a bad type after a blank line', lines(good('a'), '', '{"content":"x","type":"Bad Type"}'), /batch line 3: type must be a lower-case word/],
    ['a source with a newline in it', lines(good('a'), '{"content":"x","source":"a\\nb"}'), /batch line 2: source holds a control character/],
    ['bytes that are not UTF-8', lines(good('a'), Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), good('c')), /batch line 2 is not valid UTF-8/],
    ['a lone UTF-16 surrogate', lines(good('a'), '{"content":"a\\ud800b"}'), /batch line 2: content holds a lone UTF-16 surrogate/],
    ['10 MB of content', lines(good('a'), good('x'.repeat(10 * 1024 * 1024))), /batch line 2: content is larger than 1 MiB/],
    ['nothing but blank lines', lines('', ' '), /the batch on stdin is empty/],
  ];

  it(`refuses a batch whole, naming the line, and stores nothing: ${cases.map(([name]) => name).join(', ')}`, async () => {
    const before = threadSnapshot(thread);
    expect(before.integrity).toBe('ok');
    await Promise.all(
      cases.map(async ([label, stdin, what]) => {
        const [plain, json] = await Promise.all([pushBatch(stdin, false), pushBatch(stdin, true)]);
        expectRefused(plain, 2, what, { label });
        expectRefused(json, 2, what, { json: true, label });
      }),
    );
    expect(threadSnapshot(thread)).toEqual(before);
  });

  it('stores content of exactly the size limit intact, and refuses one byte more', async () => {
    const atLimit = 'é✓'.repeat(Math.floor(MAX_CONTENT_BYTES / 5)) + 'x'.repeat(MAX_CONTENT_BYTES % 5);
    expect(Buffer.byteLength(atLimit)).toBe(MAX_CONTENT_BYTES);
    const over = `${atLimit}y`;
    expectRefused(await pushBatch(lines(good(over)), false), 2, /content is larger than 1 MiB/);
    const stored = await pushBatch(lines(good(atLimit)), true);
    expect(stored.code, stored.stderr).toBe(0);
    const { ids } = JSON.parse(stored.stdout) as { ids: number[] };
    const peek = JSON.parse((await runTool('thread', ['peek', '--thread', thread, '--last', '1'], t.env)).stdout) as { id: number; content: string };
    expect(peek.id).toBe(ids[0]);
    expect(peek.content === atLimit, 'the content read back is the content pushed').toBe(true);
    expect(threadSnapshot(thread).integrity).toBe('ok');
  });
});

describe('arguments that are not UTF-8', () => {
  // Node would hand these over with U+FFFD in place of each bad byte: stored, they would be changed.
  const cases: [string, string, RegExp, () => unknown][] = [
    ['thread push --content', `thread push --thread "$THREAD" --source self --type message --content $'a\\xff\\xfeb'`, /the value of --content is not valid UTF-8/, () => threadSnapshot(thread)],
    ['agent send --text', `agent send helper --text $'caf\\xe9'`, /the value of --text is not valid UTF-8/, () => threadSnapshot(agentDir(t.home, 'helper').inbox)],
    ['notifier timer add --command', `notifier timer add --id t1 --every 1m --command=$'echo \\xc3'`, /the value of --command is not valid UTF-8/, () => timerIds()],
    ['an agent id', `agent init $'h\\xffx'`, /argument 2 is not valid UTF-8/, () => readdirSync(join(t.home, 'agents'))],
  ];

  it(`are refused, and nothing is stored: ${cases.map(([name]) => name).join(', ')}`, async () => {
    const before = cases.map(([, , , stored]) => stored());
    const env = { ...t.env, THREAD: thread };
    await Promise.all(
      cases.map(async ([label, command, what]) => {
        const [plain, json] = await Promise.all([run('bash', ['-c', command], { env }), run('bash', ['-c', `${command} --json`], { env })]);
        expectRefused(plain, 2, what, { label });
        expectRefused(json, 2, what, { json: true, label });
      }),
    );
    expect(cases.map(([, , , stored]) => stored())).toEqual(before);
  });
});

function timerIds(): string[] {
  const store = new TimerStore(t.home);
  try {
    return store.list().map((timer) => timer.id);
  } finally {
    store.close();
  }
}

describe('any bytes as a batch', () => {
  // Lines that are nearly right: valid events with any text (lone surrogates included), and the
  // same with bytes cut out or put in, so that the property meets every refusal and acceptance.
  const text = fc.string({ unit: fc.oneof(fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), fc.constantFrom('\ud800', '\udfff', '"', '\\', '\n')), maxLength: 12 });
  const event = fc.record({ content: fc.oneof(text, fc.dictionary(text, text, { maxKeys: 2 })), subtype: fc.option(fc.constantFrom('usage', 'Bad'), { nil: undefined }) });
  const line = fc.oneof(
    event.map((value) => Buffer.from(JSON.stringify(value))),
    fc.tuple(event, fc.nat(), fc.uint8Array({ maxLength: 3 })).map(([value, at, bytes]) => {
      const whole = Buffer.from(JSON.stringify(value));
      const cut = at % (whole.length + 1);
      return Buffer.concat([whole.subarray(0, cut), bytes, whole.subarray(cut)]);
    }),
    fc.uint8Array({ maxLength: 8 }).map((bytes) => Buffer.from(bytes)),
  );
  const batch = fc.array(line, { minLength: 1, maxLength: 5 }).map((parts) => Buffer.concat(parts.flatMap((part) => [part, Buffer.from('\n')])));

  /** What the stored contents must be if the batch is taken: each non-blank line's content, as text. */
  function expectedContents(data: Buffer): string[] {
    return new TextDecoder('utf-8', { fatal: true })
      .decode(data)
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const { content } = JSON.parse(l) as { content: unknown };
        return typeof content === 'string' ? content : JSON.stringify(content);
      });
  }

  let demo: Thread;
  afterEach(() => demo?.close());

  it('either round-trip exactly or are refused naming a line, leaving the store unchanged (library, as the CLI parses)', () => {
    demo = openThread(join(t.home, 'property'), { home: t.home, create: true });
    fc.assert(
      fc.property(batch, (data) => {
        const before = demo.peek({ last: 1 });
        const lastId = demo.info().last_id;
        let ids: number[];
        try {
          ids = demo.pushBatch(parseBatch(data, { source: 'self', type: 'message' }));
        } catch (error) {
          if (!isClawError(error, 'usage')) throw error;
          expect(error.message).toMatch(/^(invalid event on )?batch line \d+/);
          expect(error.suggestion).toBeTruthy();
          expect(demo.info().last_id).toBe(lastId);
          expect(demo.peek({ last: 1 })).toEqual(before);
          return;
        }
        const stored = demo.peek({ afterId: lastId, limit: 100 });
        expect(stored.map((e) => e.id)).toEqual(ids);
        expect(stored.map((e) => e.content)).toEqual(expectedContents(data));
      }),
      { numRuns: 400 },
    );
    demo.close();
    expect(threadSnapshot(join(t.home, 'property')).integrity).toBe('ok');
  });

  it('either round-trip exactly or are refused naming a line, leaving the store unchanged (the real CLI)', async () => {
    await fc.assert(
      fc.asyncProperty(batch, async (data) => {
        const before = threadSnapshot(thread);
        const result = await pushBatch(data, true);
        if (result.code !== 0) {
          expectRefused(result, 2, /batch line \d+|the batch on stdin is empty/, { json: true });
          expect(threadSnapshot(thread)).toEqual(before);
          return;
        }
        const { ids } = JSON.parse(result.stdout) as { ids: number[] };
        const after = threadSnapshot(thread);
        expect(after.integrity).toBe('ok');
        const added = after.rows.slice(before.rows.length) as { id: number; content: string }[];
        expect(added.map((row) => row.id)).toEqual(ids);
        expect(added.map((row) => row.content)).toEqual(expectedContents(data));
      }),
      { numRuns: 6 },
    );
  });
});

describe('filters with SQL in them', () => {
  const refused: [string, RegExp][] = [
    ['1=1; DROP TABLE events', /invalid filter at position 1: expected a field/],
    ["type = 'message'; DROP TABLE events", /invalid filter at position 17/],
    ['0) UNION SELECT sql, 1, 1, 1, 1, 1 FROM sqlite_master --', /invalid filter at position 1/],
    ['id > 0) UNION SELECT name, 1, 1, 1, 1, 1 FROM sqlite_master WHERE (1', /invalid filter at position 7: unmatched '\)'/],
    ["source = '' OR 1=1", /invalid filter at position 16: expected a field/],
    ['content LIKE "%"', /invalid filter at position 1/],
    ["type = 'x' /*", /invalid filter at position 12/],
  ];

  it('are refused at peek and at subscribe, with the position of the problem, and change nothing', async () => {
    const before = threadSnapshot(thread);
    await Promise.all(
      refused.map(async ([filter, what]) => {
        const [peek, subscribe] = await Promise.all([
          runTool('thread', ['peek', '--thread', thread, '--filter', filter], t.env),
          runTool('thread', ['subscribe', '--thread', thread, '--consumer', 'sql', '--handler', 'true', '--filter', filter, '--json'], t.env),
        ]);
        expectRefused(peek, 2, what, { label: filter });
        expectRefused(subscribe, 2, what, { json: true, label: filter });
      }),
    );
    expect(threadSnapshot(thread)).toEqual(before);
    const demo = openThread(thread, { home: t.home });
    try {
      expect(demo.consumer('sql')).toBeNull();
    } finally {
      demo.close();
    }
  });

  it('reads quotes inside a string literal as text, never as SQL', async () => {
    const result = await runTool('thread', ['peek', '--thread', thread, '--filter', "type = 'x'' OR ''1''=''1' OR source = 'self'' --'"], t.env);
    expect(result).toEqual({ code: 0, stdout: '', stderr: '' });
  });
});

describe('hostile ids', () => {
  const agentIds = ['../../etc', 'a/b', '..', 'Admin', 'x\ny', `${'a'.repeat(64)}`];
  const consumers = ['../../etc', 'a/b', 'x\ny', '-rf'];
  const cases: [string, string[], RegExp][] = [
    ...agentIds.flatMap((id): [string, string[], RegExp][] => [
      [`agent init ${JSON.stringify(id)}`, ['agent', 'init', id], /invalid agent id/],
      [`agent send ${JSON.stringify(id)}`, ['agent', 'send', id, '--text', 'hi'], /invalid agent id/],
      [`notifier timer add --id ${JSON.stringify(id)}`, ['notifier', 'timer', 'add', '--id', id, '--every', '1m', '--command', 'true'], /invalid timer id/],
    ]),
    ['agent status ../../etc', ['agent', 'status', '../../etc'], /invalid agent id/],
    ['xgw chat --agent ../../etc', ['xgw', 'chat', '--agent', '../../etc'], /"\.\.\/\.\.\/etc" is not an agent id/],
    ['agent init -rf', ['agent', 'init', '-rf'], /unknown option '-rf'/],
    ['agent init -- -rf', ['agent', 'init', '--', '-rf'], /invalid agent id "-rf"/],
    ...consumers.flatMap((consumer): [string, string[], RegExp][] => [
      [`thread pop --consumer=${JSON.stringify(consumer)}`, ['thread', 'pop', '--thread', '$THREAD', `--consumer=${consumer}`], /invalid consumer name/],
      [`thread subscribe --consumer=${JSON.stringify(consumer)}`, ['thread', 'subscribe', '--thread', '$THREAD', `--consumer=${consumer}`, '--handler', 'true'], /invalid consumer name/],
    ]),
  ];

  it('are refused by every command that would make a file of them, and nothing appears outside THECLAW_HOME', async () => {
    const before = threadSnapshot(thread);
    const results = await Promise.all(
      cases.map(([, [tool, ...args]]) =>
        runTool(
          tool as 'agent',
          args.map((arg) => (arg === '$THREAD' ? thread : arg)),
          t.env,
        ),
      ),
    );
    results.forEach((result, index) => {
      expectRefused(result, 2, cases[index]![2], { label: cases[index]![0] });
    });
    for (const id of agentIds) {
      const path = resolve(t.home, 'agents', id);
      if (path !== resolve(t.home) && !path.startsWith(resolve(t.home) + sep)) expect(existsSync(path), path).toBe(false);
    }
    expect(readdirSync(join(t.home, 'agents'))).toEqual(['helper']);
    expect(timerIds()).toEqual([]);
    expect(threadSnapshot(thread)).toEqual(before);
  });

  it('with NUL in them (which no argument can carry) are refused by the libraries', () => {
    for (const id of ['a\0b', '\0', 'helper\0/../../etc']) {
      expectClawError(() => agentDir(t.home, id), 'usage');
      expectClawError(() => requireAgentId(id), 'usage');
      const store = new TimerStore(t.home);
      try {
        expectClawError(() => store.add(id, { kind: 'every', ms: 60_000 }, 'true'), 'usage');
      } finally {
        store.close();
      }
      const demo = openThread(thread, { home: t.home });
      try {
        expectClawError(() => demo.pop(id), 'usage');
      } finally {
        demo.close();
      }
    }
  });
});

describe('config files with wrong types', () => {
  interface ConfigCase {
    file: string;
    text: string;
    /** The command that reads it; with --json added for the second run. */
    args: string[];
    what: RegExp;
    daemon?: 'notifier' | 'xgw';
    /** Run it once more with --json (one case per tool: the form does not depend on the file). */
    json?: true;
  }
  const cases: ConfigCase[] = [
    { file: 'pai/config.yaml', text: 'retry: { max_attempts: "four" }\n', args: ['pai', 'chat', 'hi'], what: /pai\/config\.yaml: retry\.max_attempts: must be a number, got "four"/, json: true },
    {
      file: 'pai/config.yaml',
      text: 'providers: [openai]\nmax_turns: 1.5\n',
      args: ['pai', 'chat', 'hi'],
      what: /pai\/config\.yaml: providers: must be a mapping, got a list; max_turns: must be a whole number, got 1\.5/,
    },
    { file: 'pai/config.yaml', text: 'default: [oops\n', args: ['pai', 'model', 'list'], what: /cannot read \S+pai\/config\.yaml: .*line 2, column 1/ },
    {
      file: 'notifier/config.yaml',
      text: 'sweep_interval_seconds: "four"\n',
      args: ['notifier', 'start'],
      what: /notifier\/config\.yaml: sweep_interval_seconds: must be a number, got "four"/,
      daemon: 'notifier',
      json: true,
    },
    {
      file: 'notifier/config.yaml',
      text: 'backoff: [1, 2]\nconcurrency: 4\n',
      args: ['notifier', 'start'],
      what: /notifier\/config\.yaml: backoff: must be a mapping, got a list; unknown key concurrency/,
      daemon: 'notifier',
    },
    { file: 'notifier/config.yaml', text: 'handler_timeout_seconds: -1\n', args: ['notifier', 'start'], what: /handler_timeout_seconds: must be more than 0, got -1/, daemon: 'notifier' },
    { file: 'notifier/config.yaml', text: 'backoff: {\n', args: ['notifier', 'start'], what: /cannot read \S+notifier\/config\.yaml: .*line 2/, daemon: 'notifier' },
    {
      file: 'xgw/config.yaml',
      text: 'channels:\n  - { id: webchat:main, type: webchat, port: -1 }\n',
      args: ['xgw', 'start'],
      what: /xgw\/config\.yaml: channels\.0\.port: must be at least 0, got -1/,
      daemon: 'xgw',
      json: true,
    },
    { file: 'xgw/config.yaml', text: 'channels: { id: webchat:main, type: webchat }\n', args: ['xgw', 'start'], what: /xgw\/config\.yaml: channels: must be a list, got a mapping/, daemon: 'xgw' },
    {
      file: 'xgw/config.yaml',
      text: 'channels:\n  - { id: webchat:main, type: webchat, port: "18790x" }\n',
      args: ['xgw', 'start'],
      what: /channels\.0\.port: must be a number, got "18790x"/,
      daemon: 'xgw',
    },
    {
      file: 'xgw/config.yaml',
      text: 'channels:\n  - { id: "webchat:../x", type: webchat }\n  - { id: telegram:main, type: fax }\n',
      args: ['xgw', 'start'],
      what: /channels\.0\.id: must be <type>:<instance>.*channels\.1\.type: must be one of "webchat", "telegram", "discord", "terminal"/,
      daemon: 'xgw',
    },
    {
      file: 'xgw/config.yaml',
      text: 'routes:\n  - { agent: "../../etc" }\n  - { agent: "a\\0b" }\n',
      args: ['xgw', 'start'],
      what: /routes\.0\.agent: must be an agent id.*routes\.1\.agent: must be an agent id/,
      daemon: 'xgw',
    },
    { file: 'xgw/config.yaml', text: 'channels: [\n', args: ['xgw', 'start'], what: /cannot read \S+xgw\/config\.yaml: .*line 2/, daemon: 'xgw' },
    {
      file: 'agents/helper/config.yaml',
      text: 'agent_id: helper\nconcurrency: "four"\n',
      args: ['agent', 'start', 'helper'],
      what: /agents\/helper\/config\.yaml: concurrency: must be a number, got "four"/,
      json: true,
    },
    {
      file: 'agents/helper/config.yaml',
      text: 'agent_id: helper\nrouting: { default: sideways }\nretry: 3\n',
      args: ['agent', 'run', 'helper'],
      what: /routing\.default: must be one of "per-peer", "per-channel", "per-agent", got "sideways"; retry: must be a mapping, got 3/,
    },
    { file: 'agents/helper/config.yaml', text: 'agent_id: helper\n\tconcurrency: 4\n', args: ['agent', 'run', 'helper'], what: /cannot read \S+agents\/helper\/config\.yaml: / },
  ];

  const homes: TestHome[] = [];
  afterAll(() => {
    for (const home of homes) home.cleanup();
  });

  it('each get `Error: <file>: <key>: <problem> - <fix>` and exit 1, and no daemon starts half-way', async () => {
    await Promise.all(
      cases.map(async (c) => {
        const home = createTestHome();
        homes.push(home);
        await initAgent(home.home, 'helper');
        mkdirSync(join(home.home, c.file, '..'), { recursive: true });
        writeFileSync(join(home.home, c.file), c.text);
        const [tool, ...args] = c.args as ['pai', ...string[]];
        const said = expectRefused(await runTool(tool, args, home.env), 1, c.what, { label: c.text });
        expect(said, c.file).toContain(join(home.home, c.file));
        if (c.json) expectRefused(await runTool(tool, [...args, '--json'], home.env), 1, c.what, { json: true, label: c.text });
        if (c.daemon) {
          expect(daemonHolder(home.home, c.daemon), `${c.daemon} runs with ${c.text}`).toBeNull();
          expect(existsSync(socketPath(home.home, c.daemon)), `${c.daemon} listens with ${c.text}`).toBe(false);
        }
      }),
    );
  });
});
