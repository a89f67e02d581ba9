import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentStatus } from '../agent/lifecycle.js';
import type { SandboxProfile } from '../agent/types.js';
import { cliPath } from '../core/package.js';
import { sleep } from '../core/retry.js';
import { startFakeOpenAI, type FakeLlmOptions, type FakeLlmServer, type FakeStep, type LooseJson, type RecordedRequest } from '../testing/fake-llm.js';
import { startFakeDiscord, type FakeDiscord } from '../testing/fake-discord.js';
import { startFakeSlack, type FakeSlack } from '../testing/fake-slack.js';
import { startFakeTelegram, type FakeTelegram } from '../testing/fake-telegram.js';
import { webchatCredential } from '../testing/index.js';
import { runWarm } from '../testing/warm-tool.js';
import { waitFor } from '../testing/wait.js';
import { openThread } from '../thread/thread.js';
import type { ThreadEvent } from '../thread/types.js';
import type { XgwStatus } from '../xgw/protocol.js';
import { ensureDir } from '../core/home.js';
import { TEST_QUEUE_MODE } from '../testing/index.js';
import WebSocket from 'ws';
import { webchatProtocols } from '../xgw/channels/webchat-http.js';

/**
 * The whole system up in a temp THECLAW_HOME, as a user runs it: the built CLIs (`agent init
 * admin`, `agent start admin`, `notifier start`, `xgw start`) as real processes, a fake OpenAI
 * server as the model, a fake Telegram Bot API as the platform (and, on request, a fake
 * Discord or Slack). Used by the end-to-end tests and
 * by `npm run bench`, so it imports nothing from vitest.
 */
export const SYSTEM_TOOLS = ['thread', 'notifier', 'cmds', 'pai', 'xgw', 'agent', 'theclaw', 'web', 'browser'] as const;
export type SystemTool = (typeof SYSTEM_TOOLS)[number];

