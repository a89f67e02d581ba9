/**
 * `npm run bench`: the speed figures the issues ask for, as medians on this machine. Each figure
 * names its target; the script exits 1 when a target is missed, so a regression is visible.
 * Everything runs in a temp THECLAW_HOME against the built CLIs in dist/.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import WebSocket from 'ws';
import { randomBytes } from 'node:crypto';
import { webchatProtocols } from '../src/xgw/channels/webchat-http.js';
import { initAgent, startAgent } from '../src/agent/lifecycle.js';
import { routeMessage } from '../src/agent/router.js';
import { SANDBOX_LIMIT_DEFAULTS } from '../src/agent/types.js';
import { agentSandbox, messageScope, turnWorkdir } from '../src/agent/policy/sandbox-profile.js';
import { decide, MAX_READ_LINE_BYTES } from '../src/agent/policy/tool-policy.js';
import { killMarked, newMark, TURN_MARK } from '../src/core/turn-processes.js';
import { bashExec, type BashExecOptions } from '../src/pai/bash-exec.js';
import { findBwrap } from '../src/pai/sandbox.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { joinCommand } from '../src/core/command.js';
import { askDaemon } from '../src/core/daemon.js';
import { socketPath } from '../src/core/home.js';
import { subscribe } from '../src/core/ipc.js';
import { lastUserText, startSystem } from '../src/e2e/support.js';
import { textUpdate } from '../src/testing/fake-telegram.js';
import type { InboundOutcome, MailboxEntry } from '../src/xgw/protocol.js';
import { cliPath, packageRoot } from '../src/core/package.js';
import { createSqliteStore, initThread, migrateThreads, openStoreAt, type ThreadStore } from '../src/thread/index.js';
import { postgresUnavailable, startPostgres } from '../src/testing/postgres.js';
import { estimateTokens, startFakeOpenAI } from '../src/testing/fake-llm.js';
import { startFakeTelegram } from '../src/testing/fake-telegram.js';
import { startFixtureSite } from '../src/testing/fixture-site.js';
import { startFormSite } from '../src/testing/form-site.js';
import { askAgentBrowser, askBrowserService, BROWSER_SOCKET_ENV, browserProfileDir, serveBrowserProxy } from '../src/browser/index.js';
import { browserMemoryBytes } from '../src/browser/memory.js';
import { daemonHolder, stopDaemonProcess } from '../src/core/daemon.js';
import { benchHosts, onPostgres, SQLITE, stopPostgres, type StoreUnderTest } from './postgres.js';
import { cpuSeconds, daemonPid, figures, leaveCgroup, median, now, percentile, processTree, record, rssMb, totalRssMb, treeCpuSeconds, waitUntil } from './measure.js';

const home = mkdtempSync(join(tmpdir(), 'theclaw-bench-'));
const env = { ...process.env, THECLAW_HOME: home };

function wall(argv: string[], runs: number): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = now();
    const result = spawnSync(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'] });
    times.push(now() - started);
    if (result.status !== 0) throw new Error(`${argv.join(' ')} failed: ${result.stderr}`);
  }
  return median(times);
}

function benchThreadPush(): void {
  const thread = initThread(join(home, 'push'), { home });
  const batch = Array.from({ length: 10_000 }, (_, i) => ({ source: 'self', type: 'message', content: `{"text":"event ${i}"}` }));
  const batchRates: number[] = [];
  for (let run = 0; run < 7; run++) {
    const started = now();
    thread.pushBatch(batch);
    batchRates.push(batch.length / ((now() - started) / 1000));
  }
  record('thread: in-process batched push (10,000 per batch)', median(batchRates), 'events/s', { atLeast: 100_000 });

  const singleRates: number[] = [];
  for (let run = 0; run < 7; run++) {
    const started = now();
    for (let i = 0; i < 2_000; i++) thread.push({ source: 'self', type: 'message', content: `{"text":"single ${i}"}` });
    singleRates.push(2_000 / ((now() - started) / 1000));
  }
  record('thread: in-process single push', median(singleRates), 'events/s', { atLeast: 10_000 });
  thread.close();
}

function benchPeek(): void {
  const thread = initThread(join(home, 'peek'), { home });
  const batch = Array.from({ length: 10_000 }, (_, i) => ({
    source: 'external:webchat:main:dm:p:p',
    type: i % 3 ? 'record' : 'message',
    subtype: i % 3 ? 'usage' : null,
    content: `{"text":"event ${i}"}`,
  }));
  for (let i = 0; i < 10; i++) thread.pushBatch(batch);
  const times: number[] = [];
  for (let run = 0; run < 50; run++) {
    const started = now();
    const events = thread.peek({ last: 50 });
    times.push(now() - started);
    if (events.length !== 50) throw new Error('peek returned too few events');
  }
  record('thread: peek --last 50 on a 100,000-event thread (in-process)', median(times), 'ms', { atMost: 10 });
  const filtered: number[] = [];
  for (let run = 0; run < 50; run++) {
    const started = now();
    thread.peek({ last: 50, filter: "type = 'message'" });
    filtered.push(now() - started);
  }
  record('thread: peek --last 50 --filter "type = \'message\'" on 100,000 events', median(filtered), 'ms', { atMost: 10 });
  thread.close();
}

/**
 * The thread store through its interface, SQLite beside PostgreSQL (a throwaway cluster, as the
 * tests start one; skipped where none can be had): appends one by one and in batches, a peek of
 * the newest 50, and `thread migrate`'s round trip of a home with 1,000 conversations.
 */
