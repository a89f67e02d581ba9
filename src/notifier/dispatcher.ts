// Over 400 lines: one class, the loop that hands thread events to their subscribers, with the slot and file-identity bookkeeping only it uses.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { agentOfPath } from '../core/layout.js';
import type { Logger } from '../core/logger.js';
import { backoffMs } from '../core/retry.js';
import { listThreads, openThread, startHandler, unregisterThread, type ConsumerInfo, type Thread } from '../thread/index.js';
import type { NotifierConfig } from './config.js';
import type { RunLimit } from './run-limit.js';
import type { CommandLauncher } from './launcher.js';
import type { ThreadDispatcher } from './dispatch-backend.js';
import type { SubscriptionStatus } from './types.js';
import { describeOutcome, formatRun, succeeded, type RunOutcome } from './run.js';

const REGISTRY_REREAD_MS = 1_000;
/**
 * Thread databases kept open between looks (3 file descriptors each). Busy threads stay open;
 * the others are opened when a poke or a change of their files says they have news.
 */
const MAX_OPEN_THREADS = 16;
/** However quiet its files look, every thread is read at least this often. */
const FULL_LOOK_MS = 60_000;

export interface DispatcherOptions {
  home: string;
  config: NotifierConfig;
  logger: Logger;
  /** Starts handlers: in a warm runner or a process of their own. */
  launch: CommandLauncher;
  /** Shared with the timers: how many handlers may run at once. */
  limit: RunLimit;
  /** Told of every subscribed handler as it is found: a warm runner can load its code ahead. */
  prepare?: (handler: string) => void;
}

/** A subscription as the daemon tracks it between runs. */
interface Slot {
  thread: string;
  consumer: string;
  /** The handler this daemon started and is waiting for. */
  running: { pid: number; since: string } | null;
  /** Armed when a failing handler waits for its backoff to pass. */
  retryTimer: NodeJS.Timeout | null;
  /**
   * The pid of a finished handler whose lease could not be released (a full disk). A warm runner
   * lives on after its job, so its lease would never be reclaimed as a dead holder's: it is
   * released on the next look instead.
   */
  unreleased: number | null;
}

/**
 * Starts handlers when their threads have pending work. Triggers are pokes (a push happened),
 * the periodic sweep (pokes can be lost, the daemon may have been down), the end of a handler
 * run (events may have arrived meanwhile; a poke during a run is never lost) and backoff timers.
 * Each trigger only marks a thread dirty; one pass per tick looks at what is pending, so a burst
 * of pokes costs one look.
 */
export class Dispatcher implements ThreadDispatcher {
  /** Open thread databases, least recently used first. */
  private readonly threads = new Map<string, Thread>();
  /** Which file each open thread's database is (see fileId). */
  private readonly files = new Map<string, string | null>();
  /** Threads found with nothing to do, by the signature their files had then. */
  private readonly idle = new Map<string, string>();
  private fullLookAt = Date.now();
  private readonly slots = new Map<string, Slot>();
  private readonly dirty = new Set<string>();
  private registered = new Set<string>();
  private registryReadAt = 0;
  private rereadTimer: NodeJS.Timeout | null = null;
  private readonly unknownPoked = new Set<string>();
  private flushScheduled = false;
  private stopped = false;

  constructor(private readonly options: DispatcherOptions) {}

  /** A reloaded config: its backoff applies to the next failure. */
  configure(config: NotifierConfig): void {
    this.options.config = config;
  }

  poke(threadPath: string): void {
    if (this.registered.has(threadPath)) {
      this.schedule(threadPath);
      return;
    }
    // A thread that subscribed since the registry was read, or (more often) one nobody
    // subscribed to, pushed to again and again: the registry directory is read again at most
    // once a second, and the threads poked meanwhile are looked at then.
    this.unknownPoked.add(threadPath);
    if (this.rereadTimer) return;
    this.rereadTimer = setTimeout(
      () => {
        this.rereadTimer = null;
        this.readRegistry();
        for (const path of this.unknownPoked) if (this.registered.has(path)) this.schedule(path);
        this.unknownPoked.clear();
      },
      Math.max(0, this.registryReadAt + REGISTRY_REREAD_MS - Date.now()),
    );
  }

