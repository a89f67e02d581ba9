import { askDaemon, daemonHolder, daemonLogFile } from '../core/daemon.js';
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
 * The one way every xgw client says that the daemon did not answer (no socket, nobody listening,
 * or no answer in time): "not running" when no process holds its lock, else "starting or not
 * answering". Other errors are returned as they are.
 */
export function xgwUnavailable(home: string, error: unknown): unknown {
  if (!isClawError(error, 'not_found') && !isClawError(error, 'timeout')) return error;
  if (!daemonHolder(home, 'xgw')) return new ClawError('io', 'xgw is not running', { suggestion: 'start it with xgw start', cause: error });
  return new ClawError('io', 'xgw is starting or not answering', { suggestion: `wait a moment, or see ${daemonLogFile(home, 'xgw')}`, cause: error });
}
