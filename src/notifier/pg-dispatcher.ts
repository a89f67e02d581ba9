import { isAbsolute, join } from 'node:path';
import { agentOfPath } from '../core/layout.js';
import type { Logger } from '../core/logger.js';
import { isAlive } from '../core/process.js';
import { backoffMs } from '../core/retry.js';
import type { DueSubscription, HeldLease, PostgresLeases, StoredThread, TakenLease, ThreadStore } from '../thread/index.js';
import type { NotifierConfig } from './config.js';
import type { ThreadDispatcher } from './dispatch-backend.js';
import { unreadableThread } from './dispatcher.js';
import type { SubscriptionStatus } from './types.js';
import type { CommandLauncher } from './launcher.js';
import { Reaper, reaperMayRun } from './reaper-client.js';
import type { RunLimit } from './run-limit.js';
import { describeOutcome, formatRun, succeeded, type RunOutcome } from './run.js';

export interface PostgresDispatcherOptions {
  home: string;
  /** This host's name (`hostName`): it names the leases this notifier takes. */
  host: string;
  /** A PostgreSQL store (it has `leases` and `listen`). */
  store: ThreadStore & { leases: PostgresLeases; listen: NonNullable<ThreadStore['listen']> };
  config: NotifierConfig;
  logger: Logger;
  launch: CommandLauncher;
  limit: RunLimit;
  prepare?: (handler: string) => void;
}

/** A handler this notifier started, under a lease it renews. */
interface Run {
  lease: HeldLease;
  thread: string;
  pid: number;
  kill(): void;
  /** When the last renewal that kept the lease was asked for (epoch ms). */
  renewedAt: number;
  /** Killed because its lease was lost or could not be renewed in time: not its failure. */
  lost: boolean;
  /**
   * Its handler ended: its lease is being released (a renewal that crosses the release misses it)
   * and a warm runner's pid may be running the next job, which a kill would end.
   */
  exited: boolean;
  /** Settles once the run ended and its lease was released. */
  ended: Promise<void>;
}

/**
 * Runs the handlers of subscriptions in a PostgreSQL store that several hosts' notifiers share
 * (postgres-leases.ts says when one is due). A look asks the store which subscriptions are due
 * here and takes each one's lease as a place frees; triggers are a NOTIFY from an append or
 * subscribe on any host (LISTEN), the periodic sweep (a NOTIFY lost while the connection was
 * down), the end of a run and backoff timers.
 *
 * Who keeps a lease: this notifier, not the handler. It renews the leases of its running
 * handlers every `leases.heartbeat_seconds` and releases each when its handler ended (after the
 * run record). A handler must therefore never run without its notifier: the reaper kills every
 * running handler's process group the moment notifier's process ends, however it ends (warm
 * runners included), and a handler whose lease could not be renewed for ttl − 2 × heartbeat (the
 * database unreachable) or was found taken is killed at once. So by the time a lease expires and
 * another host takes the subscription over, no handler of it runs here.
 */
export class PostgresDispatcher implements ThreadDispatcher {
  private readonly runs = new Map<string, Run>();
  /** Subscriptions between being offered a place and their lease taken (or not). */
  private readonly claiming = new Set<string>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  /** Open threads by their row key: a thread made again under its name is another. */
  private readonly threads = new Map<number, StoredThread>();
  private readonly reaper: Reaper;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private renewing = false;
  private lookAll = false;
  private readonly lookThreads = new Set<number>();
  private looking = false;
  private stopped = false;

  constructor(private readonly options: PostgresDispatcherOptions) {
    this.reaper = new Reaper(options.logger);
  }

  /** Says this host is here, listens for news and starts the heartbeat. */
  async start(): Promise<void> {
    const { store, host, home } = this.options;
    await store.placements.seen(host, home);
    await this.freeDeadHoldersLeases();
    // The second callback runs on every (re)connect of the listening connection: what was notified
    // while it was down is lost, so everything is looked at. It ends with the store's connections.
    await store.listen(
      (thread) => this.look([thread]),
      () => this.look(null),
    );
    this.startHeartbeat();
  }

