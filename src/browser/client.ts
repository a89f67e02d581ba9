import { ClawError, isClawError } from '../core/errors.js';
import { askDaemon, daemonHolder, startDaemonProcess } from '../core/daemon.js';
import { request } from '../core/ipc.js';
import { BROWSER_SOCKET_ENV, type BrowserCommand, type BrowserReply, type RunningBrowser } from './types.js';

/** A command may take a cold start and a slow navigation; the service's own timeouts come first. */
const COMMAND_TIMEOUT_MS = 10 * 60_000;

/**
 * The environment the service is started with: what Chromium needs to run, never the caller's
 * secrets (a turn's runtime holds the model keys).
 */
function serviceEnvironment(home: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = { THECLAW_HOME: home };
  for (const name of ['PATH', 'HOME', 'LANG', 'TZ', 'THECLAW_LOG_LEVEL']) if (env[name] !== undefined) kept[name] = env[name];
  return kept;
}

/** Starts the home's browser service unless it runs; two starting it at once is fine. */
export async function ensureBrowserService(home: string, env: NodeJS.ProcessEnv): Promise<void> {
  if (daemonHolder(home, 'browser')) return;
  await startDaemonProcess(home, 'browser', serviceEnvironment(home, env)).catch((error: unknown) => {
    if (!isClawError(error, 'conflict')) throw error;
  });
}

/** On the host: the command to `agent`'s browser, starting the service if needed. */
export function askAgentBrowser(home: string, agent: string, command: BrowserCommand, env: NodeJS.ProcessEnv): Promise<BrowserReply> {
  return askBrowserService<BrowserReply>(home, { op: 'command', agent, command }, env);
}

/** On the host: a request to the service (a command, a `web fetch`), starting it if needed. */
export async function askBrowserService<T>(home: string, message: unknown, env: NodeJS.ProcessEnv): Promise<T> {
  await ensureBrowserService(home, env);
  return askDaemon<T>(home, 'browser', message, COMMAND_TIMEOUT_MS);
}

/**
 * The command from the CLI: in a turn through the socket its run bound into the sandbox (which
 * names the turn's own agent, and no other), else to the service for `agent` (default: the
 * turn's agent outside a sandbox, or admin).
 */
export async function sendCommand(command: BrowserCommand, options: { home: string; agent?: string; env: NodeJS.ProcessEnv }): Promise<BrowserReply> {
  const socket = options.env[BROWSER_SOCKET_ENV];
  if (socket) {
    if (options.agent !== undefined && options.agent !== options.env.THECLAW_AGENT) {
      throw new ClawError('usage', 'in a turn, browser drives only its own agent’s browser', { suggestion: 'leave out --agent' });
    }
    return request<BrowserReply>(socket, { op: 'command', command }, { timeoutMs: COMMAND_TIMEOUT_MS });
  }
  return askAgentBrowser(options.home, options.agent ?? options.env.THECLAW_AGENT ?? 'admin', command, options.env);
}

/** The home's browser service and its open browsers, for `theclaw status`; null when it is not running. */
export async function browserServiceStatus(home: string): Promise<{ pid: number; browsers: RunningBrowser[] } | null> {
  const holder = daemonHolder(home, 'browser');
  if (!holder) return null;
  const { browsers } = await askDaemon<{ browsers: RunningBrowser[] }>(home, 'browser', { op: 'status' }, 5_000);
  return { pid: holder.pid, browsers };
}
