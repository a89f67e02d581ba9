/**
 * What notifier stores and says about a thread: the contract between the event stream (`Thread`)
 * and the dispatchers that run its subscriptions' handlers (notifier's daemon, `thread dispatch`).
 *
 * - The registry (registry.ts, `$THECLAW_HOME/notifier/threads/`) lists the threads that have a
 *   subscription. `subscribe` registers its thread inside its own write transaction and the last
 *   `unsubscribe` takes it out, so a stored subscription is never missing from it; notifier
 *   reads it, and takes out a thread whose `events.db` is gone.
 * - A poke (poke.ts, `{op: 'poke', thread}` on notifier's socket) says "this thread has new
 *   events, look now": sent after a push commits and after a subscribe, at most once per tick,
 *   never waited for and never an error. It carries nothing that is not in the thread, so a lost
 *   poke only delays: notifier's sweep finds the work. A wake (`{op: 'wake'}`, from xgw once its
 *   channels are up and from `theclaw retry`) ends every backoff now.
 * - The lease (state.ts, `lease_*` in the consumer's row) names the one process running the
 *   consumer's handler. A dispatcher takes it in its own name, starts the handler and hands the
 *   lease to the handler's pid (handler.ts); notifier releases it when the handler ends. A lease
 *   is taken over only when its holder is dead (pid and start time, so a reused pid does not
 *   count), which also frees the lease of a handler `thread dispatch` started once it exits: at
 *   most one handler per consumer runs, across notifier restarts and `thread dispatch`.
 * - The run record (state.ts, `failures`, `last_error`, `retry_at` in the row) is notifier's:
 *   a failed run counts one more and sets when it may run again, a success clears it, a wake
 *   ends the wait; `subscribe` with a new handler or filter starts it clean. Being in the row, a
 *   backoff survives a notifier restart.
 *
 * The rest of the row (progress, handler, filter, subscribed) is the stream's, written by
 * subscribe, pop and ack; `ConsumerInfo` shows both halves.
 */
export { spawnLaunch, startHandler, type Launched, type Launcher, type LaunchResult, type SpawnedHandler, type StartHandlerOptions, type StartResult } from './handler.js';
export { listThreads, registerThread, unregisterThread } from './registry.js';
export { pokeNotifier, wakeNotifier, type PokeMessage, type WakeMessage } from './poke.js';
export type { DispatchState } from './state.js';