async function benchStores(): Promise<void> {
  const unavailable = postgresUnavailable();
  if (unavailable) {
    console.error(`skip store: ${unavailable}`);
    return;
  }
  const cluster = await startPostgres();
  try {
    const stores: [string, ThreadStore][] = [
      ['SQLite', createSqliteStore(join(home, 'store-bench'))],
      ['PostgreSQL', await openStoreAt(await cluster.createDatabase('bench'))],
    ];
    for (const [label, store] of stores) {
      const thread = await store.init('bench/thread');
      const started = now();
      for (let i = 0; i < 1_000; i++) await thread.append([{ source: 'self', type: 'message', content: `{"text":"single ${i}"}`, idempotency_key: `k${i}` }]);
      record(`store (${label}): single append with a key, in-process`, 1_000 / ((now() - started) / 1000), 'events/s', { atLeast: 500 });
      const batch = Array.from({ length: 1_000 }, (_, i) => ({ source: 'self', type: i % 3 ? 'record' : 'message', content: `{"text":"event ${i}"}` }));
      const batched = now();
      for (let run = 0; run < 10; run++) await thread.append(batch);
      record(`store (${label}): batched append (1,000 per batch), in-process`, 10_000 / ((now() - batched) / 1000), 'events/s', { atLeast: 10_000 });
      const times: number[] = [];
      for (let run = 0; run < 50; run++) {
        const peeked = now();
        await thread.peek({ last: 50, filter: "type = 'message'" });
        times.push(now() - peeked);
      }
      record(`store (${label}): peek --last 50 --filter "type = 'message'" on 11,000 events`, median(times), 'ms', { atMost: 20 });
      await thread.close();
    }
    const sqlite = createSqliteStore(join(home, 'store-conversations'));
    for (let n = 0; n < 1_000; n++) {
      const thread = await sqlite.init(`agents/a${n % 10}/threads/peers/p${n}`);
      await thread.append(Array.from({ length: 10 }, (_, i) => ({ source: i % 2 ? 'self' : `external:webchat:main:dm:${n}:${n}`, type: 'message', content: `{"text":"turn ${i}"}` })));
      await thread.ack('outbound', 10);
      await thread.close();
    }
    const database = await openStoreAt(await cluster.createDatabase('migrate'));
    let started = now();
    const there = await migrateThreads(sqlite, database);
    record('thread migrate: 1,000 conversations (10,000 events), SQLite home -> PostgreSQL, copied and verified', (now() - started) / 1000, 's', { atMost: 60 });
    started = now();
    const back = await migrateThreads(database, createSqliteStore(join(home, 'store-back')));
    record('thread migrate: the same, PostgreSQL -> a new SQLite home, copied and verified', (now() - started) / 1000, 's', { atMost: 60 });
    if (there.from.sha256 !== back.to.sha256) throw new Error('the round trip changed the threads');
    await database.close();
    for (const [, store] of stores) await store.close();
  } finally {
    await cluster.stop();
  }
}

function benchCli(): void {
  const node = wall([process.execPath, '-e', ''], 15);
  record("node: bare start-up (node -e '')", node, 'ms', { atMost: 120 });
  record('thread --help', wall([process.execPath, cliPath('thread'), '--help'], 15), 'ms', { atMost: 120 });
  const path = join(home, 'cli');
  initThread(path, { home }).close();
  const push = wall([process.execPath, cliPath('thread'), 'push', '--thread', path, '--source', 'self', '--type', 'message', '--content', '{"text":"hi"}'], 25);
  record('thread push (CLI, wall)', push, 'ms', { atMost: 120 });
}

async function benchDispatch(): Promise<void> {
  const path = join(home, 'dispatch');
  const started = join(home, 'started.txt');
  const seen = join(home, 'seen.txt');
  const thread = initThread(path, { home });
  const handler = joinCommand([process.execPath, join(packageRoot(), 'src/testing/fixtures/handler.mjs'), seen, '--started-file', started]);
  thread.subscribe({ consumer: 'bench', handler });
  const start = spawnSync(process.execPath, [cliPath('notifier'), 'start'], { env });
  if (start.status !== 0) throw new Error(`notifier start failed: ${start.stderr}`);
  try {
    const latencies: number[] = [];
    for (let i = 1; i <= 25; i++) {
      const pushedAt = now();
      thread.push({ source: 'self', type: 'message', content: `{"text":"dispatch ${i}"}` });
      await waitUntil(() => existsSync(started) && readFileSync(started, 'utf8').trim().split('\n').length >= i);
      const startedAt = Number(readFileSync(started, 'utf8').trim().split('\n')[i - 1]);
      latencies.push(startedAt - pushedAt);
      // Let the run finish and release its lease before the next push.
      await waitUntil(() => thread.consumer('bench')?.progress === i && thread.consumer('bench')?.lease === null);
    }
    record('notifier: push to handler-process-start (median)', median(latencies), 'ms', { atMost: 50 });
  } finally {
    spawnSync(process.execPath, [cliPath('notifier'), 'stop'], { env });
    thread.close();
  }
}

function runAsync(argv: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = now();
    const child = spawn(argv[0]!, argv.slice(1), { env: { ...env, ...extraEnv }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => (code === 0 ? resolve(now() - started) : reject(new Error(`${argv.join(' ')} failed: ${stderr}`))));
  });
}