export interface SystemOptions {
  /** For the fake model server (default step, delay). */
  llm?: FakeLlmOptions;
  /** Telegram access policy. Default: open. */
  telegramAccess?: 'open' | 'allowlist' | 'pairing';
  /** Telegram peer ids admitted without pairing. */
  telegramAllow?: string[];
  /** Telegram groups: answer only when mentioned. Default: true. */
  telegramRequireMention?: boolean;
  /** A `discord:main` channel (open access) against a fake Discord, its token in DISCORD_TOKEN_ENV. Default: none. */
  discord?: boolean;
  /** A `slack:main` channel (open access) against a fake Slack, its tokens in SLACK_TOKEN_ENV and SLACK_APP_TOKEN_ENV. Default: none. */
  slack?: boolean;
  /** notifier backoff. Default: { initial_seconds: 0.2, max_seconds: 1 }. */
  backoff?: { initial_seconds: number; max_seconds: number };
  /** Default: 0.5. */
  sweepIntervalSeconds?: number;
  /** notifier's `leases` (a PostgreSQL store's). Default: notifier's (ttl 30 s, heartbeat 10 s). */
  leases?: { ttl_seconds: number; heartbeat_seconds: number };
  /** notifier's warm runners; false: each `agent run` is a process of its own. Default: true. */
  runners?: boolean;
  /** THECLAW_LOG_LEVEL of every process. Default: debug. */
  logLevel?: string;
  /** More environment for every process (e.g. a provider key). */
  env?: NodeJS.ProcessEnv;
  /** `api_key_env` of the fake model's provider in pai's config. Default: none (keyless). */
  apiKeyEnv?: string;
  /** `token_env` of the Telegram channel, which holds the fake bot's token. Default: TELEGRAM_TOKEN_ENV. */
  telegramTokenEnv?: string;
  /**
   * admin's sandbox profile. `none` for tests of what the process marks do, which follow pids and
   * write files in the home. Default: the config's default (`sandbox`).
   */
  sandbox?: SandboxProfile;
  /** The fake model takes images (`input: [text, image]` in pai's config). Default: false. */
  modelSeesImages?: boolean;
  /** pai transcribes voice messages with the fake server (`transcription: { model: fake/whisper-1 }`; its answers: `llm.transcribe`). Default: false. */
  transcription?: boolean;
  /** The Telegram channel's `media` settings, as YAML (e.g. `{ max_bytes: 1000 }`). Default: none. */
  telegramMedia?: string;
  /**
   * The Telegram channel's `stream`. Default: on. Off where a test counts the sendMessage calls a
   * reply makes: a turn over a second (a busy machine) also sends its draft with one.
   */
  telegramStream?: boolean;
  /** More channels for xgw's config, each a YAML flow mapping (e.g. `{ id: webchat:quiet, type: webchat, port: 0 }`). Default: none. */
  extraChannels?: string[];
  /** admin's `turn.max_attempts`. Default: the config's default (3). */
  maxTurnAttempts?: number;
  /**
   * admin's `policy`, as YAML. Default: everyone's commands run (`rules: [{ bash: allow }]`), for
   * the tests of everything but the policy, whose Telegram peers and groups use the tool; the
   * policy's own tests give theirs.
   */
  policy?: string;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface System {
  home: string;
  /** Environment of every process: THECLAW_HOME, the tools first on PATH, the bot token. */
  env: NodeJS.ProcessEnv;
  llm: FakeLlmServer;
  telegram: FakeTelegram;
  /** With the `discord` option. */
  discord?: FakeDiscord;
  /** With the `slack` option. */
  slack?: FakeSlack;
  /** Runs a built CLI with the system's environment. */
  /** `environment` replaces the system's (e.g. to run as a command of an agent's turn). */
  run(tool: SystemTool, args: string[], input?: string, environment?: NodeJS.ProcessEnv): Promise<CliResult>;
  /** Runs a built CLI and throws unless it exits 0. */
  must(tool: SystemTool, args: string[], input?: string): Promise<CliResult>;
  /** `xgw status --json` of the running daemon. */
  xgwStatus(): Promise<XgwStatus>;
  /** Every event of an agent's thread (absolute path), oldest first; [] when it does not exist yet. */
  events(threadPath: string): ThreadEvent[];
  /** Stops xgw and notifier, closes the fakes and removes the home. */
  stop(): Promise<void>;
}

export const TELEGRAM_TOKEN_ENV = 'E2E_TELEGRAM_TOKEN';
export const DISCORD_TOKEN_ENV = 'E2E_DISCORD_TOKEN';
export const SLACK_TOKEN_ENV = 'E2E_SLACK_BOT_TOKEN';
export const SLACK_APP_TOKEN_ENV = 'E2E_SLACK_APP_TOKEN';

export async function startSystem(options: SystemOptions = {}): Promise<System> {
  const home = mkdtempSync(join(tmpdir(), 'theclaw-e2e-'));
  const bin = join(home, '.bin');
  mkdirSync(bin);
  for (const tool of SYSTEM_TOOLS) symlinkSync(cliPath(tool), join(bin, tool));
  const llm = await startFakeOpenAI(options.llm);
  const telegram = await startFakeTelegram();
  const discord = options.discord ? await startFakeDiscord() : undefined;
  const slack = options.slack ? await startFakeSlack() : undefined;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    THECLAW_HOME: home,
    PATH: `${bin}:${process.env.PATH}`,
    THECLAW_LOG_LEVEL: options.logLevel ?? 'debug',
    ...TEST_QUEUE_MODE,
    [options.telegramTokenEnv ?? TELEGRAM_TOKEN_ENV]: telegram.token,
    ...(discord && { [DISCORD_TOKEN_ENV]: discord.token }),
    ...(slack && { [SLACK_TOKEN_ENV]: slack.botToken, [SLACK_APP_TOKEN_ENV]: slack.appToken }),
    ...options.env,
  };

