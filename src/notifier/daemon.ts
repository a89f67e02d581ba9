import { availableParallelism } from 'node:os';
import { runDaemon } from '../core/daemon.js';
import { usageError } from '../core/errors.js';
import { ensureDir } from '../core/home.js';
import { daemonLogFile, notifierOutputDir } from '../core/layout.js';
import { createLogger } from '../core/logger.js';
import { loadConfig } from './config.js';
import { Dispatcher } from './dispatcher.js';
import { defaultRunLimit, RunLimit } from './run-limit.js';
import { createLauncher, removeStaleOutput } from './run.js';
import { RunnerPool } from './runner-pool.js';
import { TimerScheduler } from './scheduler.js';
import { TimerStore, timerToJson } from './timers.js';
import type { NotifierRequest, NotifierStatus } from './types.js';

/** Output files of runs are removed when the run ends; older ones were left by a killed daemon. */
const STALE_OUTPUT_MS = 24 * 3600 * 1000;

/**
 * Runs the notifier in this process until `stop` or SIGTERM. One daemon per home (the pid file
 * is a pid-aware lock, so a second one refuses to start and a dead one's lock is reclaimed).
 */
export async function runNotifier(home: string): Promise<void> {
  const config = loadConfig(home);
  await runDaemon(home, 'notifier', async () => {
    const logger = createLogger(daemonLogFile(home, 'notifier'));
    const outputDir = notifierOutputDir(home);
    ensureDir(outputDir);
    const stale = removeStaleOutput(outputDir, STALE_OUTPUT_MS);
    if (stale > 0) logger.info(`removed ${stale} output files older than a day from ${outputDir}`);
    const startedAt = new Date();
    const store = new TimerStore(home);
    const limit = new RunLimit(config.max_concurrent_runs ?? defaultRunLimit(availableParallelism()));
    const { runners } = config;
    const pool = runners.enabled ? new RunnerPool({ outputDir, logger, idleRunners: runners.idle, maxJobs: runners.max_jobs, maxRssBytes: runners.max_rss_mb * 1e6, idleTimeoutMs: 60_000 }) : null;
    const launch = createLauncher({ outputDir, pool, limits: { timeoutMs: config.handler_timeout_seconds * 1000, outputLimitBytes: config.output_limit_bytes } });
    const dispatcher = new Dispatcher({ home, config, logger, launch, limit, prepare: pool ? (handler) => pool.prepare(handler) : undefined });
    const scheduler = new TimerScheduler({ home, store, logger, launch, limit });
    const sweep = setInterval(() => {
      try {
        dispatcher.sweep();
      } catch (error) {
        logger.error(`sweep failed: ${(error as Error).message}`);
      }
    }, config.sweep_interval_seconds * 1000);

    const status = (): NotifierStatus => ({
      running: true,
      pid: process.pid,
      started_at: startedAt.toISOString(),
      uptime_seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
      runs: { running: limit.active, waiting: limit.queued, limit: limit.limit, runners: pool?.size ?? 0 },
      subscriptions: dispatcher.status(),
      timers: store.list().map((timer) => timerToJson(timer)),
    });

    logger.info(`notifier started (pid ${process.pid}, sweep every ${config.sweep_interval_seconds}s, at most ${limit.limit} runs at once)`);
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
          default:
            throw usageError(`unknown request ${JSON.stringify(request)}`, 'send {"op": "poke" | "wake" | "status" | "stop" | "timers" | "ping"}');
        }
      },
      shutdown() {
        clearInterval(sweep);
        scheduler.stop();
        dispatcher.stop();
        pool?.stop();
        store.close();
        logger.info(`notifier stopped (pid ${process.pid})`);
      },
    };
  });
}
