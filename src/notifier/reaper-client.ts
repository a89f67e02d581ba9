import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../core/logger.js';
import { packageRoot } from '../core/package.js';

/** What notifier tells its reaper (reaper.ts): a handler's process group started, or ended. */
export type ReaperCommand = { type: 'watch'; pid: number } | { type: 'forget'; pid: number };

/**
 * notifier's side of the reaper: forks it, tells it of handlers, and starts another (told of the
 * handlers still running) when one dies under a running notifier.
 */
export class Reaper {
  private child: ChildProcess | null = null;
  private readonly watched = new Set<number>();
  private stopped = false;

  constructor(private readonly logger: Logger) {
    this.spawn();
  }

  watch(pid: number): void {
    this.watched.add(pid);
    this.send({ type: 'watch', pid });
  }

  forget(pid: number): void {
    this.watched.delete(pid);
    this.send({ type: 'forget', pid });
  }

  /** The reaper leaves; the handlers it still watches are killed with it, as at notifier's exit. */
  stop(): void {
    this.stopped = true;
    this.child?.disconnect();
  }

  private send(command: ReaperCommand): void {
    if (this.child?.connected) this.child.send(command);
  }

  private spawn(): void {
    // Its notifier's pid on its command line: a notifier started after this one died finds it (reaperMayRun).
    const child = fork(reaperScript(), [String(process.pid)], { detached: true, stdio: ['ignore', 'ignore', 'ignore', 'ipc'], execArgv: [] });
    this.child = child;
    child.on('error', (error) => this.logger.error(`reaper ${child.pid}: ${error.message}`));
    child.once('exit', (code, signal) => {
      if (this.stopped) return;
      this.logger.error(`the reaper (pid ${child.pid}) ended (${signal ?? `exit ${code}`}); starting another`);
      this.spawn();
      for (const pid of this.watched) this.send({ type: 'watch', pid });
    });
    // Its channel must not keep notifier alive, nor the reaper keep notifier's event loop busy.
    child.unref();
    child.channel?.unref();
  }
}

const reaperScript = () => join(packageRoot(), 'dist', 'notifier', 'reaper.js');

/**
 * Whether the reaper of the notifier `notifierPid` may still be at work: it kills that notifier's
 * handlers and then leaves, so once it is gone none of them runs. Found by its command line
 * (`<node> <reaper.js> <pid>`); where /proc cannot be read it may be, for all anyone can tell.
 */
export function reaperMayRun(notifierPid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return true;
  }
  const script = reaperScript();
  return entries.some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      const [, file, pid] = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      return file === script && pid === String(notifierPid);
    } catch {
      return false; // exited meanwhile, or not ours to read
    }
  });
}