async function benchPai(): Promise<void> {
  record('pai --help', wall([process.execPath, cliPath('pai'), '--help'], 10), 'ms', { atMost: 120 });
  record('pai model list', wall([process.execPath, cliPath('pai'), 'model', 'list'], 10), 'ms', { atMost: 150 });
  const mock = join(home, 'pai-mock');
  const times: number[] = [];
  for (let i = 0; i < 10; i++) times.push(await runAsync([process.execPath, cliPath('pai'), 'chat', 'hi'], { THECLAW_HOME: mock }));
  record('pai chat "hi" with the offline mock (wall)', median(times), 'ms', { atMost: 300 });

  wall([process.execPath, cliPath('cmds'), 'find', 'warm the PATH index'], 1);
  record('cmds find "list files" (warm PATH index)', wall([process.execPath, cliPath('cmds'), 'find', 'list files'], 10), 'ms', { atMost: 300 });

  const server = await startFakeOpenAI();
  const fakeHome = join(home, 'pai-fake');
  const configDir = join(fakeHome, 'pai');
  spawnSync('mkdir', ['-p', configDir]);
  writeFileSync(join(configDir, 'config.yaml'), `default: fake/m1\nproviders:\n  fake: { api: openai-completions, base_url: "${server.url}", models: [{ id: m1 }] }\n`);
  try {
    const walls: number[] = [];
    for (let i = 0; i < 10; i++) walls.push(await runAsync([process.execPath, cliPath('pai'), 'chat', 'hi'], { THECLAW_HOME: fakeHome }));
    record('pai chat "hi" against a zero-latency OpenAI-compatible server (wall)', median(walls), 'ms', { atMost: 400 });
    const request = server.requests.at(-1)!;
    record('pai chat "hi": request size incl. system prompt and tool schema', estimateTokens('x'.repeat(request.bytes)), 'tokens (bytes/4)', { atMost: 1500 });
  } finally {
    await server.close();
  }
}

async function benchXgw(): Promise<void> {
  const telegram = await startFakeTelegram();
  const xgwHome = join(home, 'xgw-home');
  spawnSync('mkdir', ['-p', join(xgwHome, 'xgw')]);
  writeFileSync(
    join(xgwHome, 'xgw', 'config.yaml'),
    `channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\n  - { id: telegram:main, type: telegram, token_env: BENCH_TG_TOKEN, api_root: "${telegram.apiRoot}" }\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { agent: admin }\n`,
  );
  const xgwEnv = { THECLAW_HOME: xgwHome, BENCH_TG_TOKEN: telegram.token };
  try {
    await runAsync([process.execPath, cliPath('xgw'), 'start'], xgwEnv);
    const pid = Number(/"pid":(\d+)/.exec(readFileSync(join(xgwHome, 'run', 'xgw.pid'), 'utf8'))![1]);
    await new Promise((resolve) => setTimeout(resolve, 2000)); // idle: polling Telegram, web chat listening
    record('xgw idle with web chat, Telegram (long polling) and terminal: RSS', rssMb(pid), 'MB', { atMost: 120 });
  } finally {
    await runAsync([process.execPath, cliPath('xgw'), 'stop'], xgwEnv).catch(() => {});
    await telegram.close();
  }
}

/**
 * The whole pipeline with a zero-latency model: a terminal message handed to xgw (`chat_message`
 * on its socket) → inbox → notifier → `agent run` → fake model (immediate text, no tool call) →
 * thread → notifier → `agent deliver` → xgw → the reply's mailbox entry on a `chat_attach`
 * stream. Nothing is subtracted. Then, in the same system, the request of a trivial first turn.
 */
async function benchPipelineLatency(): Promise<void> {
  const system = await startSystem({ logLevel: 'info' });
  const closed = new AbortController();
  try {
    const replies = new Map<string, number>();
    const attach = (peer: string) =>
      subscribe(
        socketPath(system.home, 'xgw'),
        { op: 'chat_attach', channel: 'terminal:local', peer },
        { onMessage: (entry) => (entry as MailboxEntry).role === 'agent' && replies.set((entry as MailboxEntry).text, now()) },
        closed.signal,
      );
    const ask = async (peer: string, id: string, text: string): Promise<number> => {
      const sentAt = now();
      const outcome = await askDaemon<InboundOutcome>(system.home, 'xgw', { op: 'chat_message', channel: 'terminal:local', peer, message_id: id, text });
      if (outcome.kind !== 'accepted') throw new Error(`xgw did not accept the message: ${JSON.stringify(outcome)}`);
      await waitUntil(() => replies.has(`echo: ${text}`), 15_000);
      return replies.get(`echo: ${text}`)! - sentAt;
    };
    await attach('bench');
    await ask('bench', 'warm-up', 'warm up'); // the thread is created, the page cache is warm
    const latencies: number[] = [];
    for (let i = 1; i <= 30; i++) latencies.push(await ask('bench', `m${i}`, `bench message ${i}`));
    record('pipeline: terminal message to reply delivered, zero-latency model (median of 30)', median(latencies), 'ms', { atMost: 300 });
    record('pipeline: terminal message to reply delivered, zero-latency model (p95 of 30)', percentile(latencies, 95), 'ms', { atMost: 600 });

    await attach('first-turn');
    await ask('first-turn', 'hi', 'hi');
    const first = system.llm.requests.find((request) => lastUserText(request) === 'hi' && request.body?.messages?.length === 2);
    if (!first) throw new Error('the first-turn request was not recorded');
    record('agent admin: first-turn request ("hi", IDENTITY.md, runtime facts, tool schema)', estimateTokens('x'.repeat(first.bytes)), 'tokens (bytes/4)', { atMost: 2500 });
  } finally {
    closed.abort();
    await system.stop();
  }
}

/**
 * A web chat message to its reply on the page, warm: the whole system as a user runs it, a
 * browser's WebSocket (token and peer id in the handshake), a zero-latency model. After warm-up messages,
 * 40 messages one after another; the CPU of every process of the system (daemons, their
 * children, reaped or alive) over those 40, per message.
 */
