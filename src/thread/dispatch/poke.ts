import { socketPath } from '../../core/home.js';
import { notify } from '../../core/ipc.js';

/** The message a push sends to notifier's socket: "this thread has new events". */
export interface PokeMessage {
  op: 'poke';
  thread: string;
}

/**
 * The message a service that handlers depend on sends when it comes back (xgw once its channels
 * are up): handlers waiting out a backoff after failing against it may run now, instead of
 * minutes later when their backoff ends.
 */
export interface WakeMessage {
  op: 'wake';
}

/**
 * Tells notifier that a thread has new events. Never waits for an answer and never fails: when
 * notifier is down, its sweep finds the events after it starts.
 */
export function pokeNotifier(home: string, threadPath: string): Promise<void> {
  return notifyNotifier(home, { op: 'poke', thread: threadPath } satisfies PokeMessage);
}

/** Wakes the handlers in backoff (see WakeMessage); like a poke, it never waits and never fails. */
export function wakeNotifier(home: string): Promise<void> {
  return notifyNotifier(home, { op: 'wake' } satisfies WakeMessage);
}

function notifyNotifier(home: string, message: PokeMessage | WakeMessage): Promise<void> {
  let path: string;
  try {
    path = socketPath(home, 'notifier');
  } catch {
    return Promise.resolve(); // no safe socket directory: notifier cannot listen there either
  }
  return notify(path, message);
}
