import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { agentDir } from '../agent/agent-dir.js';
import { conversationThreads, OUTBOUND_CONSUMER } from '../agent/lifecycle.js';
import { ClawError, isClawError } from '../core/errors.js';
import { sleep } from '../core/retry.js';
import { openThread } from '../thread/index.js';
import { connectWebchat } from '../xgw/index.js';
import { eventLine, type EventLine } from './status.js';
import { defaultModel, down, up, type UpResult } from './system.js';
import { ensureDir, resolveHome } from '../core/home.js';
import { daemonLogFile, paiConfigPath, xgwConfigPath } from '../core/layout.js';

export const DEMO_MESSAGE = 'Hello! What can you do?';
const DEMO_TIMEOUT_MS = 60_000;

/**
 * The offline model's part in the demo: one shell command, then an answer, so the demo shows the
 * whole tool loop (a toolcall record between the message and the reply) without a provider key.
 */
const MOCK_SCRIPT = `- bash: "uname -sr"
  comment: "see which system this is"
- text: "Hello from admin, TheClaw's first agent. I ran one shell command (uname) to show the tool loop. With a provider key, theclaw up gives me a real model, and I can create agents, schedule work and answer from Telegram."
`;

export interface DemoThread {
  /** Relative to the demo's THECLAW_HOME. */
  path: string;
  events: EventLine[];
}

export interface DemoResult {
  home: string;
  model: string;
  message: string;
  reply: string;
  /** The inbox, then the conversation thread, oldest event first. */
  threads: DemoThread[];
  /** The reply's event id, acknowledged by `agent deliver` (its outbound progress). */
  delivered: { event_id: number; channel: string; thread: string };
  /** Milliseconds: the system up; message sent → reply on the web chat. */
  timings: { up_ms: number; reply_ms: number };
}