  sweep(): void {
    this.readRegistry();
    if (Date.now() - this.fullLookAt >= FULL_LOOK_MS) {
      this.idle.clear();
      this.fullLookAt = Date.now();
    }
    for (const path of this.threads.keys()) if (!this.registered.has(path)) this.closeThread(path);
    // Forget the consumers of threads that left the registry (unsubscribed, deleted); a handler
    // still running keeps its slot until it ends.
    for (const [key, slot] of this.slots) {
      if (this.registered.has(slot.thread) || slot.running) continue;
      if (slot.retryTimer) clearTimeout(slot.retryTimer);
      this.slots.delete(key);
    }
    for (const path of this.registered) this.schedule(path);
  }

  /**
   * Something failing handlers depend on came back (see WakeMessage): every subscription waiting
   * out a backoff runs now. Its failure count stays, so one that fails again backs off further.
   */
  wake(): void {
    this.readRegistry();
    for (const path of this.registered) {
      const thread = this.open(path);
      if (!thread) continue;
      for (const subscription of thread.subscriptions()) if (subscription.retry_at !== null) thread.dispatch.retryNow(subscription.consumer);
      this.schedule(path);
    }
  }

  private readRegistry(): void {
    this.registered = new Set(listThreads(this.options.home));
    this.registryReadAt = Date.now();
  }

  /** Every registered subscription with what this daemon knows of it. */
  status(): SubscriptionStatus[] {
    return [...this.registered].sort().flatMap((path) => subscriptionStatus(path, () => this.open(path)?.subscriptions() ?? []));
  }

  /** Stops starting handlers. Running ones finish their batch; their leases protect them. */
  stop(): void {
    this.stopped = true;
    if (this.rereadTimer) clearTimeout(this.rereadTimer);
    for (const slot of this.slots.values()) if (slot.retryTimer) clearTimeout(slot.retryTimer);
    for (const path of [...this.threads.keys()]) this.closeThread(path);
  }

