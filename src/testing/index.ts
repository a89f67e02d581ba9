import { execFileSync, spawn, type SpawnOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import type { YAMLMap, YAMLSeq } from 'yaml';
import { configDocumentText, parseConfigDocument } from '../core/config.js';
import { isClawError, type ClawError, type ErrorKind } from '../core/errors.js';
import { cliPath, packageRoot } from '../core/package.js';
import { findBwrap } from '../pai/sandbox.js';
import type { SessionLine } from '../pai/session.js';
import { agentInboxPath, INBOX_CONSUMER, xgwConfigPath } from '../core/layout.js';
import { WebchatPeers } from '../xgw/channels/webchat-peers.js';
import { loadWebchatPeerKey } from '../xgw/channels/webchat-token.js';
import { DEFAULT_XGW_CONFIG } from '../xgw/config.js';
import { initThread, openThread, type Thread } from '../thread/thread.js';
import { createSqliteStore, sqliteStoredThread } from '../thread/store/sqlite-store.js';
import type { StoredThread } from '../thread/store/types.js';
import { QUEUE_MODE_ENV } from '../agent/conversation/queue-mode.js';
import type { ThreadEvent } from '../thread/types.js';
export { waitFor } from './wait.js';
import { runWarm } from './warm-tool.js';

/**
 * bubblewrap, which the sandbox tests run for real (`.ci/run` installs it); where it is missing
 * they skip, and say so in their name.
 */
export const BWRAP = findBwrap();

/** Whether `file args` runs and exits 0 here: for tests of a tool that may not be installed (tmux, systemd-analyze). */
export function commandRuns(file: string, args: string[]): boolean {
  try {
    execFileSync(file, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
export const NEEDS_BWRAP = `needs bubblewrap${BWRAP ? '' : ': not installed, apt-get install bubblewrap'}`;

/**
 * Shared helpers for tests that run the real tools: a temp THECLAW_HOME, the built CLIs on PATH,
 * child processes with their output, and bounded waits. Tests run against `dist/` (built by
 * `npm test` first), because that is what a user runs.
 */
export const TOOLS = ['thread', 'notifier', 'cmds', 'pai', 'xgw', 'agent', 'theclaw', 'web', 'browser'] as const;

/** What gives the processes a model (provider keys, pai's mock script): removed for tests of the offline mock. */
export const PROVIDER_KEYS = ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'MISTRAL_API_KEY', 'GROQ_API_KEY', 'OPENROUTER_API_KEY', 'XAI_API_KEY', 'DEEPSEEK_API_KEY', 'PAI_MOCK_SCRIPT'];

export interface TestHome {
  home: string;
  /** Environment for child processes: THECLAW_HOME set and the tools first on PATH. */
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

/**
 * The queue mode of the test homes' agents, unless a test's config or `/queue` names one:
 * `followup`, one message one turn, as before queue modes; the default `collect` would make every
 * direct chat's turn wait out its debounce (1.5 s). The queue modes' own tests set theirs.
 */
export const TEST_QUEUE_MODE = { [QUEUE_MODE_ENV]: 'followup' };

/** A new THECLAW_HOME in `parent` (default: the temp directory). */
export function createTestHome(parent = tmpdir()): TestHome {
  const home = mkdtempSync(join(parent, 'theclaw-test-'));
  const bin = join(home, '.bin');
  mkdirSync(bin);
  for (const tool of TOOLS) symlinkSync(cliPath(tool), join(bin, tool));
  const env = { ...process.env, THECLAW_HOME: home, PATH: `${bin}:${process.env.PATH}`, THECLAW_LOG_LEVEL: 'debug', ...TEST_QUEUE_MODE };
  // A handler a stopped notifier let finish may still write in the home: its removal tries again then (ENOTEMPTY).
  return { home, env, cleanup: () => rmSync(home, { recursive: true, force: true, maxRetries: 10 }) };
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Writes xgw's config into a home (by default the one `theclaw up` writes, whose open web chat
 * `webchat:main` is the owner's own): the agent's tool policy reads the owner's web chats from it.
 */
export function writeXgwConfig(home: string, text = DEFAULT_XGW_CONFIG): void {
  mkdirSync(join(home, 'xgw'), { recursive: true, mode: 0o700 });
  writeFileSync(xgwConfigPath(home), text, { mode: 0o600 });
}

/**
 * Moves the home's web chats off their fixed ports onto free ones (`port: 0`), writing the config
 * `theclaw up` writes first where there is none. For a test that starts xgw with the config `theclaw
 * up` or `theclaw setup` writes: its port 18790 may be held by another test running at the same
 * time, or by the machine's own TheClaw.
 */
export function webchatOnFreePort(home: string): void {
  const file = xgwConfigPath(home);
  const config = parseConfigDocument(file, existsSync(file) ? readFileSync(file, 'utf8') : DEFAULT_XGW_CONFIG);
  const channels = config.get('channels') as YAMLSeq<YAMLMap>;
  for (const channel of channels.items) if (channel.get('type') === 'webchat') channel.set('port', 0);
  writeXgwConfig(home, configDocumentText(config));
}

/** The config `theclaw up` writes plus the README's guest web chat (`xgw channel add webchat:guests --access pairing`). */
export const XGW_CONFIG_WITH_GUESTS = DEFAULT_XGW_CONFIG.replace(
  '  - { id: terminal:local',
  '  - { id: webchat:guests, type: webchat, host: 127.0.0.1, port: 18791, access: pairing }\n  - { id: terminal:local',
);

/**
 * The credential a home's web chat `channelId` issues for the peer id `peer` (signed with its peer
 * key, webchat-peers.ts), for a test that chats under a peer id of its choice, as a page that was
 * issued that id does.
 */
export function webchatCredential(home: string, channelId: string, peer: string): string {
  return new WebchatPeers(loadWebchatPeerKey(home, channelId), channelId).credential(peer);
}

/**
 * Runs a built CLI (`thread`, `notifier`) with the test home's environment: in the warm runner
 * (warm-tool.ts) unless it needs a process of its own (standard input, another command under way).
 */
export function runTool(tool: (typeof TOOLS)[number], args: string[], env: NodeJS.ProcessEnv, input?: string | Buffer): Promise<RunResult> {
  return (input === undefined && runWarm(cliPath(tool), args, env)) || run(process.execPath, [cliPath(tool), ...args], { env }, input);
}

/** Runs a built CLI in a process of its own: for a test of what the process itself shows (its /proc environ). */
export function runToolAlone(tool: (typeof TOOLS)[number], args: string[], env: NodeJS.ProcessEnv, input?: string | Buffer): Promise<RunResult> {
  return run(process.execPath, [cliPath(tool), ...args], { env }, input);
}

export function run(command: string, args: string[], options: SpawnOptions, input?: string | Buffer): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    // Decoded as a stream: a character split between two chunks must not become two U+FFFD.
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin!.end(input);
  });
}

/** The test handler script (see fixtures/handler.mjs for its flags). */
export function fixture(name: string): string {
  return join(packageRoot(), 'src', 'testing', 'fixtures', name);
}

/** Awaits a promise that must reject with a ClawError, and returns the error (anything else is thrown). */
export async function rejection(promise: Promise<unknown>): Promise<ClawError> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
  if (!isClawError(error)) throw error;
  return error;
}

/**
 * Runs an ES module script (TypeScript imports allowed, through tsx) in a process of its own
 * that prints `done <Date.now()>` when it has cleaned up, and resolves once the process exited:
 * with whether something kept its event loop alive 5 s after `done` (a timer or socket left
 * behind: an unreferenced timer fires only in a process that something else keeps), which a
 * machine's load cannot fake, unlike the wall time from `done` to the exit.
 */
export async function exitAfterDone(script: string): Promise<{ code: number | null; stderr: string; lingered: boolean }> {
  const watched = `${script}\nsetTimeout(() => console.log('${LINGERED}'), 5_000).unref();\n`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', watched], { cwd: packageRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(killer);
  if (!/^done \d+$/m.test(stdout)) throw new Error(`the script never said done: ${stderr}`);
  return { code, stderr, lingered: stdout.includes(LINGERED) };
}

const LINGERED = 'still running 5 s after done';

/** Runs `script` (see exitAfterDone) and expects it to exit by itself, 0, nothing left running once it is done. */
export async function expectExitAfterDone(script: string): Promise<void> {
  const { code, stderr, lingered } = await exitAfterDone(script);
  expect(code, stderr).toBe(0);
  expect(lingered, 'something kept the process 5 s after stop()').toBe(false);
}

/** Runs `fn`, expects it to throw a ClawError of `kind`, and returns the error. */
export function expectClawError(fn: () => unknown, kind: ErrorKind): ClawError {
  try {
    fn();
  } catch (error) {
    if (!isClawError(error)) throw error;
    expect(error.kind, error.message).toBe(kind);
    return error;
  }
  throw new Error(`expected a ${kind} ClawError, but nothing was thrown`);
}
export * from './fake-llm.js';
export * from './fake-discord.js';
export * from './fake-slack.js';
export * from './fake-telegram.js';

/**
 * Expects a CLI run to have been refused the way every tool refuses: `exitCode`, nothing on
 * stdout, and one line `Error: <what> - <how to fix>` on stderr whose message matches `what`;
 * with `json` (the run had `--json`) the same as `{"error","suggestion"}` on stdout instead.
 * `label` names the case in a failure. Returns the error text.
 */
export function expectRefused(result: RunResult, exitCode: 1 | 2, what: RegExp, options: { json?: boolean; label?: string } = {}): string {
  const { json = false, label = '' } = options;
  const context = `${label}\nexit ${result.code}\nstdout: ${result.stdout.slice(0, 2000)}\nstderr: ${result.stderr.slice(0, 2000)}`;
  expect(result.code, context).toBe(exitCode);
  if (json) {
    expect(result.stderr, context).toBe('');
    const body = JSON.parse(result.stdout) as { error: string; suggestion: string };
    expect(Object.keys(body).sort(), context).toEqual(['error', 'suggestion']);
    expect(body.error, context).toMatch(what);
    expect(body.suggestion.length, context).toBeGreaterThan(0);
    return body.error;
  }
  expect(result.stdout, context).toBe('');
  expect(result.stderr, context).toMatch(/^Error: [^\n]+ - [^\n]+\n$/);
  expect(result.stderr, context).toMatch(what);
  return result.stderr;
}

/**
 * An agent's inbox as `agent start` leaves it, its consumer subscribed, for the tests of xgw,
 * which run no agent: a message to an inbox without it waits for a stopped agent.
 */
export function startedInbox(home: string, agent = 'admin'): string {
  const path = agentInboxPath(home, agent);
  const thread = initThread(path, { home });
  try {
    thread.subscribe({ consumer: INBOX_CONSUMER, handler: 'true' });
  } finally {
    thread.close();
  }
  return path;
}

/** Every event of the thread at `path`, oldest first, matching `filter` when one is given. */
export function threadEvents(home: string, path: string, filter?: string): ThreadEvent[] {
  const thread = openThread(path, { home });
  try {
    return thread.peek({ limit: 100_000, filter });
  } finally {
    thread.close();
  }
}

/**
 * A new test home with one open thread in it (`<home>/<name>`) for each test of the calling
 * suite: read `.home` and `.thread` inside the tests.
 */
export function useTestThread(name = 'conversation'): { readonly home: TestHome; readonly thread: Thread; readonly stored: StoredThread } {
  let home: TestHome | undefined;
  let thread: Thread | undefined;
  let stored: StoredThread | undefined;
  beforeEach(async () => {
    home = createTestHome();
    thread = openThread(join(home.home, name), { home: home.home, create: true });
    stored = await createSqliteStore(home.home).open(name);
  });
  afterEach(async () => {
    await stored?.close();
    thread?.close();
    home?.cleanup();
  });
  return {
    get home() {
      return home!;
    },
    get thread() {
      return thread!;
    },
    /** The same thread through the store (thread/store), as the agent runtime opens it. */
    get stored() {
      return stored!;
    },
  };
}

/** A thread opened with `openThread`, as the agent runtime sees threads (thread/store); closing either closes it. */
export function storedThread(thread: Thread): StoredThread {
  return sqliteStoredThread(thread.path, thread);
}

/** Every tool call of a pai session has its tool line (a killed or failed turn leaves none dangling). */
export function expectSessionValid(lines: SessionLine[]): void {
  const results = new Set(lines.flatMap((line) => (line.role === 'tool' ? [line.tool_call_id] : [])));
  for (const line of lines) {
    if (line.role === 'assistant') for (const call of line.tool_calls ?? []) expect(results.has(call.id), `tool call ${call.id} has a result`).toBe(true);
  }
}
export { listenAsXgw, type XgwListener } from './xgw-listener.js';
