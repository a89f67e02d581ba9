import { ClawError } from '../core/errors.js';
import { askXgw, isXgwUnavailable } from './client.js';
import { GatewayState, type PairingRequest } from './state.js';

/**
 * Deciding pairing requests, as `xgw pair approve`, `xgw peer revoke` and the owner's control
 * page do it: one path for each.
 */

/** Opens the gateway's state for one use (it is SQLite: the running daemon may hold it too). */
export function withState<T>(home: string, use: (state: GatewayState) => T): T {
  const state = new GatewayState(home);
  try {
    return use(state);
  } finally {
    state.close();
  }
}

export function pendingPairings(home: string): PairingRequest[] {
  return withState(home, (state) => state.pendingPairings());
}

/**
 * Admits the peer behind a pending code. The running gateway tells the peer and passes on its
 * first message (`welcomed`); else it does so at start.
 */
export async function approvePairing(home: string, code: string): Promise<{ request: PairingRequest; welcomed: boolean }> {
  const request = withState(home, (state) => state.approvePairing(code));
  if (!request) throw new ClawError('not_found', `no pending pairing request with code ${code}`, { suggestion: 'see the waiting requests with: xgw pair list (codes expire after an hour)' });
  try {
    await askXgw(home, { op: 'welcome' });
    return { request, welcomed: true };
  } catch (error) {
    if (!isXgwUnavailable(error)) throw error;
    return { request, welcomed: false };
  }
}

/** Refuses a pending code: the peer's request is dropped (as `xgw peer revoke` drops it), and it is not admitted. */
export function denyPairing(home: string, code: string): PairingRequest {
  return withState(home, (state) => {
    const request = state.pendingPairings().find((pending) => pending.code === code.toUpperCase());
    if (!request) throw new ClawError('not_found', `no pending pairing request with code ${code}`, { suggestion: 'see the waiting requests with: xgw pair list (codes expire after an hour)' });
    state.revoke(request.channel_id, request.peer_id);
    return request;
  });
}