  const write = (file: string, text: string) => {
    ensureDir(join(home, file, '..'));
    writeFileSync(join(home, file), text);
  };
  write(
    'pai/config.yaml',
    `default: fake/m1
providers:
  fake:
    api: openai-completions
    base_url: "${llm.url}"${
      options.apiKeyEnv
        ? `
    api_key_env: ${options.apiKeyEnv}`
        : ''
    }
    models: [{ id: m1${options.modelSeesImages ? ', input: [text, image]' : ''} }]
retry: { initial_delay_ms: 20 }
${options.transcription ? 'transcription: { model: fake/whisper-1 }\n' : ''}`,
  );
  const backoff = options.backoff ?? { initial_seconds: 0.2, max_seconds: 1 };
  write(
    'notifier/config.yaml',
    `sweep_interval_seconds: ${options.sweepIntervalSeconds ?? 0.5}
backoff: { initial_seconds: ${backoff.initial_seconds}, max_seconds: ${backoff.max_seconds} }
runners: { enabled: ${options.runners ?? true} }
${options.leases ? `leases: { ttl_seconds: ${options.leases.ttl_seconds}, heartbeat_seconds: ${options.leases.heartbeat_seconds} }\n` : ''}`,
  );
  const allow = options.telegramAllow ?? [];
  write(
    'xgw/config.yaml',
    `channels:
  - { id: webchat:main, type: webchat, port: 0, access: open }
  - id: telegram:main
    type: telegram
    token_env: ${options.telegramTokenEnv ?? TELEGRAM_TOKEN_ENV}
    api_root: "${telegram.apiRoot}"
    access: ${options.telegramAccess ?? 'open'}
    allow: ${JSON.stringify(allow)}
    groups: { require_mention: ${options.telegramRequireMention ?? true} }${options.telegramMedia ? `\n    media: ${options.telegramMedia}` : ''}${options.telegramStream === false ? '\n    stream: false' : ''}${
      discord
        ? `
  - { id: discord:main, type: discord, token_env: ${DISCORD_TOKEN_ENV}, api_root: "${discord.apiRoot}", access: open }`
        : ''
    }${
      slack
        ? `
  - { id: slack:main, type: slack, token_env: ${SLACK_TOKEN_ENV}, app_token_env: ${SLACK_APP_TOKEN_ENV}, api_root: "${slack.apiRoot}", access: open }`
        : ''
    }
  - { id: terminal:local, type: terminal, access: open }
${(options.extraChannels ?? []).map((channel) => `  - ${channel}\n`).join('')}routes:
  - { channel: "*", peer: "*", agent: admin }
`,
  );

  const run = (tool: SystemTool, args: string[], input?: string, environment = env) => runCli(tool, args, environment, input);
  const must = async (tool: SystemTool, args: string[], input?: string) => {
    const result = await run(tool, args, input);
    if (result.code !== 0) throw new Error(`${tool} ${args.join(' ')} exited ${result.code}: ${result.stderr || result.stdout}`);
    return result;
  };
  const stop = async () => {
    await Promise.allSettled([run('xgw', ['stop']), run('notifier', ['stop'])]);
    await Promise.allSettled([llm.close(), telegram.close(), discord?.close(), slack?.close()]);
    // A handler notifier let finish may still write in the home: its removal tries again then (ENOTEMPTY).
    if (!process.env.THECLAW_KEEP_HOME) rmSync(home, { recursive: true, force: true, maxRetries: 10 });
  };

  try {
    await must('agent', ['init', 'admin']);
    if (options.sandbox) appendFileSync(join(home, 'agents', 'admin', 'config.yaml'), `sandbox: { profile: ${options.sandbox} }\n`);
    appendFileSync(join(home, 'agents', 'admin', 'config.yaml'), `policy: ${options.policy ?? '{ rules: [{ bash: allow }] }'}\n`);
    if (options.maxTurnAttempts) appendFileSync(join(home, 'agents', 'admin', 'config.yaml'), `turn: { max_attempts: ${options.maxTurnAttempts} }\n`);
    await must('agent', ['start', 'admin']);
    await must('notifier', ['start']);
    await must('xgw', ['start']);
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    home,
    env,
    llm,
    telegram,
    ...(discord && { discord }),
    ...(slack && { slack }),
    run,
    must,
    async xgwStatus() {
      return JSON.parse((await must('xgw', ['status', '--json'])).stdout) as XgwStatus;
    },
    events(threadPath) {
      try {
        const thread = openThread(threadPath, { home });
        try {
          return thread.peek({ limit: 100_000 });
        } finally {
          thread.close();
        }
      } catch {
        return [];
      }
    },
    stop,
  };
}

/** `agent status admin --json`. */
export async function agentStatus(s: System): Promise<AgentStatus> {
  return JSON.parse((await s.must('agent', ['status', 'admin', '--json'])).stdout) as AgentStatus;
}

/**
 * Waits until admin has nothing pending, running or undelivered: every answer is out whole. Until
 * then a message that was sent may be the answer's draft (a turn that takes over a second streams
 * into the message, and the answer then edits it), so its text is read after this.
 */
export async function untilAnswered(s: System): Promise<void> {
  await waitFor(async () => {
    const status = await agentStatus(s);
    return status.pending === 0 && !status.running && status.undelivered === 0;
  }, 'the agent to be idle');
}