async function benchWebchatWarm(store: StoreUnderTest = SQLITE): Promise<void> {
  const system = await startSystem({ logLevel: 'info', env: store.env });
  let ws: WebSocket | undefined;
  try {
    const status = await system.xgwStatus();
    const url = new URL(status.channels.find((channel) => channel.id === 'webchat:main')!.url!);
    const base = `http://127.0.0.1:${url.port}`;
    ws = new WebSocket(`ws://127.0.0.1:${url.port}/ws`, webchatProtocols(url.searchParams.get('token')!, randomBytes(16).toString('hex')), { origin: base });
    const replies = new Map<string, number>();
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; message?: { role: string; reply_to?: string } };
      if (frame.type === 'message' && frame.message?.role === 'agent' && frame.message.reply_to) replies.set(frame.message.reply_to, now());
    });
    await new Promise<void>((resolve, reject) => {
      ws!.once('open', () => resolve());
      ws!.once('error', reject);
    });
    const ask = async (id: string): Promise<number> => {
      const sentAt = now();
      ws!.send(JSON.stringify({ type: 'message', id, text: `bench ${id}` }));
      await waitUntil(() => replies.has(id), 15_000);
      return replies.get(id)! - sentAt;
    };
    for (let i = 0; i < 5; i++) await ask(`warm-${i}`);
    const roots = [daemonPid(system.home, 'notifier'), daemonPid(system.home, 'xgw'), ...store.serverPids()];
    const cpuBefore = cpuSeconds(processTree(roots));
    const statementsBefore = await store.statements?.();
    const latencies: number[] = [];
    const count = 40;
    for (let i = 1; i <= count; i++) latencies.push(await ask(`m${i}`));
    // Deliveries acknowledge after the page has the reply: let the last one finish.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const cpu = (cpuSeconds(processTree(roots)) - cpuBefore) / count;
    if (store.statements) {
      // The sweeps' statements count too: they come with time (every 0.5 s here), as the CPU's do.
      record(`web chat, warm: statements the database runs per message${store.label}`, ((await store.statements()) - statementsBefore!) / count, 'statements', { atMost: 60 });
    }
    record(`web chat, warm: message to reply on the page, zero-latency model, queue mode followup (p50 of 40)${store.label}`, median(latencies), 'ms', { atMost: 150 });
    record(`web chat, warm: message to reply on the page, zero-latency model, queue mode followup (p95 of 40)${store.label}`, percentile(latencies, 95), 'ms', { atMost: 300 });
    record(`web chat, warm: CPU of every process of the system per message${store.label}`, cpu, 'CPU-s', { atMost: 0.15 });
    if (store !== SQLITE) return; // queue modes do not depend on the store
    await benchCollect(
      ask,
      (id, text) => ws!.send(JSON.stringify({ type: 'message', id, text })),
      replies,
      // The turns' calls, which offer the model its tool: a compaction's summary and memory flush offer none.
      () => system.llm.requests.filter((request) => request.path === '/v1/chat/completions' && request.body?.tools?.length > 0).length,
    );
  } finally {
    ws?.close();
    await system.stop();
  }
}

/**
 * The same web chat conversation in queue mode collect (the default of a person's direct chat;
 * the system above runs followup, as the tests do): a message's reply waits out the 1.5 s
 * debounce, so it is in the figure; three messages sent 0.4 s apart are one turn, one model call.
 */
async function benchCollect(ask: (id: string) => Promise<number>, send: (id: string, text: string) => void, replies: Map<string, number>, modelCalls: () => number): Promise<void> {
  send('queue', '/queue collect');
  await waitUntil(() => replies.has('queue'), 15_000);
  const latencies: number[] = [];
  for (let i = 1; i <= 10; i++) latencies.push(await ask(`c${i}`));
  record('web chat, warm: message to reply on the page, queue mode collect, its 1.5 s debounce included (p50 of 10)', median(latencies), 'ms', { atMost: 1_650 });
  const calls = modelCalls();
  for (const [index, text] of ['hi', 'can you', 'check my calendar'].entries()) {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, 400)); // a person typing
    send(`three-${index}`, text);
  }
  const lastSent = now();
  await waitUntil(() => replies.has('three-2'), 15_000);
  record('web chat, queue mode collect: three messages 0.4 s apart, time from the last to the reply (debounce 1.5 s)', replies.get('three-2')! - lastSent, 'ms', { atMost: 1_650 });
  record("web chat, queue mode collect: three messages within the debounce, the turns' model calls", modelCalls() - calls, 'calls', { atMost: 1 });
}

/**
 * The API's chat completion, warm, measured as the web chat's is (benchWebchatWarm): a client's
 * `POST /v1/chat/completions` (plain fetch, non-streaming) to its response, through the real
 * pipeline (inbox, turn, reply through xgw), a zero-latency model; 40 after 5 warm-up requests.
 */
async function benchApiWarm(): Promise<void> {
  const system = await startSystem({ logLevel: 'info', extraChannels: ['{ id: "api:main", type: api, port: 0 }'] });
  try {
    const status = await system.xgwStatus();
    const url = status.channels.find((channel) => channel.id === 'api:main')!.url!;
    const token = (await system.must('xgw', ['token', 'add', 'bench'])).stdout.split('\n')[0]!;
    const ask = async (i: string): Promise<number> => {
      const sentAt = now();
      const response = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'admin', messages: [{ role: 'user', content: `bench ${i}` }] }),
        signal: AbortSignal.timeout(15_000),
      });
      if (response.status !== 200) throw new Error(`the API answered ${response.status}: ${await response.text()}`);
      await response.json();
      return now() - sentAt;
    };
    for (let i = 0; i < 5; i++) await ask(`warm-${i}`);
    const latencies: number[] = [];
    for (let i = 1; i <= 40; i++) latencies.push(await ask(`m${i}`));
    record('API, warm: chat completion request to response, zero-latency model (p50 of 40)', median(latencies), 'ms', { atMost: 150 });
    record('API, warm: chat completion request to response, zero-latency model (p95 of 40)', percentile(latencies, 95), 'ms', { atMost: 300 });
  } finally {
    await system.stop();
  }
}