  /**
   * A lease of this host whose notifier died (killed, or the machine restarted) is free: nobody
   * renews it, and once that notifier's reaper is gone none of its handlers runs. Waiting out its
   * expiry would hold this host's own subscriptions for up to `leases.ttl_seconds` after a restart.
   */
  private async freeDeadHoldersLeases(): Promise<void> {
    const { store, host, logger } = this.options;
    const dead = (await store.leases.heldByOthers(host, process.pid)).filter((lease) => !isAlive({ pid: lease.pid, start: null }) && !reaperMayRun(lease.pid));
    for (const lease of dead) await store.leases.release(host, lease);
    if (dead.length > 0) logger.info(`took back ${dead.length} leases of this host's notifier that died (pid ${[...new Set(dead.map((lease) => lease.pid))].join(', ')})`);
  }

  configure(config: NotifierConfig): void {
    const heartbeatChanged = config.leases.heartbeat_seconds !== this.options.config.leases.heartbeat_seconds;
    this.options.config = config;
    if (heartbeatChanged && this.heartbeatTimer) {
      clearInterval(this.heartbeatTimer);
      this.startHeartbeat();
    }
  }

  /** Pokes on the socket come from SQLite threads; a PostgreSQL append notifies. A look costs one query. */
  poke(_thread: string): void {
    this.look(null);
  }

  sweep(): void {
    this.look(null);
  }

  wake(): void {
    this.options.store.leases.retryAllNow().then(
      () => this.look(null),
      (error: unknown) => this.options.logger.error(`wake failed: ${(error as Error).message}`),
    );
  }

  status(): Promise<SubscriptionStatus[]> {
    return storedSubscriptions(this.options.store, this.options.store.leases);
  }

  /**
   * Stops starting handlers and ends the running ones: nobody would renew their leases. Each is
   * killed, and its lease released once it is gone, so that another host (or this one restarted)
   * runs the subscription at once; its events are handled again from its stored progress.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    for (const timer of this.retryTimers.values()) clearTimeout(timer);
    const running = [...this.runs.values()];
    for (const run of running) run.kill();
    await Promise.all(running.map((run) => run.ended));
    if (running.length > 0) this.options.logger.info(`stopped ${running.length} running handlers; their subscriptions run again from their progress`);
    this.reaper.stop();
  }

  /** Marks threads (or all, `null`) to look at; one look runs at a time and takes what piled up meanwhile. */
  private look(threads: number[] | null): void {
    if (this.stopped) return;
    if (threads === null) this.lookAll = true;
    else for (const thread of threads) this.lookThreads.add(thread);
    if (this.looking) return;
    this.looking = true;
    void this.lookLoop();
  }

  private async lookLoop(): Promise<void> {
    try {
      while (!this.stopped && (this.lookAll || this.lookThreads.size > 0)) {
        const threads = this.lookAll ? null : [...this.lookThreads];
        this.lookAll = false;
        this.lookThreads.clear();
        try {
          for (const due of await this.options.store.leases.due(this.options.host, threads)) this.offer(due);
        } catch (error) {
          this.options.logger.error(`dispatch failed: ${(error as Error).message}`);
        }
      }
    } finally {
      this.looking = false;
    }
  }

  private offer(due: DueSubscription): void {
    const key = runKey(due.thread, due.consumer);
    // A backoff is the row's (`retry_at`, which the look checked): a timer only looks again when it ends.
    if (this.runs.has(key) || this.claiming.has(key)) return;
    this.options.limit.request({
      group: this.groupOf(due.name),
      key,
      start: () => {
        if (this.stopped || this.runs.has(key) || this.claiming.has(key)) return false;
        this.claiming.add(key);
        void this.take(due, key);
        return true;
      },
    });
  }