/** Waits until admin has nothing pending, running or undelivered, then two more sweeps, so that a late duplicate would show. */
export async function settle(s: System): Promise<void> {
  await untilAnswered(s);
  await sleep(1_200); // not a wait for anything: the window in which a duplicate would appear
}

/** The agent's per-peer thread for a Telegram user (the router's slug of `telegram.main.<id>`). */
export function telegramThread(home: string, peerId: number | string): string {
  return peerThread(home, 'telegram', peerId);
}

/** The agent's per-peer thread for a user of a channel `<type>:main` (the router's slug of `<type>.main.<id>`). */
export function peerThread(home: string, channelType: string, peerId: number | string): string {
  return join(home, 'agents', 'admin', 'threads', 'peers', `${channelType}.main.${peerId}`);
}

/** A tool's command, warm where it can be (runTool's rule). */
export function runCli(tool: SystemTool, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CliResult> {
  return (input === undefined && runWarm(cliPath(tool), args, env)) || runArgv(process.execPath, [cliPath(tool), ...args], env, input);
}

/** Runs a program (e.g. a timer's command, split) with its output collected. */
export function runArgv(file: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    // Decoded as a stream: a character split between two chunks must not become two U+FFFD.
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** The text of an OpenAI message's content (a string or text parts). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part: LooseJson) => part?.type === 'text' && typeof part.text === 'string')
    .map((part: LooseJson) => part.text as string)
    .join('\n');
}

/** The text of the last user message of a recorded chat completions request. */
export function lastUserText(request: RecordedRequest): string {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const last = messages.findLast((message) => message?.role === 'user');
  return last ? contentText(last.content) : '';
}

/**
 * The model of the end-to-end tests: one bash_exec round per message. When the conversation ends
 * with the person's message it asks for `echo handled-<text>`; once the tool result is in it
 * answers `reply to: <text>`.
 */
export const echoToolStep: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const text = lastUserText(request);
  if (messages.at(-1)?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: `echo handled-${text}` } };
  return { kind: 'text', text: `reply to: ${text}` };
};

/** What a thread holds, to compare before and after a refused input. */
export interface ThreadSnapshot {
  /** Every row of the events table (idempotency keys too), oldest first. */
  rows: unknown[];
  /** The JSONL copy ('' when there is none yet). */
  jsonl: string;
  /** SQLite's `PRAGMA integrity_check`: `ok` for a sound file. */
  integrity: string;
}

/** Reads a thread's database directly (read-only, bypassing the library) and its JSONL copy. */
export function threadSnapshot(threadPath: string): ThreadSnapshot {
  const db = new Database(join(threadPath, 'events.db'), { readonly: true, fileMustExist: true });
  try {
    const jsonlPath = join(threadPath, 'events.jsonl');
    return {
      rows: db.prepare('SELECT * FROM events ORDER BY id').all(),
      jsonl: existsSync(jsonlPath) ? readFileSync(jsonlPath, 'utf8') : '',
      integrity: db.pragma('integrity_check', { simple: true }) as string,
    };
  } finally {
    db.close();
  }
}

export { waitFor as until };

/** A connection to the system's web chat as its page makes one, and everything it received. */
export interface WebchatPage {
  ws: WebSocket;
  received: LooseJson[];
  /** `http://127.0.0.1:<port>` */
  base: string;
  token: string;
  peer: string;
  /** What the page offers for `peer` (its PEER_HEADER). */
  credential: string;
}

/**
 * Opens the web chat's WebSocket the way the page does: the URL's token and the credential of a
 * peer id (default: a fresh one) in the handshake, from the page's origin. Close `ws` when done.
 */
export async function openWebchatPage(s: System, channelId = 'webchat:main', peer = randomBytes(16).toString('hex')): Promise<WebchatPage> {
  const url = new URL((await s.xgwStatus()).channels.find((channel) => channel.id === channelId)!.url!);
  const base = `http://127.0.0.1:${url.port}`;
  const token = url.searchParams.get('token')!;
  const credential = webchatCredential(s.home, channelId, peer);
  const ws = new WebSocket(`ws://127.0.0.1:${url.port}/ws`, webchatProtocols(token, credential), { origin: base });
  const received: LooseJson[] = [];
  ws.on('message', (data) => received.push(JSON.parse(String(data))));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, received, base, token, peer, credential };
}
