import { fork, type ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { splitCommand } from '../core/command.js';
import type { Logger } from '../core/logger.js';
import { packageRoot } from '../core/package.js';
import { killGroup, watchGroup } from '../core/process.js';
import type { LaunchResult } from '../thread/index.js';
import { KILL_GRACE_MS, OutputFile, type RunLimits, type SupervisedRun, type RunOutcome } from './run.js';
import type { RunnerJob, RunnerMessage } from './runner-protocol.js';

export interface RunnerPoolOptions {
  outputDir: string;
  logger: Logger;
  /** Runners kept waiting, modules loaded, for the next job. */
  idleRunners: number;
  /** A runner leaves after this many jobs, or once it has grown past `maxRssBytes`. */
  maxJobs: number;
  maxRssBytes: number;
  /** Idle runners beyond `idleRunners` leave after this long. */
  idleTimeoutMs: number;
  /** Which build of `dist/` a runner would load now (default: runner.js's mtime); for tests. */
  buildStamp?: () => number;
}

/** One handler of this package's CLIs: the module and its arguments. */
export interface WarmCommand {
  cli: string;
  args: string[];
}

interface Runner {
  child: ChildProcess & { pid: number };
  output: OutputFile;
  jobs: number;
  idleSince: number;
  /** The build of `dist/` it loaded (`buildStamp`). */
  build: number;
  /** The job under way: how to end it; true when the job was killed for its time. */
  current: { id: number; finish: (code: number | null, signal: NodeJS.Signals | null) => boolean } | null;
}

/**
 * Warm runners for handlers that run this package's CLIs (`agent run`, `agent deliver`): each
 * message used to pay two Node starts (about 0.3 CPU-s and 100 MB each); a runner (runner.ts)
 * runs such commands in-process, one job at a time, its modules loaded once. A job keeps what a
 * process of its own has: the lease is the runner's pid for the job's duration, its output is
 * captured, its time limit kills the runner's process group (and the pool starts another). A
 * runner is recycled after `maxJobs` jobs or when it has grown; other commands are spawned.
 */
export class RunnerPool {
  private readonly idle: Runner[] = [];
  private readonly runners = new Set<Runner>();
  /** CLI modules jobs used: new runners load them before their first job. */
  private readonly modules = new Set<string>();
  /** Commands `prepare` has seen, so that a sweep's many calls cost a lookup each. */
  private readonly prepared = new Set<string>();
  private readonly trimTimer: NodeJS.Timeout;
  private jobIds = 0;
  private stopped = false;

  constructor(private readonly options: RunnerPoolOptions) {
    this.trimTimer = setInterval(() => this.trim(), Math.min(options.idleTimeoutMs, 10_000));
    this.trimTimer.unref();
    for (let i = 0; i < options.idleRunners; i++) this.idle.push(this.spawn());
  }

  /** The CLI and arguments of a command that runs one of this package's CLIs with this Node, or null. */
  static warmCommand(command: string): WarmCommand | null {
    let argv: string[];
    try {
      argv = splitCommand(command);
    } catch {
      return null;
    }
    const [program, cli, ...args] = argv;
    if (program !== process.execPath || cli === undefined) return null;
    const inPackage = relative(join(packageRoot(), 'dist'), cli).split(sep);
    return inPackage.length === 2 && /^[a-z]+$/.test(inPackage[0]!) && inPackage[1] === 'cli.js' ? { cli, args } : null;
  }

  /** A command that will run here soon: its CLI is loaded ahead by the runners. */
  prepare(command: string): void {
    if (this.prepared.has(command)) return;
    this.prepared.add(command);
    const warm = RunnerPool.warmCommand(command);
    if (warm) this.learn(warm.cli);
  }

  /** Runs the command in a warm runner. */
  run(command: WarmCommand, env: NodeJS.ProcessEnv, limits: RunLimits): LaunchResult<SupervisedRun> {
    if (this.stopped) return { ok: false, error: 'notifier is stopping' };
    this.learn(command.cli);
    let runner: Runner;
    try {
      runner = this.takeIdle() ?? this.spawn();
      runner.output.empty();
    } catch (error) {
      return { ok: false, error: `cannot start a runner: ${(error as Error).message}` };
    }
    const id = ++this.jobIds;
    const started = Date.now();
    const { pid } = runner.child;
    const watch = watchGroup(pid, { timeoutMs: limits.timeoutMs, graceMs: KILL_GRACE_MS });
    const outcome = new Promise<RunOutcome>((resolve) => {
      runner.current = {
        id,
        finish: (code, signal) => {
          runner.current = null;
          watch.release();
          const output = runner.output.readSafely(limits.outputLimitBytes);
          resolve({ code, signal, timedOut: watch.killedFor === 'timeout', durationMs: Date.now() - started, output });
          return watch.killedFor !== null;
        },
      };
    });
    const job: RunnerJob = { type: 'job', id, cli: command.cli, args: command.args, env: definedOnly(env) };
    runner.child.send(job);
    return { ok: true, run: { pid, kill: () => killGroup(pid, 'SIGKILL'), outcome } };
  }

  get size(): number {
    return this.runners.size;
  }

  /** Idle runners leave now; busy ones after their job. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.trimTimer);
    for (const runner of this.runners) this.retire(runner);
  }

  /**
   * An idle runner of the build `dist/` holds now. One loaded before a rebuild (an upgrade while
   * notifier runs) would fail every job: the chunks it imports lazily were renamed.
   */
  private takeIdle(): Runner | undefined {
    const build = this.buildStamp();
    for (let runner = this.idle.pop(); runner; runner = this.idle.pop()) {
      if (runner.build === build) return runner;
      this.options.logger.info(`runner ${runner.child.pid} leaves: dist/ was built again since it started`);
      this.retire(runner);
    }
    return undefined;
  }

  private buildStamp(): number {
    if (this.options.buildStamp) return this.options.buildStamp();
    try {
      return statSync(RUNNER_MODULE()).mtimeMs;
    } catch {
      return Number.NaN; // being rebuilt: no runner is of this build, and spawning says what is wrong
    }
  }

  private learn(cli: string): void {
    if (this.modules.has(cli)) return;
    this.modules.add(cli);
    // Idle runners load it now, so that the next job finds it loaded.
    for (const runner of this.idle) runner.child.send({ type: 'preload', cli });
  }

  private spawn(): Runner {
    const output = new OutputFile(this.options.outputDir, 'runner', { append: true });
    let child: ChildProcess;
    const build = this.buildStamp();
    try {
      child = fork(RUNNER_MODULE(), [...this.modules], {
        detached: true,
        stdio: ['ignore', output.fd, output.fd, 'ipc'],
        execArgv: [],
        env: runnerEnv(),
      });
    } catch (error) {
      output.remove();
      throw error;
    }
    const runner: Runner = { child: child as ChildProcess & { pid: number }, output, jobs: 0, idleSince: Date.now(), build, current: null };
    this.runners.add(runner);
    child.on('message', (message: RunnerMessage) => {
      if (message.type !== 'done' || runner.current?.id !== message.id) return;
      // A job that outlived its time ends with its runner, even one that caught the SIGTERM.
      if (runner.current.finish(message.code, null)) return;
      runner.jobs++;
      if (this.stopped || runner.jobs >= this.options.maxJobs || message.rss >= this.options.maxRssBytes) {
        this.options.logger.debug(`runner ${runner.child.pid} leaves after ${runner.jobs} jobs (${Math.round(message.rss / 1e6)} MB)`);
        this.retire(runner);
        return;
      }
      runner.idleSince = Date.now();
      this.idle.push(runner);
    });
    child.once('exit', (code, signal) => {
      this.runners.delete(runner);
      const at = this.idle.indexOf(runner);
      if (at >= 0) this.idle.splice(at, 1);
      // Died under its job: the job ends as a process would. What the job's commands left
      // running is not reaped here but by the agent's next run (its turns are noted in the agent
      // directory), which the retry of the unanswered message starts.
      runner.current?.finish(code, signal);
      runner.output.remove();
      if (!this.stopped && this.idle.length < this.options.idleRunners) this.replenish();
    });
    child.on('error', (error) => this.options.logger.error(`runner ${child.pid}: ${error.message}`));
    return runner;
  }

  /** Keeps `idleRunners` waiting after one left; a failure to start one is logged, not thrown. */
  private replenish(): void {
    try {
      this.idle.push(this.spawn());
    } catch (error) {
      this.options.logger.error(`cannot start a runner: ${(error as Error).message}`);
    }
  }

  private retire(runner: Runner): void {
    const at = this.idle.indexOf(runner);
    if (at >= 0) this.idle.splice(at, 1);
    if (runner.child.connected) runner.child.send({ type: 'leave' });
    else if (!runner.current) killGroup(runner.child.pid, 'SIGTERM');
  }

  /** Idle runners beyond the ones kept warm leave once they have waited `idleTimeoutMs`. */
  private trim(): void {
    const now = Date.now();
    // Oldest first: the pool hands out the most recently used, so the others age out.
    for (const runner of [...this.idle]) {
      if (this.idle.length <= this.options.idleRunners) return;
      if (now - runner.idleSince >= this.options.idleTimeoutMs) this.retire(runner);
    }
  }
}

const RUNNER_MODULE = () => join(packageRoot(), 'dist', 'notifier', 'runner.js');

/** notifier's environment, less what marks a handler (a runner is none until it runs a job). */
function runnerEnv(): NodeJS.ProcessEnv {
  const { THECLAW_THREAD: _thread, THECLAW_CONSUMER: _consumer, ...env } = process.env;
  return env;
}

function definedOnly(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}
