import { socketPath } from '../core/home.js';
import { notify } from '../core/ipc.js';

/** The message a push sends to notifier's socket: "this thread has new events". */
export interface PokeMessage {
  op: 'poke';
  thread: string;
}

/**
 * Tells notifier that a thread has new events. Never waits for an answer and never fails: when
 * notifier is down, its sweep finds the events after it starts.
 */
export function pokeNotifier(home: string, threadPath: string): Promise<void> {
  const message: PokeMessage = { op: 'poke', thread: threadPath };
  let path: string;
  try {
    path = socketPath(home, 'notifier');
  } catch {
    return Promise.resolve(); // no safe socket directory: notifier cannot listen there either
  }
  return notify(path, message);
}
