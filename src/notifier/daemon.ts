import { isDeepStrictEqual } from 'node:util';
import { availableParallelism } from 'node:os';
import { runDaemon } from '../core/daemon.js';
import { ClawError, usageError } from '../core/errors.js';
import { ensureDir } from '../core/home.js';
import { daemonLogFile, notifierConfigPath, notifierOutputDir } from '../core/layout.js';
import { createLogger, type Logger } from '../core/logger.js';
import { loadConfigFile, type NotifierConfig } from './config.js';
import { hostName } from '../core/host.js';
import { openStoreAt, storeSetting, type ThreadStore } from '../thread/index.js';
import type { ThreadDispatcher } from './dispatch-backend.js';
import { Dispatcher } from './dispatcher.js';
import { PostgresDispatcher, type PostgresDispatcherOptions } from './pg-dispatcher.js';
import { defaultRunLimit, RunLimit } from './run-limit.js';
import { createLauncher } from './launcher.js';
import { removeStaleOutput, type RunLimits } from './run.js';
import { RunnerPool } from './runner-pool.js';
import { TimerScheduler } from './scheduler.js';
import { TimerStore, timerToJson } from './timers.js';
import type { NotifierReloadResult, NotifierRequest, NotifierStatus } from './types.js';

/**
 * How long `status` waits for the store's subscriptions: a database that does not answer (its host
 * cut off) must not make a running notifier look like one that does not answer (the client waits 5 s).
 */
const STATUS_STORE_WAIT_MS = 3000;

/** Output files of runs are removed when the run ends; older ones were left by a killed daemon. */
const STALE_OUTPUT_MS = 24 * 3600 * 1000;

/**
 * Runs the notifier in this process until `stop` or SIGTERM. One daemon per home (the pid file
 * is a pid-aware lock, so a second one refuses to start and a dead one's lock is reclaimed).
 * `reload` applies a changed config without a restart: runs under way keep the limits they
 * started with, and the next ones get the new.
 */
export async function runNotifier(home: string): Promise<void> {
  const loaded = loadConfigFile(home);
  let config = loaded.value;
  /** The fingerprint of the config text in force (see NotifierStatus). */
  let configSha256 = loaded.sha256;
  await runDaemon(home, 'notifier', async () => {
    const logger = createLogger(daemonLogFile(home, 'notifier'));
    const outputDir = notifierOutputDir(home);
    ensureDir(outputDir);
    const stale = removeStaleOutput(outputDir, STALE_OUTPUT_MS);
    if (stale > 0) logger.info(`removed ${stale} output files older than a day from ${outputDir}`);
    const startedAt = new Date();
    const store = new TimerStore(home);
    const limit = new RunLimit(runLimitOf(config));
    // What the launcher reads at each launch: a reload replaces the pool and the limits here.
    const launching = { outputDir, pool: createPool(config, outputDir, logger), limits: runLimitsOf(config) };
    const launch = createLauncher(launching);
    const prepare = (handler: string) => launching.pool?.prepare(handler);
    const host = hostName(home);
    const { store: threads, dispatcher } = await createDispatcher({ home, host, config, logger, launch, limit, prepare }).catch((error: unknown) => {
      // A warm runner already waits, and would keep this failed daemon alive: its start would wait for an answer, not say why.
      launching.pool?.stop();
      store.close();
      throw error;
    });
    const scheduler = new TimerScheduler({ home, store, logger, launch, limit });
    const startSweep = () =>
      setInterval(() => {
        try {
          dispatcher.sweep();
        } catch (error) {
          logger.error(`sweep failed: ${(error as Error).message}`);
        }
      }, config.sweep_interval_seconds * 1000);
    let sweep = startSweep();

    const status = async (): Promise<NotifierStatus> => ({
      running: true,
      pid: process.pid,
      started_at: startedAt.toISOString(),
      uptime_seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
      runs: { running: limit.active, waiting: limit.queued, limit: limit.limit, runners: launching.pool?.size ?? 0 },
      subscriptions: await (threads ? inStoreTime(dispatcher.status(), threads.location) : dispatcher.status()),
      timers: store.list().map((timer) => timerToJson(timer)),
      config_sha256: configSha256,
      host,
      store: threads?.kind ?? 'sqlite',
    });

    /** Reads the config again and applies what changed; a config that does not load is refused, and the running one kept. */
    const reload = (): NotifierReloadResult => {
      const next = loadConfigFile(home);
      const keys = new Set([...Object.keys(config), ...Object.keys(next.value)]) as Set<keyof NotifierConfig>;
      const changed = [...keys].filter((key) => !isDeepStrictEqual(config[key], next.value[key]));
      config = next.value;
      configSha256 = next.sha256;
      dispatcher.configure(config);
      launching.limits = runLimitsOf(config);
      if (changed.includes('max_concurrent_runs')) limit.resize(runLimitOf(config));
      if (changed.includes('sweep_interval_seconds')) {
        clearInterval(sweep);
        sweep = startSweep();
      }
      if (changed.includes('runners')) {
        // Busy runners finish their job under the old settings, idle ones leave now.
        launching.pool?.stop();
        launching.pool = createPool(config, outputDir, logger);
      }
      logger.info(`config reloaded (${changed.length ? `changed: ${changed.join(', ')}` : 'nothing changed'})`);
      return { file: notifierConfigPath(home), changed, config_sha256: configSha256 };
    };

    logger.info(
      `notifier started (pid ${process.pid}, sweep every ${config.sweep_interval_seconds}s, at most ${limit.limit} runs at once${threads ? `; host ${host}, threads in ${threads.location}` : ''})`,
    );
    return {
      // Once the socket answers: with many threads waiting, the first sweep starts many runs,
      // and `notifier start` must not time out on its ping meanwhile.
      listening() {
        dispatcher.sweep(); // events pushed while the daemon was down
        scheduler.reload();
      },
      handle(request) {
        const message = request as NotifierRequest;
        switch (message.op) {
          case 'poke':
            if (typeof message.thread === 'string') dispatcher.poke(message.thread);
            return null;
          case 'wake':
            dispatcher.wake();
            return null;
          case 'timers':
            scheduler.reload();
            return null;
          case 'status':
            return status();
          case 'reload':
            return reload();
          default:
            throw usageError(`unknown request ${JSON.stringify(request)}`, 'send {"op": "poke" | "wake" | "status" | "reload" | "stop" | "timers" | "ping"}');
        }
      },
      async shutdown() {
        clearInterval(sweep);
        scheduler.stop();
        await dispatcher.stop();
        launching.pool?.stop();
        store.close();
        await threads?.close();
        logger.info(`notifier stopped (pid ${process.pid})`);
      },
    };
  });
}