/**
 * 100 Telegram peers, each routed to an agent of its own, send one message at once (zero-latency
 * model): the peak resident memory of every process of the system while they are answered (RSS
 * sampled every 50 ms, shared pages counted in each process), and when the last reply was sent.
 */
async function benchHundredAgents(store: StoreUnderTest = SQLITE): Promise<void> {
  const system = await startSystem({ logLevel: 'info', env: store.env });
  try {
    const agents = Array.from({ length: 100 }, (_, i) => `a${i + 1}`);
    for (const id of agents) {
      await initAgent(system.home, id, {}, system.env);
      await startAgent(system.home, id, system.env);
    }
    const routes = agents.map((id, i) => `  - { channel: "telegram:main", peer: "${7000 + i}", agent: ${id} }`).join('\n');
    const config = readFileSync(join(system.home, 'xgw', 'config.yaml'), 'utf8').replace('routes:\n', `routes:\n${routes}\n`);
    writeFileSync(join(system.home, 'xgw', 'config.yaml'), config);
    await system.must('xgw', ['stop']);
    await system.must('xgw', ['start']);
    const roots = [daemonPid(system.home, 'notifier'), daemonPid(system.home, 'xgw'), ...store.serverPids()];
    let peak = totalRssMb(processTree(roots));
    const sampler = setInterval(() => (peak = Math.max(peak, totalRssMb(processTree(roots)))), 50);
    const started = now();
    try {
      for (let i = 0; i < agents.length; i++) system.telegram.queueUpdate(textUpdate({ from: 7000 + i, text: `hello agent ${i + 1}` }));
      await waitUntil(() => system.telegram.sent.length >= 100, 180_000);
    } finally {
      clearInterval(sampler);
    }
    const seconds = (now() - started) / 1000;
    const chats = new Set(system.telegram.sent.map((sent) => String(sent.chat_id)));
    if (chats.size !== 100) throw new Error(`100 replies went to ${chats.size} chats`);
    const answered = new Set(system.llm.requests.map((request) => lastUserText(request)));
    if (agents.some((_, i) => !answered.has(`hello agent ${i + 1}`))) throw new Error('a reply was sent without its agent asking the model');
    record(`100 messages at once to 100 agents: peak RSS of every process of the system${store.label}`, peak, 'MB', { atMost: 1000 });
    record(`100 messages at once to 100 agents: last reply sent${store.label}`, seconds, 's', { atMost: 10 });
  } finally {
    await system.stop();
  }
}

/**
 * 1,000 Telegram peers write to admin: 1,000 conversation threads, each answered and delivered.
 * Then, idle, notifier's resident memory and open file descriptors.
 */
async function benchThousandConversations(): Promise<void> {
  const system = await startSystem({ logLevel: 'info' });
  try {
    for (let i = 0; i < 1000; i++) system.telegram.queueUpdate(textUpdate({ from: 100_000 + i, text: `conversation ${i}` }));
    await waitUntil(() => system.telegram.sent.length >= 1000, 900_000);
    await new Promise((resolve) => setTimeout(resolve, 3000)); // two sweeps, idle
    const pid = daemonPid(system.home, 'notifier');
    record('notifier after 1,000 conversations: RSS', rssMb(pid), 'MB', { atMost: 120 });
    record('notifier after 1,000 conversations: open file descriptors', readdirSync(`/proc/${pid}/fd`).length, 'fds', { atMost: 100 });
  } finally {
    await system.stop();
  }
}

/**
 * 20 Telegram peers each send one message at once; the model takes 1 s per call. Measured from
 * queueing the updates at the fake Bot API to the 20th sendMessage it recorded.
 */
async function benchPipelineBurst(): Promise<void> {
  const system = await startSystem({ logLevel: 'info', llm: { defaultDelayMs: 1000 } });
  try {
    const started = now();
    for (let peer = 1; peer <= 20; peer++) system.telegram.queueUpdate(textUpdate({ from: 5000 + peer, text: `burst ${peer}` }));
    await waitUntil(() => system.telegram.sent.length >= 20, 60_000);
    const seconds = (now() - started) / 1000;
    const peers = new Set(system.telegram.sent.map((sent) => String(sent.chat_id)));
    if (peers.size !== 20) throw new Error(`20 replies went to ${peers.size} peers`);
    record('pipeline: 20 peers at once, model 1 s per call (agent concurrency 4): all replies delivered', seconds, 's', { atMost: 7 });
  } finally {
    await system.stop();
  }
}

/**
 * `theclaw up` on a fresh home (creating the four system agents, starting notifier and xgw, and
 * waiting for the channels' first start), then the idle footprint of the two daemons, then
 * `theclaw status` against the running system. No provider key: the mock is the model.
 */
