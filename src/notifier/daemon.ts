import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ClawError, usageError } from '../core/errors.js';
import { logsDir, runDir, socketPath } from '../core/home.js';
import { listenSocket } from '../core/ipc.js';
import { tryLock } from '../core/lock.js';
import { createLogger } from '../core/logger.js';
import { loadConfig } from './config.js';
import { Dispatcher } from './dispatcher.js';
import { TimerScheduler } from './scheduler.js';
import { TimerStore, timerToJson } from './timers.js';
import type { NotifierRequest, NotifierStatus } from './types.js';

export function pidFile(home: string): string {
  return join(runDir(home), 'notifier.pid');
}

export function logFile(home: string): string {
  return join(logsDir(home), 'notifier.log');
}

/**
 * Runs the notifier in this process until `stop` or SIGTERM. One daemon per home: the pid file
 * is a pid-aware lock, so a second daemon refuses to start while one runs and a dead one's lock
 * is reclaimed. Resolves when the daemon has stopped.
 */
export async function runDaemon(home: string): Promise<void> {
  const config = loadConfig(home);
  mkdirSync(runDir(home), { recursive: true, mode: 0o700 });
  const attempt = tryLock(pidFile(home));
  if (!attempt.acquired) {
    throw new ClawError('conflict', `notifier is already running (pid ${attempt.holder.pid})`, {
      suggestion: 'stop it first with: notifier stop',
    });
  }
  const lock = attempt.lock;
  const logger = createLogger(logFile(home));
  const outputDir = join(runDir(home), 'notifier-output');
  mkdirSync(outputDir, { recursive: true, mode: 0o700 });
  const startedAt = new Date();
  const store = new TimerStore(home);
  const dispatcher = new Dispatcher({ home, config, logger, outputDir });
  const scheduler = new TimerScheduler({ home, store, config, logger, outputDir });

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));

  const status = (): NotifierStatus => ({
    running: true,
    pid: process.pid,
    started_at: startedAt.toISOString(),
    uptime_seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
    subscriptions: dispatcher.status(),
    timers: store.list().map((timer) => timerToJson(timer)),
  });

  const handle = (request: unknown): unknown => {
    const message = request as NotifierRequest;
    switch (message?.op) {
      case 'poke':
        if (typeof message.thread === 'string') dispatcher.poke(message.thread);
        return null;
      case 'timers':
        scheduler.reload();
        return null;
      case 'status':
        return status();
      case 'ping':
        return { pid: process.pid };
      case 'stop':
        setImmediate(shutdown);
        return { stopping: true };
      default:
        throw usageError(`unknown request ${JSON.stringify(request)}`, "send {\"op\": \"poke\" | \"status\" | \"stop\" | \"timers\" | \"ping\"}");
    }
  };

  let server: Awaited<ReturnType<typeof listenSocket>>;
  try {
    server = await listenSocket(socketPath(home, 'notifier'), handle);
  } catch (error) {
    lock.release();
    throw error;
  }
  const sweep = setInterval(() => dispatcher.sweep(), config.sweep_interval_seconds * 1000);
  let stopping = false;
  function shutdown(): void {
    if (stopping) return;
    stopping = true;
    clearInterval(sweep);
    scheduler.stop();
    dispatcher.stop();
    store.close();
    server.close();
    lock.release();
    logger.info(`notifier stopped (pid ${process.pid})`);
    resolveStopped();
  }
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);

  logger.info(`notifier started (pid ${process.pid}, sweep every ${config.sweep_interval_seconds}s)`);
  dispatcher.sweep(); // events pushed while the daemon was down
  scheduler.reload();
  await stopped;
}