  private schedule(threadPath: string): void {
    if (this.stopped) return;
    this.dirty.add(threadPath);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const paths = [...this.dirty];
      this.dirty.clear();
      for (const path of paths) {
        try {
          this.dispatchThread(path);
        } catch (error) {
          this.options.logger.error(`dispatch of ${path} failed: ${(error as Error).message}`);
        }
      }
    });
  }

  private dispatchThread(path: string): void {
    // Taken before the thread is read, so that any write after the read changes it.
    const signature = fileSignature(path);
    if (signature !== null && this.idle.get(path) === signature) return;
    this.idle.delete(path);
    const thread = this.open(path);
    if (!thread) return;
    let busy = false;
    for (const subscription of thread.subscriptions()) {
      if (!subscription.subscribed) continue;
      if (subscription.handler !== null) this.options.prepare?.(subscription.handler);
      const slot = this.slot(path, subscription.consumer);
      if (slot.unreleased !== null) this.releaseLease(thread, slot, slot.unreleased);
      if (subscription.pending > 0 || slot.running || slot.unreleased !== null) busy = true;
      const retryAt = subscription.retry_at === null ? 0 : Date.parse(subscription.retry_at);
      if (slot.retryTimer && retryAt <= Date.now()) {
        // The backoff was cleared meanwhile (a subscribe with a new handler): start now.
        clearTimeout(slot.retryTimer);
        slot.retryTimer = null;
      }
      if (slot.running || slot.retryTimer || subscription.pending === 0) continue;
      if (retryAt > Date.now()) {
        this.armRetry(slot, retryAt);
        continue;
      }
      this.options.limit.request({ group: this.groupOf(path), key: slotKey(path, slot.consumer), start: () => this.startIfDue(path, slot.consumer) });
    }
    if (!busy && signature !== null) this.idle.set(path, signature);
  }

  /** The group a thread's runs count against: its agent (`<home>/agents/<id>/…`), else the thread. */
  private groupOf(path: string): string {
    const agent = agentOfPath(this.options.home, path);
    return agent ? `agent:${agent}` : `thread:${path}`;
  }

  /** Called when a run may start (at once, or once a place is free): starts it if still due. */
  private startIfDue(path: string, consumer: string): boolean {
    if (this.stopped) return false;
    try {
      const thread = this.open(path);
      const subscription = thread?.consumer(consumer);
      if (!thread || !subscription) return false;
      const slot = this.slot(path, consumer);
      const retryAt = subscription.retry_at === null ? 0 : Date.parse(subscription.retry_at);
      if (slot.running || slot.retryTimer || retryAt > Date.now()) return false;
      return this.start(thread, slot, subscription);
    } catch (error) {
      this.options.logger.error(`dispatch of ${path} failed: ${(error as Error).message}`);
      return false;
    }
  }

  /** Starts the handler; true when a process runs (and releases its place when it ends). */
  private start(thread: Thread, slot: Slot, subscription: ConsumerInfo): boolean {
    const result = startHandler(thread, subscription, { home: this.options.home, launch: this.options.launch('handler') });
    if (!result.started) {
      if (result.reason === 'spawn_failed') this.failed(thread, slot, subscription.failures, result.error);
      return false;
    }
    const { pid, outcome } = result.run;
    slot.running = { pid, since: new Date().toISOString() };
    this.options.logger.debug(`started ${slot.consumer} on ${slot.thread} (pid ${pid})`);
    void outcome
      .then((ended) => this.finished(slot, pid, subscription, ended))
      .catch((error: unknown) => this.options.logger.error(`${slot.consumer} on ${slot.thread} (pid ${pid}): ${(error as Error).message}`))
      .finally(() => this.options.limit.release());
    return true;
  }

  private finished(slot: Slot, pid: number, before: ConsumerInfo, outcome: RunOutcome): void {
    slot.running = null;
    if (this.stopped) return;
    const thread = this.open(slot.thread);
    if (!thread) return;
    this.releaseLease(thread, slot, pid);
    const what = `${slot.consumer} on ${slot.thread} (pid ${pid})`;
    if (!succeeded(outcome)) {
      const output = outcome.output.trimEnd();
      this.failed(thread, slot, before.failures, `${describeOutcome(outcome)}${output ? `: ${lastLine(output)}` : ''}`, formatRun(what, outcome));
      return;
    }
    const after = thread.consumer(slot.consumer);
    if (after && after.pending > 0 && after.progress === before.progress) {
      // Exit 0 without acknowledging anything while work waits: dispatching again at once would
      // spin, so it counts as a failure and backs off.
      const note = ' without acknowledging pending events';
      this.failed(thread, slot, before.failures, `exited 0${note}`, formatRun(what, outcome, note));
      return;
    }
    this.options.logger.info(formatRun(what, outcome));
    if (before.failures > 0) thread.dispatch.recordRun(slot.consumer, { ok: true });
    // Events may have arrived while it ran.
    this.schedule(slot.thread);
  }

  /** Releases a finished handler's lease, or remembers it for the next look when that fails. */
  private releaseLease(thread: Thread, slot: Slot, pid: number): void {
    try {
      thread.dispatch.releaseLease(slot.consumer, pid);
      slot.unreleased = null;
    } catch (error) {
      slot.unreleased = pid;
      this.options.logger.error(`${slot.consumer} on ${slot.thread}: the lease of pid ${pid} could not be released (${(error as Error).message}); trying again on the next look`);
    }
  }

  private failed(thread: Thread, slot: Slot, previousFailures: number, error: string, logLine = `${slot.consumer} on ${slot.thread}: ${error}`): void {
    const { initial_seconds, max_seconds } = this.options.config.backoff;
    const failures = previousFailures + 1;
    const delayMs = backoffMs(failures, { initialMs: initial_seconds * 1000, maxMs: max_seconds * 1000 });
    const retryAt = new Date(Date.now() + delayMs);
    // Armed first: a failure that cannot be recorded (a full disk) is still tried again.
    this.armRetry(slot, retryAt.getTime());
    this.options.logger.error(`${logLine}\nfailure ${failures}; retrying at ${retryAt.toISOString()}`);
    thread.dispatch.recordRun(slot.consumer, { ok: false, error, retryAt });
  }

  private armRetry(slot: Slot, at: number): void {
    if (slot.retryTimer) return;
    slot.retryTimer = setTimeout(
      () => {
        slot.retryTimer = null;
        this.schedule(slot.thread);
      },
      Math.max(0, at - Date.now()),
    );
  }

  private slot(thread: string, consumer: string): Slot {
    const key = slotKey(thread, consumer);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { thread, consumer, running: null, retryTimer: null, unreleased: null };
      this.slots.set(key, slot);
    }
    return slot;
  }

  private open(path: string): Thread | null {
    if (!existsSync(join(path, 'events.db'))) {
      // The thread was deleted (an agent removed with rm -rf): forget it.
      this.closeThread(path);
      unregisterThread(this.options.home, path);
      this.registered.delete(path);
      this.options.logger.info(`forgot ${path}: it is no longer a thread`);
      return null;
    }
    const file = fileId(path);
    const cached = this.threads.get(path);
    // A thread moved away (a damaged one) and made anew at its path is another file: the open
    // database would still be the old one, whose news never come.
    if (cached && this.files.get(path) !== file) this.closeThread(path);
    else if (cached) {
      this.threads.delete(path); // to the end: most recently used
      this.threads.set(path, cached);
      return cached;
    }
    for (const [oldest] of this.threads) {
      if (this.threads.size < MAX_OPEN_THREADS) break;
      this.closeThread(oldest);
    }
    const thread = openThread(path, { home: this.options.home });
    this.threads.set(path, thread);
    this.files.set(path, file);
    return thread;
  }

  private closeThread(path: string): void {
    this.threads.get(path)?.close();
    this.threads.delete(path);
    this.files.delete(path);
  }
}