  /** Takes the lease and starts the handler; the place in the run limit is released when it ends (or did not start). */
  private async take(due: DueSubscription, key: string): Promise<void> {
    const { host, home, config, logger } = this.options;
    let started = false;
    try {
      const asked = Date.now();
      const taken = await this.options.store.leases.take(due, { host, pid: process.pid, ttlMs: config.leases.ttl_seconds * 1000 });
      if (!taken) return;
      const lease: HeldLease = { thread: due.thread, consumer: due.consumer, pid: process.pid };
      if (this.stopped) return await this.release(lease, due.name);
      this.options.prepare?.(taken.handler);
      const launched = this.options.launch('handler')(taken.handler, { ...process.env, THECLAW_HOME: home, THECLAW_THREAD: due.name, THECLAW_CONSUMER: due.consumer });
      if (!launched.ok) {
        await this.failed(due, taken, launched.error);
        return await this.release(lease, due.name);
      }
      const { pid, kill, outcome } = launched.run;
      this.reaper.watch(pid);
      const run: Run = { lease, thread: due.name, pid, kill, renewedAt: asked, lost: false, exited: false, ended: Promise.resolve() };
      this.runs.set(key, run);
      started = true;
      logger.debug(`started ${due.consumer} on ${due.name} (pid ${pid})`);
      run.ended = outcome
        .then((ended) => {
          run.exited = true;
          return this.finished(due, taken, run, ended);
        })
        .catch((error: unknown) => logger.error(`${due.consumer} on ${due.name} (pid ${pid}): ${(error as Error).message}`))
        .finally(() => {
          this.runs.delete(key);
          this.reaper.forget(pid);
          this.options.limit.release();
          this.look([due.thread]); // events may have arrived while it ran
        });
    } catch (error) {
      logger.error(`dispatch of ${due.consumer} on ${due.name} failed: ${(error as Error).message}`);
    } finally {
      this.claiming.delete(key);
      if (!started) this.options.limit.release();
    }
  }

  private async finished(due: DueSubscription, taken: TakenLease, run: Run, outcome: RunOutcome): Promise<void> {
    const what = `${due.consumer} on ${due.name} (pid ${run.pid})`;
    if (run.lost || this.stopped) {
      this.options.logger.info(formatRun(what, outcome, run.lost ? ' (its lease was lost)' : ' (notifier stopped)'));
      if (!run.lost) await this.release(run.lease, due.name);
      return;
    }
    try {
      if (!succeeded(outcome)) {
        const output = outcome.output.trimEnd();
        await this.failed(due, taken, `${describeOutcome(outcome)}${output ? `: ${output.slice(output.lastIndexOf('\n') + 1).slice(0, 300)}` : ''}`, formatRun(what, outcome));
        return;
      }
      if (await this.options.store.leases.leftPending(due, taken.progress)) {
        const note = ' without acknowledging pending events';
        await this.failed(due, taken, `exited 0${note}`, formatRun(what, outcome, note));
        return;
      }
      this.options.logger.info(formatRun(what, outcome));
      if (taken.failures > 0) await (await this.thread(due)).recordRun(due.consumer, { ok: true });
    } finally {
      // After the run record: another host taking the subscription sees its backoff.
      await this.release(run.lease, due.name);
    }
  }

  private async failed(due: DueSubscription, taken: TakenLease, error: string, logLine = `${due.consumer} on ${due.name}: ${error}`): Promise<void> {
    const { initial_seconds, max_seconds } = this.options.config.backoff;
    const failures = taken.failures + 1;
    const retryAt = new Date(Date.now() + backoffMs(failures, { initialMs: initial_seconds * 1000, maxMs: max_seconds * 1000 }));
    const key = runKey(due.thread, due.consumer);
    if (!this.retryTimers.has(key)) {
      this.retryTimers.set(
        key,
        setTimeout(() => {
          this.retryTimers.delete(key);
          this.look([due.thread]);
        }, retryAt.getTime() - Date.now()),
      );
    }
    this.options.logger.error(`${logLine}\nfailure ${failures}; retrying at ${retryAt.toISOString()}`);
    await (await this.thread(due)).recordRun(due.consumer, { ok: false, error, retryAt });
  }

