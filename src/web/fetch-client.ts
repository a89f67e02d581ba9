import { existsSync } from 'node:fs';
import { errnoCode, errorToJson, exitCodeOf, formatError, isClawError } from '../core/errors.js';
import { request } from '../core/ipc-client.js';
import type { FetchRequest } from './fetch-request.js';

/**
 * `web fetch` as a thin client. A fresh Node process that loads the reader (linkedom,
 * Readability, turndown) and the CLI (commander, yaml, zod) spends ~0.8 s of CPU on the loading
 * alone, for a page a warm process reads in ~0.1 s (the bench's 200 KB article; figures in
 * docs/ARCHITECTURE.md, known limits). So when a warm service is there — in a turn the run's
 * browser proxy, on the host the browser service — this module, which loads nothing else, sends
 * the flags over and prints what comes back; fetch-door.ts does the fetch there. Anything it does
 * not recognise as a plain `web fetch` (help, a bad flag, another command) and a service that
 * is not there go to the full CLI, which gives every answer and error it always gave.
 */

/** In a turn's sandbox: the run's proxy socket, the browser's (browser/types.ts), which serves `web fetch` too. */
export const SERVICE_SOCKET_ENV = 'THECLAW_BROWSER_SOCKET';

/** Beyond the fetch's own timeout: a service to start, a PDF to convert (pdftotext's 30 s). */
const SERVICE_MARGIN_MS = 60_000;

const SWITCHES = { '--raw': 'raw', '--fresh': 'fresh', '--json': 'json' } as const;
const NUMBERS = { '--max-chars': 'max_chars', '--timeout': 'timeout_seconds', '--max-bytes': 'max_bytes' } as const;

/**
 * The request for `args` (argv after the script) when it is `fetch <url>` with known flags and
 * valid values (as commander would take them: `--flag value` or `--flag=value`, the last one
 * wins); else undefined, for the full CLI to parse and answer.
 */
export function thinFetchRequest(args: readonly string[]): FetchRequest | undefined {
  if (args[0] !== 'fetch') return undefined;
  const request: Omit<FetchRequest, 'url'> & { url?: string } = { op: 'fetch' };
  for (let at = 1; at < args.length; at++) {
    const arg = args[at]!;
    // U+FFFD stands for bytes that were not UTF-8: the full CLI refuses those.
    if (arg.includes('\uFFFD')) return undefined;
    const equals = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = equals === -1 ? arg : arg.slice(0, equals);
    if (Object.hasOwn(SWITCHES, flag) && equals === -1) {
      request[SWITCHES[flag as keyof typeof SWITCHES]] = true;
    } else if (Object.hasOwn(NUMBERS, flag)) {
      const value = equals === -1 ? args[++at] : arg.slice(equals + 1);
      if (value === undefined || !/^\d+$/.test(value) || Number(value) <= 0 || !Number.isSafeInteger(Number(value))) return undefined;
      request[NUMBERS[flag as keyof typeof NUMBERS]] = Number(value);
    } else if (arg.startsWith('-') || request.url !== undefined) {
      return undefined;
    } else {
      request.url = arg;
    }
  }
  return request.url === undefined ? undefined : (request as FetchRequest);
}

/**
 * The warm service's socket: in a turn the proxy's; else the home's browser service when its
 * socket is there, unless an agent's directory is named (an agent's command outside a turn's
 * proxy caches in its own workdir, which only the full CLI knows of). The home's code (and
 * node:crypto with it) loads only then: a turn's fetch does without it.
 */
async function serviceSocket(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (env[SERVICE_SOCKET_ENV]) return env[SERVICE_SOCKET_ENV];
  if (env.THECLAW_AGENT_DIR?.trim()) return undefined;
  const { resolveHome, socketPath } = await import('../core/home.js');
  try {
    const socket = socketPath(resolveHome(env), 'browser');
    return existsSync(socket) ? socket : undefined;
  } catch {
    return undefined; // a home the full CLI will say what is wrong with
  }
}

/**
 * Runs `web fetch` through the warm service; false when it is not for the thin client (not a
 * plain fetch, no service, or nothing listening on its socket), for the full CLI to run.
 */
export async function fetchThroughService(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<boolean> {
  const fetch = thinFetchRequest(argv.slice(2));
  const socket = fetch && (await serviceSocket(env));
  if (!fetch || !socket) return false;
  let reply: { stdout: string };
  try {
    reply = await request<{ stdout: string }>(socket, fetch, { timeoutMs: (fetch.timeout_seconds ?? 30) * 1000 + SERVICE_MARGIN_MS });
  } catch (error) {
    // Nobody listening (a service that stopped, a stale socket): the cause is the connection's.
    const code = errnoCode((error as { cause?: unknown }).cause);
    if (code === 'ENOENT' || code === 'ECONNREFUSED') return false;
    // A service started by this package before it did fetches (an upgrade meanwhile) refuses the request as not a browser command.
    if (isClawError(error, 'usage') && error.message.startsWith('invalid browser request')) return false;
    // As runCli reports an error (core/cli.ts); the redactor (which reads the configs) only then.
    const redact = (await import('../core/secrets.js')).createRedactor(env);
    if (fetch.json) process.stdout.write(`${redact(JSON.stringify(errorToJson(error)))}\n`);
    else process.stderr.write(`${redact(formatError(error))}\n`);
    process.exitCode = exitCodeOf(error);
    return true;
  }
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error; // a reader that went away (| head) is not an error
  });
  process.stdout.write(reply.stdout);
  return true;
}