function slotKey(thread: string, consumer: string): string {
  return `${thread}\u0000${consumer}`;
}

/**
 * What a thread's files look like: every commit appends to the WAL (or, after a checkpoint, to
 * the database), so an unchanged signature means nothing was pushed, acknowledged or subscribed.
 * Null when it cannot be read; the thread is then looked at the usual way.
 */
function fileSignature(path: string): string | null {
  try {
    const parts: string[] = [];
    for (const name of ['events.db', 'events.db-wal']) {
      const stat = statSync(join(path, name), { bigint: true, throwIfNoEntry: false });
      parts.push(stat ? `${stat.mtimeNs}:${stat.size}` : '-');
    }
    return parts.join('/');
  } catch {
    return null;
  }
}

/** The events.db file of a thread by device and inode; null when it cannot be read. */
function fileId(path: string): string | null {
  try {
    const stat = statSync(join(path, 'events.db'), { bigint: true });
    return `${stat.dev}:${stat.ino}`;
  } catch {
    return null;
  }
}

/**
 * A thread's subscriptions for `notifier status`. A thread that cannot be read (a damaged
 * events.db) shows as one entry for all its consumers (`*`) with the reason in `last_error`, so
 * that it never hides the other threads.
 */
export function subscriptionStatus(path: string, read: () => ConsumerInfo[]): SubscriptionStatus[] {
  try {
    return read().map((info) => ({ ...info, thread: path }));
  } catch (error) {
    return unreadableThread(path, error);
  }
}

/** The one entry of a thread that cannot be read (see subscriptionStatus). */
export function unreadableThread(path: string, error: unknown): SubscriptionStatus[] {
  return [
    {
      thread: path,
      consumer: '*',
      progress: 0,
      pending: 0,
      subscribed: true,
      handler: null,
      filter: null,
      lease: null,
      failures: 0,
      last_error: `cannot read the thread: ${(error as Error).message}`,
      retry_at: null,
    },
  ];
}

function lastLine(text: string): string {
  return text.slice(text.lastIndexOf('\n') + 1).slice(0, 300);
}