export interface DemoOptions {
  /** Use pai's default model of this environment (a real provider when a key is set) instead of the scripted offline one. */
  real?: boolean;
  /** Leave the demo's home in place (it is printed). */
  keep?: boolean;
  /** Progress lines, as they happen. */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

/**
 * `theclaw demo`: the whole system in a temporary THECLAW_HOME, one message through the web chat
 * (the door a browser uses), the reply, and every event the message produced. Everything it
 * started is stopped and the home removed, also when a step fails.
 */
export async function runDemo(env: NodeJS.ProcessEnv, options: DemoOptions = {}): Promise<DemoResult> {
  const timeout = AbortSignal.timeout(DEMO_TIMEOUT_MS);
  const signal = AbortSignal.any([timeout, ...(options.signal ? [options.signal] : [])]);
  if (options.real) requireRealModel(env);
  const home = mkdtempSync(join(tmpdir(), 'theclaw-demo-'));
  const say = options.onProgress ?? (() => {});
  const real = options.real ?? false;
  let failed = false;
  try {
    writeDemoConfig(home, real, env);
    const upStarted = Date.now();
    const system = await up(home, { ...env, THECLAW_HOME: home });
    signal.throwIfAborted();
    const upMs = Date.now() - upStarted;
    say(`started notifier (pid ${system.notifier.pid}) and xgw (pid ${system.xgw.pid}) in ${upMs} ms; agents: ${system.agents.join(', ')}`);
    const client = await connectWebchat(webchatUrlOf(system), signal);
    try {
      const sent = Date.now();
      say(`sending "${DEMO_MESSAGE}" through the web chat`);
      await client.send(DEMO_MESSAGE, signal);
      const reply = await client.nextReply(signal);
      const replyMs = Date.now() - sent;
      const delivered = await deliveredReply(home, signal);
      return {
        home,
        model: real || !system.model.offline ? `${system.model.provider}/${system.model.model ?? '(default)'}${system.model.offline ? ' (offline: no provider key)' : ''}` : 'offline mock (scripted)',
        message: DEMO_MESSAGE,
        reply: reply.text,
        threads: delivered.threads,
        delivered: delivered.delivered,
        timings: { up_ms: upMs, reply_ms: replyMs },
      };
    } finally {
      client.close();
    }
  } catch (error) {
    if (options.signal?.aborted) throw error; // interrupted: nothing to look into
    failed = true;
    // The logs of a failed demo are what tells why: its home is kept for them.
    const where = `see the logs under ${home} (kept)`;
    if (timeout.aborted) throw new ClawError('timeout', `the demo did not finish within ${DEMO_TIMEOUT_MS / 1000} s`, { suggestion: where, cause: error });
    if (isClawError(error)) throw new ClawError(error.kind, error.message, { suggestion: `${error.suggestion ? `${error.suggestion}; ` : ''}${where}`, cause: error });
    throw error;
  } finally {
    await down(home);
    if (!options.keep && !failed) rmSync(home, { recursive: true, force: true });
  }
}

/** With `real`, the user's own pai/config.yaml (their providers and default model) is the demo's. */
function writeDemoConfig(home: string, real: boolean, env: NodeJS.ProcessEnv): void {
  const write = (file: string, text: string) => writeFileSync(file, text, { flag: 'wx' });
  for (const file of [xgwConfigPath(home), paiConfigPath(home)]) ensureDir(dirname(file));
  // Port 0: the demo never collides with a running system's web chat.
  write(xgwConfigPath(home), 'channels:\n  - { id: webchat:main, type: webchat, port: 0, access: open }\nroutes:\n  - { channel: "*", peer: "*", agent: admin }\n');
  if (real) {
    const own = paiConfigPath(resolveHome(env));
    if (existsSync(own)) copyFileSync(own, paiConfigPath(home));
    return;
  }
  write(join(dirname(paiConfigPath(home)), 'mock-script.yaml'), MOCK_SCRIPT);
  write(paiConfigPath(home), 'default: mock/echo\nproviders:\n  mock: { script: mock-script.yaml }\n');
}

/** `--real` that would only find the offline mock is no real demo: it says why, before anything starts. */
function requireRealModel(env: NodeJS.ProcessEnv): void {
  if (!defaultModel(resolveHome(env), env).offline) return;
  throw new ClawError('invalid', `theclaw demo --real found no model: no provider key is set and ${paiConfigPath(resolveHome(env))} names no provider`, {
    suggestion: 'set OPENAI_API_KEY or ANTHROPIC_API_KEY (or a provider with api, base_url and models in pai/config.yaml), or run theclaw demo without --real',
  });
}

function webchatUrlOf(system: UpResult): string {
  const url = system.xgw.channels.find((channel) => channel.type === 'webchat' && channel.url)?.url;
  if (!url) throw new ClawError('io', 'the web chat did not start', { suggestion: `see ${daemonLogFile(system.home, 'xgw')}` });
  return url;
}

/**
 * Waits until `agent deliver` acknowledged the reply (the web chat showed it before deliver
 * recorded its success), then reads what the message left in the inbox and its thread.
 */
async function deliveredReply(home: string, signal: AbortSignal): Promise<{ threads: DemoThread[]; delivered: DemoResult['delivered'] }> {
  const admin = agentDir(home, 'admin');
  const acknowledged = (): { path: string; replyId: number } | undefined => {
    for (const path of conversationThreads(admin)) {
      const thread = openThread(path, { home });
      try {
        const reply = thread.peek({ filter: "type = 'message' AND source = 'self'", last: 1 })[0];
        if (reply && (thread.consumer(OUTBOUND_CONSUMER)?.progress ?? 0) >= reply.id) return { path, replyId: reply.id };
      } finally {
        thread.close();
      }
    }
    return undefined;
  };
  let found = acknowledged();
  while (!found) {
    await sleep(25, signal); // bounded by the demo's signal
    found = acknowledged();
  }
  const read = (path: string): DemoThread => {
    const thread = openThread(path, { home });
    try {
      return { path: relative(home, path), events: thread.peek({ limit: 1_000 }).map(eventLine) };
    } finally {
      thread.close();
    }
  };
  return {
    threads: [read(admin.inbox), read(found.path)],
    delivered: { event_id: found.replyId, channel: 'webchat:main', thread: relative(home, found.path) },
  };
}
