import { fork, type ChildProcess } from 'node:child_process';
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
    const child = fork(join(packageRoot(), 'dist', 'notifier', 'reaper.js'), [], { detached: true, stdio: ['ignore', 'ignore', 'ignore', 'ipc'], execArgv: [] });
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