/**
 * The dispatcher for the home's store: the SQLite one (as ever) unless a PostgreSQL store is set,
 * whose threads several hosts' notifiers share. Only the latter has a store to close.
 */
async function createDispatcher(options: Omit<PostgresDispatcherOptions, 'store'>): Promise<{ store: ThreadStore | null; dispatcher: ThreadDispatcher }> {
  const { url } = storeSetting(options.home);
  if (url === null) return { store: null, dispatcher: new Dispatcher(options) };
  const store = await openStoreAt(url);
  if (!store.leases || !store.listen) throw new Error(`${store.location} is no PostgreSQL store`);
  const dispatcher = new PostgresDispatcher({ ...options, store: store as PostgresDispatcherOptions['store'] });
  try {
    await dispatcher.start();
  } catch (error) {
    await dispatcher.stop();
    await store.close();
    throw error;
  }
  return { store, dispatcher };
}

/** The subscriptions read from a PostgreSQL store, or an error saying it did not answer in time. */
async function inStoreTime<T>(reading: T | Promise<T>, location: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    const error = new ClawError('upstream', `notifier runs (pid ${process.pid}), but its thread store ${location} did not answer within ${STATUS_STORE_WAIT_MS / 1000} s`, {
      suggestion: 'check that the database server runs and is reachable from this host; theclaw doctor checks it',
    });
    timer = setTimeout(() => reject(error), STATUS_STORE_WAIT_MS);
  });
  try {
    return await Promise.race([reading, late]);
  } finally {
    clearTimeout(timer);
  }
}

function runLimitOf(config: NotifierConfig): number {
  return config.max_concurrent_runs ?? defaultRunLimit(availableParallelism());
}

function runLimitsOf(config: NotifierConfig): RunLimits {
  return { timeoutMs: config.handler_timeout_seconds * 1000, outputLimitBytes: config.output_limit_bytes };
}

function createPool(config: NotifierConfig, outputDir: string, logger: Logger): RunnerPool | null {
  const { runners } = config;
  if (!runners.enabled) return null;
  return new RunnerPool({ outputDir, logger, idleRunners: runners.idle, maxJobs: runners.max_jobs, maxRssBytes: runners.max_rss_mb * 1e6, idleTimeoutMs: 60_000 });
}
