import { askDaemon, daemonHolder } from '../core/daemon.js';
import { daemonLogFile } from '../core/layout.js';
import { ClawError, isClawError } from '../core/errors.js';
import type { XgwRequest } from './protocol.js';

/** Asks the running gateway over its control socket; see `xgwUnavailable` for a daemon that does not answer. */
export async function askXgw<T>(home: string, request: XgwRequest, timeoutMs?: number): Promise<T> {
  try {
    return await askDaemon<T>(home, 'xgw', request, timeoutMs);
  } catch (error) {
    throw xgwUnavailable(home, error);
  }
}

/**
 * Whether a delivery was not refused but could not be made now: xgw is not running, not
 * answering, died before it answered, or the channel is not up (starting, restarting, stopping);
 * or the platform is unreachable or failing (a network error, 5xx, 429). A caller that retries
 * (agent deliver) must not count this as a failed delivery: the same request with the same
 * idempotency key is safe once they are back. A refusal — by the platform (another 4xx: the
 * peer blocked the bot, the text is invalid) or by the gateway (`usage`, `invalid`,
 * `not_found` of a configured thing) — is an answer, and is not covered here.
 */
export function isXgwUnavailable(error: unknown): boolean {
  if (isClawError(error, 'io') || isClawError(error, 'timeout') || isClawError(error, 'aborted')) return true;
  if (!isClawError(error, 'upstream')) return false;
  // Without a status the platform was not reached, or answered nothing a refusal can be read from.
  return error.status === undefined || error.status === 429 || error.status >= 500;
}

/**
 * The one way every xgw client says that the daemon did not answer (no socket, nobody listening,
 * or no answer in time): "not running" when no process holds its lock, else "starting or not
 * answering". Other errors are returned as they are.
 */
export function xgwUnavailable(home: string, error: unknown): unknown {
  if (!isClawError(error, 'not_found') && !isClawError(error, 'timeout')) return error;
  // Named with the data directory: a shell without THECLAW_HOME looks in ~/.theclaw, maybe not the running system's.
  if (!daemonHolder(home, 'xgw')) return new ClawError('io', 'xgw is not running', { suggestion: `start TheClaw with theclaw up (data directory ${home})`, cause: error });
  return new ClawError('io', 'xgw is starting or not answering', { suggestion: `wait a moment, or see ${daemonLogFile(home, 'xgw')}`, cause: error });
}