async function benchTheclaw(): Promise<void> {
  const ups: number[] = [];
  const rss: number[] = [];
  const statuses: number[] = [];
  for (let run = 0; run < 5; run++) {
    const upHome = join(home, `up-${run}`);
    mkdirSync(join(upHome, 'xgw'), { recursive: true });
    writeFileSync(
      join(upHome, 'xgw', 'config.yaml'),
      'channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\n  - { id: terminal:local, type: terminal, access: open }\nroutes:\n  - { agent: admin }\n',
    );
    const upEnv: NodeJS.ProcessEnv = { ...process.env, THECLAW_HOME: upHome, OPENAI_API_KEY: '', ANTHROPIC_API_KEY: '' };
    try {
      const started = now();
      const result = spawnSync(process.execPath, [cliPath('theclaw'), 'up', '--json'], { env: upEnv, encoding: 'utf8' });
      ups.push(now() - started);
      if (result.status !== 0) throw new Error(`theclaw up failed: ${result.stderr}`);
      const up = JSON.parse(result.stdout) as { notifier: { pid: number }; xgw: { pid: number; channels: { id: string; state: string }[] } };
      const notRunning = up.xgw.channels.filter((channel) => channel.state !== 'running');
      if (notRunning.length > 0) throw new Error(`theclaw up: channels not running: ${notRunning.map((c) => c.id).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 2000)); // idle
      rss.push(rssMb(up.notifier.pid) + rssMb(up.xgw.pid));
      for (let i = 0; i < 3; i++) {
        const before = now();
        const status = spawnSync(process.execPath, [cliPath('theclaw'), 'status'], { env: upEnv, stdio: 'ignore' });
        statuses.push(now() - before);
        if (status.status !== 0) throw new Error('theclaw status failed');
      }
    } finally {
      spawnSync(process.execPath, [cliPath('theclaw'), 'down'], { env: upEnv, stdio: 'ignore' });
    }
  }
  record('theclaw up on a fresh home, to ready (4 agents created, notifier and xgw answering, channels started)', median(ups), 'ms', { atMost: 3000 });
  record('idle notifier + xgw (web chat, terminal): RSS together', median(rss), 'MB', { atMost: 200 });
  record('theclaw status against the running system, wall', median(statuses), 'ms', { atMost: 300 });
}

/**
 * What the sandbox adds to each bash_exec call: `true` run 50 times as an agent runs it (in its
 * workdir, within a turn), with the agent's `sandbox` profile and with none, medians compared.
 */
async function benchSandbox(): Promise<void> {
  if (!findBwrap(env)) {
    console.error('skip sandbox: bubblewrap is not installed (apt-get install bubblewrap)');
    return;
  }
  const dir = await initAgent(home, 'sandboxed');
  // A peer's direct chat: the narrowest sandbox, with the most binds.
  const route = routeMessage(dir, 'per-peer', 'external:telegram:main:dm:42:42');
  const scope = messageScope(dir, route, false);
  const sandbox = agentSandbox(home, dir, { profile: 'sandbox', network: true, limits: SANDBOX_LIMIT_DEFAULTS }, env, scope);
  const turnMark = newMark(TURN_MARK);
  const median50 = async (options: BashExecOptions): Promise<number> => {
    const times: number[] = [];
    for (let run = 0; run < 50; run++) {
      const started = now();
      const result = await bashExec({ command: 'true' }, { cwd: turnWorkdir(dir, scope), env, turnMark, ...options });
      times.push(now() - started);
      if (result.exit_code !== 0) throw new Error(`bash_exec true failed: ${result.stderr}`);
    }
    return median(times);
  };
  try {
    const plain = await median50({});
    const sandboxed = await median50({ sandbox });
    console.error(`     bash_exec true: ${plain.toFixed(1)} ms without a sandbox, ${sandboxed.toFixed(1)} ms in it`);
    record('bash_exec: latency the sandbox (bubblewrap) adds per call, median of 50', sandboxed - plain, 'ms', { atMost: 20 });
  } finally {
    await killMarked(turnMark);
  }
}

/**
 * How long the tool policy holds a bash_exec call to read its line under a rule of patterns: the
 * slowest of four shapes at the reading limit (one long word, a heredoc, a list of 4000 commands,
 * the 100 command substitutions a line may have, and more words; the parser's time grows with the
 * square of the length), and a 160 KB line, which took 11-14 s to read before the limit (14 s of
 * CPU here) and is now refused unread.
 */
function benchPolicy(): void {
  const rule = { allow: ['echo', 'cat'], otherwise: 'ask' as const };
  const fill = (unit: string, head = '', tail = '') => head + unit.repeat(Math.floor((MAX_READ_LINE_BYTES - head.length - tail.length) / unit.length)) + tail;
  const timed = (line: string) => {
    const started = now();
    decide(rule, line);
    return now() - started;
  };
  timed('echo $(cat x); echo a'); // loads the parser
  const slowest = Math.max(...[fill('a', 'echo '), fill('line of text\n', "cat <<'EOF'\n", 'EOF\n'), fill('a;'), fill(' a', 'echo $(a); '.repeat(100))].map(timed));
  record(`policy: deciding a command line at the ${MAX_READ_LINE_BYTES / 1024} KB reading limit, slowest of 4 shapes`, slowest, 'ms', { atMost: 1000 });
  const long = `echo ${'a'.repeat(160 * 1024)}`;
  record('policy: deciding a 160 KB command line (refused unread), median of 3', median([timed(long), timed(long), timed(long)]), 'ms', { atMost: 10 });
}

/** CPU seconds this process's children have used once reaped (the CLIs it ran). */
function reapedCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100; // cutime, cstime (USER_HZ)
}

/**
 * `web fetch` of a 200 KB article from a loopback site: the whole command, start-up included,
 * never from the cache (--fresh). Three ways: with no service running (the Node CLI loads the
 * reader and reads the page itself: the owner's terminal with the system down); in a turn, as a
 * turn runs it (turnCommand: `bash -c` in the agent's default sandbox, with the sandbox's
 * variables only), the CLI's thin client through the run's proxy (served here by this process,
 * as an agent run serves it) to the warm browser service; and from the owner's terminal, the Node
 * CLI's thin client of the home's service, in this shell's environment as it is. The warm ways
 * after a few fetches that let the service load the reader and warm up. CPU: this process's and
 * every process's started below it (treeCpuSeconds: the sandbox's, the service's, the proxy's
 * and bash_exec's share, as an agent run spends them; the fixture site's and the timing too);
 * where that cannot be read, the command's reaped processes (not a sandbox's) and, warm, the
 * service's and this process's.
 */
async function benchWebFetch(): Promise<void> {
  treeCpuSeconds(); // from now on, and for the service started below
  const site = await startFixtureSite();
  let proxy: Awaited<ReturnType<typeof serveBrowserProxy>> | undefined;
  try {
    mkdirSync(join(home, 'web'), { recursive: true });
    writeFileSync(join(home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
    const args = ['fetch', site.url('/article-200k'), '--fresh'];
    const node = [process.execPath, cliPath('web'), ...args];
    const own = () => (({ user, system }) => (user + system) / 1e6)(process.cpuUsage());
    const fetches = async (fetch: () => Promise<number>, count: number, service?: number) => {
      const cpu = () => treeCpuSeconds() ?? reapedCpuSeconds() + (service ? cpuSeconds([service]) + own() : 0);
      const before = cpu();
      const times: number[] = [];
      for (let i = 0; i < count; i++) times.push(await fetch());
      return { times, cpu: (cpu() - before) / count };
    };
    await runAsync(node); // warms the file system cache
    const alone = await fetches(() => runAsync(node), 15);
    record('web fetch, no service running: a 200 KB article from a loopback site (CLI wall, p50)', median(alone.times), 'ms', { atMost: 1000 });
    record('web fetch, no service running: CPU per fetch', alone.cpu, 'CPU-s', { atMost: 1 });
    await runAsync([process.execPath, cliPath('browser'), 'start']);
    const service = daemonHolder(home, 'browser')!.pid;
    const turn = await turnCommand('reader');
    proxy = await serveBrowserProxy(home, turn.agent, env);
    const inTurn = (command: string) => turn.run(command, { [BROWSER_SOCKET_ENV]: proxy!.socket });
    const command = joinCommand(['web', ...args]);
    await fetches(() => inTurn(command), 5, service); // the service loads the reader; its JIT warms
    const warm = await fetches(() => inTurn(command), 20, service);
    record("web fetch in a turn: in the agent's sandbox, the CLI's thin client through the run's proxy to the warm service, a 200 KB article (wall, p50)", median(warm.times), 'ms', { atMost: 150 });
    record('web fetch in a turn: the same (wall, p95)', percentile(warm.times, 95), 'ms', { atMost: 300 });
    record("web fetch in a turn: CPU per fetch (the sandbox's processes, the run's and the service's)", warm.cpu, 'CPU-s', { atMost: 0.15 });
    // What the turn's figure holds besides the fetch: the sandbox and bash alone, and Node's start in it.
    const sandboxOnly = await fetches(() => inTurn('true'), 20, service);
    const nodeOnly = await fetches(() => inTurn(joinCommand([process.execPath, '-e', '0'])), 20, service);
    console.error(
      `     in the sandbox: true ${median(sandboxOnly.times).toFixed(0)} ms (${(sandboxOnly.cpu * 1000).toFixed(0)} ms CPU), node -e 0 ${median(nodeOnly.times).toFixed(0)} ms (${(nodeOnly.cpu * 1000).toFixed(0)} ms CPU)`,
    );
    // The owner's terminal: Node starts (~0.1 s of CPU before any work) for its thin client. This
    // shell's environment as it is: where NODE_EXTRA_CA_CERTS names the system's CA bundle (Debian's
    // is ~140 certificates), Node parses it at every start, ~40 ms more (the lead's quiet run,
    // 2026-11-27: `node -e 0` 118 ms with it, 75 without); a turn's sandbox does not pass it on.
    const terminal = await fetches(() => runAsync(node), 20, service);
    record("web fetch from the owner's terminal: the Node CLI's thin client of the warm service (CLI wall, p50)", median(terminal.times), 'ms', { atMost: 150 });
    record("web fetch from the owner's terminal: CPU per fetch (the CLI's and the service's)", terminal.cpu, 'CPU-s', { atMost: 0.15 });
  } finally {
    await proxy?.close();
    await runAsync([process.execPath, cliPath('browser'), 'stop']).catch(() => {});
    await site.close();
  }
}

/**
 * Runs commands as a turn of agent `id` runs them (agent/turn/model-turn.ts): bash_exec in the
 * agent's default sandbox (bubblewrap, the default limits, a peer's direct chat: the narrowest
 * binds), with the variables a turn sets plus `runEnv` (the run's sockets, which the sandbox binds)
 * and the tools on a PATH directory in the home, as the tests have them. Returns each call's wall.
 */
async function turnCommand(id: string): Promise<{ agent: string; run: (command: string, runEnv: NodeJS.ProcessEnv) => Promise<number> }> {
  const dir = await initAgent(home, id);
  const bin = join(home, '.bin');
  mkdirSync(bin, { recursive: true });
  for (const tool of ['web', 'browser']) if (!existsSync(join(bin, tool))) symlinkSync(cliPath(tool), join(bin, tool));
  const route = routeMessage(dir, 'per-peer', 'external:telegram:main:dm:42:42');
  const scope = messageScope(dir, route, false);
  const turnMark = newMark(TURN_MARK);
  const run = async (command: string, runEnv: NodeJS.ProcessEnv) => {
    const turnEnv = { ...env, PATH: `${bin}:${process.env.PATH}`, THECLAW_AGENT: id, THECLAW_AGENT_DIR: dir.root, THECLAW_CONVERSATION: route.threadId, ...runEnv };
    const sandbox = agentSandbox(home, dir, { profile: 'sandbox', network: true, limits: SANDBOX_LIMIT_DEFAULTS }, turnEnv, scope);
    const started = now();
    const result = await bashExec({ command }, { cwd: turnWorkdir(dir, scope), env: turnEnv, turnMark, sandbox });
    const took = now() - started;
    if (result.exit_code !== 0) throw new Error(`${command} failed in the sandbox: ${result.stderr}`);
    return took;
  };
  return { agent: id, run };
}

/**
 * `browser`, through the service's socket (what each command costs besides the CLI's start):
 * a cold open (service and Chromium started) to the first snapshot; a warm click to the next
 * snapshot (median of 10); the memory of an idle browser's processes, and the service's RSS once its
 * idle close has ended the browser.
 */
async function benchBrowser(): Promise<void> {
  const site = await startFormSite();
  const agentHome = join(home, 'agents', 'admin');
  mkdirSync(agentHome, { recursive: true });
  writeFileSync(join(agentHome, 'config.yaml'), '{}\n');
  mkdirSync(join(home, 'web'), { recursive: true });
  writeFileSync(join(home, 'web', 'config.yaml'), 'allow_private: ["127.0.0.1"]\n');
  const ask = (command: Parameters<typeof askAgentBrowser>[2]) => askAgentBrowser(home, 'admin', command, env);
  try {
    const started = now();
    await ask({ name: 'open', url: site.url('/form') });
    const first = await ask({ name: 'snapshot' });
    record('browser: cold open -> first snapshot (service and Chromium started)', now() - started, 'ms', { atMost: 2000 });
    let snapshot = first.text;
    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      const ref = /textbox "Your name"[^\n]*\[ref=((?:f\d+)?e\d+)\]/.exec(snapshot)![1]!;
      const clicked = now();
      await ask({ name: 'click', ref });
      snapshot = (await ask({ name: 'snapshot' })).text;
      times.push(now() - clicked);
    }
    record('browser: warm click -> snapshot (median of 10)', median(times), 'ms', { atMost: 150 });
    const service = daemonHolder(home, 'browser')!.pid;
    const profile = browserProfileDir(home, 'admin');
    record("browser: memory of an idle browser (PSS of Chromium's processes)", browserMemoryBytes(profile, service) / 1048576, 'MB', { atMost: 600 });
    writeFileSync(join(agentHome, 'config.yaml'), 'browser: { idle_minutes: 0.02 }\n');
    await ask({ name: 'snapshot' });
    await waitUntil(() => browserMemoryBytes(profile, service) === 0, 30_000);
    record('browser: RSS of the service after the idle close (no Chromium left)', rssMb(service), 'MB', { atMost: 200 });
    // A turn's first web fetch starts the service, which then loads playwright-core: a later open finds it loaded.
    await stopDaemonProcess(home, 'browser');
    writeFileSync(join(agentHome, 'config.yaml'), '{}\n');
    await askBrowserService(home, { op: 'fetch', agent: 'admin', url: site.url('/form') }, env);
    await askDaemon(home, 'browser', { op: 'status' }, 30_000); // answered once the preload let go of the process
    const opened = now();
    await ask({ name: 'open', url: site.url('/form') });
    await ask({ name: 'snapshot' });
    record('browser: open -> first snapshot, the service started by a web fetch before (Chromium started)', now() - opened, 'ms', { atMost: 2000 });
  } finally {
    await stopDaemonProcess(home, 'browser');
    await site.close();
  }
}

// `BENCH_ONLY=pipeline npm run bench` runs the benchmarks whose name contains the word.
const benches: [string, () => unknown][] = [
  ['theclaw', benchTheclaw],
  ['pipeline-latency', benchPipelineLatency],
  ['webchat-warm', benchWebchatWarm],
  ['api-warm', benchApiWarm],
  ['hundred-agents', benchHundredAgents],
  ['thousand-conversations', benchThousandConversations],
  ['pipeline-burst', benchPipelineBurst],
  ['xgw', benchXgw],
  ['pai', benchPai],
  ['thread-push', benchThreadPush],
  ['thread-peek', benchPeek],
  ['store', benchStores],
  ['cli', benchCli],
  ['notifier-dispatch', benchDispatch],
  ['sandbox', benchSandbox],
  ['policy', benchPolicy],
  ['web-fetch', benchWebFetch],
  ['browser', benchBrowser],
  ['postgres-webchat-warm', () => onPostgres('webchat', benchWebchatWarm)],
  ['postgres-hundred-agents', () => onPostgres('hundred', benchHundredAgents)],
  ['postgres-hosts', benchHosts],
];
try {
  for (const [name, bench] of benches) if (!process.env.BENCH_ONLY || name.includes(process.env.BENCH_ONLY)) await bench();
} finally {
  await stopPostgres();
  await leaveCgroup();
  if (!process.env.THECLAW_KEEP_HOME) rmSync(home, { recursive: true, force: true });
}
writeFileSync(1, JSON.stringify({ machine: { cpus: (await import('node:os')).cpus().length, node: process.version }, figures }, null, 2) + '\n');
process.exitCode = figures.every((figure) => figure.ok) ? 0 : 1;