  private async release(lease: HeldLease, thread: string): Promise<void> {
    try {
      await this.options.store.leases.release(this.options.host, lease);
    } catch (error) {
      // It expires by itself: the subscription runs again then.
      this.options.logger.error(`${lease.consumer} on ${thread}: the lease could not be released (${(error as Error).message}); it expires in ${this.options.config.leases.ttl_seconds}s`);
    }
  }

  private startHeartbeat(): void {
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.options.config.leases.heartbeat_seconds * 1000);
  }

  /**
   * Renews the running handlers' leases and says this host is still here. A handler whose lease
   * is gone (taken over after it expired) or has gone unrenewed too long is killed first thing,
   * even while a renewal hangs on a lost connection.
   */
  private async heartbeat(): Promise<void> {
    const { host, home, store, logger, config } = this.options;
    const ttlMs = config.leases.ttl_seconds * 1000;
    const graceMs = ttlMs - 2 * config.leases.heartbeat_seconds * 1000;
    for (const run of this.runs.values()) {
      if (run.lost || Date.now() - run.renewedAt <= graceMs) continue;
      this.lose(run, `its lease could not be renewed for ${Math.round((Date.now() - run.renewedAt) / 1000)}s`);
    }
    if (this.renewing || this.stopped) return;
    this.renewing = true;
    try {
      const running = [...this.runs.values()].filter((run) => !run.lost);
      const asked = Date.now();
      const kept = new Set(
        (
          await store.leases.renew(
            host,
            running.map((run) => run.lease),
            ttlMs,
          )
        ).map((lease) => runKey(lease.thread, lease.consumer)),
      );
      for (const run of running) {
        if (kept.has(runKey(run.lease.thread, run.lease.consumer))) run.renewedAt = asked;
        else this.lose(run, 'its lease is no longer this host’s');
      }
      await store.placements.seen(host, home);
    } catch (error) {
      logger.error(`heartbeat failed: ${(error as Error).message}`);
    } finally {
      this.renewing = false;
    }
  }

  private lose(run: Run, why: string): void {
    if (run.exited) return;
    run.lost = true;
    this.options.logger.error(`${run.lease.consumer} on ${run.thread} (pid ${run.pid}): ${why}; killed, so that it never runs beside the next holder`);
    run.kill();
  }

  /** The group a thread's runs count against: its agent (`agents/<id>/…`), else the thread. */
  private groupOf(name: string): string {
    const { home } = this.options;
    const agent = agentOfPath(home, isAbsolute(name) ? name : join(home, name));
    return agent ? `agent:${agent}` : `thread:${name}`;
  }

  private async thread(due: DueSubscription): Promise<StoredThread> {
    let thread = this.threads.get(due.thread);
    if (!thread) {
      thread = await this.options.store.open(due.name);
      this.threads.set(due.thread, thread);
    }
    return thread;
  }
}

/** Every subscription in a PostgreSQL store, for `notifier status` (running or not). */
export async function storedSubscriptions(store: ThreadStore, leases: PostgresLeases): Promise<SubscriptionStatus[]> {
  const entries = await Promise.all(
    (await leases.subscribedThreads()).map(async (name) => {
      try {
        return (await (await store.open(name)).subscriptions()).map((info) => ({ ...info, thread: name }));
      } catch (error) {
        return unreadableThread(name, error);
      }
    }),
  );
  return entries.flat();
}

function runKey(thread: number, consumer: string): string {
  return `${thread}\u0000${consumer}`;
}
