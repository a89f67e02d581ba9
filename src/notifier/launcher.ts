import type { Launcher } from '../thread/index.js';
import { OutputFile, spawnRun, type RunLimits, type SupervisedRun } from './run.js';
import { RunnerPool } from './runner-pool.js';

/** Starts a command of the given kind (`handler`, `timer-<id>`): the name of its output file. */
export type CommandLauncher = (name: string) => Launcher<SupervisedRun>;

/**
 * Handlers and timer commands that run this package's CLIs go to a warm runner when there is a
 * pool; everything else runs in a process of its own. A start that fails (no room for the
 * output file, no program) is reported as such, never thrown, so no lease is left taken.
 * `options` is read at each launch: a reload replaces its pool and limits.
 */
export function createLauncher(options: { outputDir: string; limits: RunLimits; pool: RunnerPool | null }): CommandLauncher {
  return (name) => (command, env) => {
    const warm = options.pool ? RunnerPool.warmCommand(command) : null;
    if (warm && options.pool) return options.pool.run(warm, env, options.limits);
    let output: OutputFile;
    try {
      output = new OutputFile(options.outputDir, name);
    } catch (error) {
      return { ok: false, error: `cannot create its output file: ${(error as Error).message}` };
    }
    return spawnRun(command, env, output, options.limits);
  };
}
