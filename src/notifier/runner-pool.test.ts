import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { joinCommand } from '../core/command.js';
import { createLogger } from '../core/logger.js';
import { cliPath } from '../core/package.js';
import { isAlive } from '../core/process.js';
import { createTestHome, waitFor, type TestHome } from '../testing/index.js';
import type { RunLimits, SupervisedRun } from './run.js';
import { RunnerPool, type RunnerPoolOptions } from './runner-pool.js';

// Real runner processes (dist/notifier/runner.js) running the real built CLIs as jobs.

let t: TestHome;
let pool: RunnerPool | undefined;
const limits: RunLimits = { timeoutMs: 20_000, outputLimitBytes: 16_384 };

beforeEach(() => {
  t = createTestHome();
});

afterEach(() => {
  pool?.stop();
  pool = undefined;
  t.cleanup();
});

function startPool(options: Partial<RunnerPoolOptions> = {}): RunnerPool {
  const outputDir = join(t.home, 'run', 'notifier-output');
  mkdirSync(outputDir, { recursive: true });
  pool = new RunnerPool({ outputDir, logger: createLogger(join(t.home, 'pool.log')), idleRunners: 1, maxJobs: 100, maxRssBytes: 1e9, idleTimeoutMs: 60_000, ...options });
  return pool;
}

function job(tool: 'thread' | 'pai', args: string[], env: NodeJS.ProcessEnv = t.env, runLimits = limits): SupervisedRun {
  const command = RunnerPool.warmCommand(joinCommand([process.execPath, cliPath(tool), ...args]));
  expect(command).not.toBeNull();
  const launched = pool!.run(command!, env, runLimits);
  if (!launched.ok) throw new Error(launched.error);
  return launched.run;
}

describe('RunnerPool', () => {
  it("takes only this package's CLIs run by this Node", () => {
    expect(RunnerPool.warmCommand(joinCommand([process.execPath, cliPath('agent'), 'run', 'admin']))).toEqual({ cli: cliPath('agent'), args: ['run', 'admin'] });
    expect(RunnerPool.warmCommand(joinCommand(['node', cliPath('agent'), 'run', 'admin']))).toBeNull();
    expect(RunnerPool.warmCommand(joinCommand([process.execPath, '/elsewhere/dist/agent/cli.js', 'run']))).toBeNull();
    expect(RunnerPool.warmCommand(joinCommand([process.execPath, join(cliPath('agent'), '..', '..', 'notifier', 'runner.js')]))).toBeNull();
    expect(RunnerPool.warmCommand('sleep 1')).toBeNull();
    expect(RunnerPool.warmCommand("unclosed 'quote")).toBeNull();
  });

  it('runs jobs one after another in one warm process, each with its own arguments, environment, output and exit code', async () => {
    startPool();
    const dir = join(t.home, 'work');
    const first = job('thread', ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--content', 'hello'], { ...t.env, THECLAW_LOG_LEVEL: 'error' });
    // The thread does not exist: `push` refuses, exit 1, and says so on its output.
    expect(await first.outcome).toMatchObject({ code: 1, timedOut: false, output: expect.stringMatching(/^Error: .* - /m) });

    const init = job('thread', ['init', dir]);
    expect(await init.outcome).toMatchObject({ code: 0, timedOut: false });
    expect(init.pid).toBe(first.pid);

    const push = job('thread', ['push', '--thread', dir, '--source', 'self', '--type', 'message', '--content', 'hello']);
    expect(await push.outcome).toMatchObject({ code: 0, output: '1\n' });
    // Another home for this job only: the environment is the job's, not the runner's.
    const other = createTestHome();
    try {
      const peek = job('thread', ['peek', '--thread', join(other.home, 'none'), '--json'], other.env);
      expect((await peek.outcome).code).toBe(1);
      expect(peek.pid).toBe(first.pid);
    } finally {
      other.cleanup();
    }
    expect(pool!.size).toBe(1);
  });

  it('kills a job past its time with its runner, and runs the next job in a new runner', async () => {
    // A model server that takes the request and never answers.
    const sockets: Socket[] = [];
    const server: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      mkdirSync(join(t.home, 'pai'), { recursive: true });
      writeFileSync(
        join(t.home, 'pai', 'config.yaml'),
        `providers:\n  slow: { api: openai-completions, base_url: "http://127.0.0.1:${port}/v1", models: [{ id: m, context_window: 8000, max_output_tokens: 100 }] }\ntimeout_seconds: 60\n`,
      );
      startPool();
      const stuck = job('pai', ['chat', '--provider', 'slow', '--model', 'm', '--no-tools', 'hi'], t.env, { ...limits, timeoutMs: 1_000 });
      const ended = await stuck.outcome;
      expect(ended.timedOut).toBe(true);
      await waitFor(() => !isAlive({ pid: stuck.pid, start: null }), 'the runner to be gone', 10_000);
      const next = job('thread', ['init', join(t.home, 'after')]);
      expect(await next.outcome, (await next.outcome).output).toMatchObject({ code: 0 });
      expect(next.pid).not.toBe(stuck.pid);
    } finally {
      for (const socket of sockets) socket.destroy();
      server.close();
    }
  });

  it('replaces a runner after max_jobs, and leaves no output files behind once stopped', async () => {
    startPool({ maxJobs: 2 });
    const pids: number[] = [];
    for (let i = 0; i < 4; i++) {
      const run = job('thread', ['init', join(t.home, `t${i}`)]);
      expect((await run.outcome).code).toBe(0);
      pids.push(run.pid);
    }
    expect(pids[0]).toBe(pids[1]);
    expect(pids[2]).toBe(pids[3]);
    expect(pids[2]).not.toBe(pids[0]);
    pool!.stop();
    await waitFor(() => pids.every((pid) => !isAlive({ pid, start: null })), 'the runners to leave', 10_000);
    await waitFor(() => readdirSync(join(t.home, 'run', 'notifier-output')).length === 0, 'no output files left', 10_000);
  });

  it('runs a job in a new runner once dist/ was built again, instead of one that loaded the old build', async () => {
    let build = 1;
    startPool({ buildStamp: () => build });
    const first = job('thread', ['init', join(t.home, 'before')]);
    expect((await first.outcome).code).toBe(0);
    build = 2; // an upgrade rebuilt dist/ while notifier ran
    const next = job('thread', ['init', join(t.home, 'after')]);
    expect((await next.outcome).code).toBe(0);
    expect(next.pid).not.toBe(first.pid);
    await waitFor(() => !isAlive({ pid: first.pid, start: null }), 'the old runner to leave', 10_000);
    const again = job('thread', ['init', join(t.home, 'again')]);
    expect((await again.outcome).code).toBe(0);
    expect(again.pid).toBe(next.pid);
  });
});
