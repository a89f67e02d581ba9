import { pathToFileURL } from 'node:url';
import { loadProgram, runCli, type ProgramFactory } from '../core/cli.js';
import type { RunnerCommand, RunnerJob, RunnerMessage } from './runner-protocol.js';

/**
 * A warm runner (`dist/notifier/runner.js`), forked by notifier's runner pool: it runs handler
 * commands of this package's CLIs (`agent run`, `agent deliver`, ...) one after another in this
 * process, with their modules loaded once, instead of paying a Node start for each. A job is
 * what the command would have been: the same argv, its environment, its exit code; its output
 * goes to this process's stdout and stderr, a file the pool reads after each job.
 *
 * It leaves when the pool says so, or when notifier goes away (the IPC channel closes), after
 * the job under way: a handler is never cut off because its daemon restarted.
 */
const programs = new Map<string, Promise<ProgramFactory>>();
let busy = false;
let leaving = false;

function send(message: RunnerMessage): void {
  process.send?.(message);
}

/** The CLI module's program, imported once. */
function program(cli: string): Promise<ProgramFactory> {
  let load = programs.get(cli);
  if (!load) {
    load = loadProgram(pathToFileURL(cli).href);
    load.catch(() => {}); // the job that needs it reports the failure
    programs.set(cli, load);
  }
  return load;
}

async function runJob(job: RunnerJob): Promise<number> {
  const factory = await program(job.cli);
  // The job's environment is the process's while it runs, as it would be in its own process.
  for (const key of Object.keys(process.env)) delete process.env[key];
  Object.assign(process.env, job.env);
  process.exitCode = undefined;
  await runCli(factory(), [process.execPath, job.cli, ...job.args]);
  const code = Number(process.exitCode ?? 0);
  process.exitCode = undefined;
  return code;
}

process.on('message', (message: RunnerCommand) => {
  if (message.type === 'preload') {
    void program(message.cli);
    return;
  }
  if (message.type === 'leave') {
    leaving = true;
    if (!busy) process.exit(0);
    return;
  }
  busy = true;
  runJob(message)
    .then(
      (code) => send({ type: 'done', id: message.id, code, rss: process.memoryUsage.rss() }),
      (error: unknown) => {
        process.stderr.write(`runner: the job failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
        send({ type: 'done', id: message.id, code: 70, rss: process.memoryUsage.rss() });
      },
    )
    .finally(() => {
      busy = false;
      if (leaving || !process.connected) process.exit(0);
    });
});

process.on('disconnect', () => {
  leaving = true;
  if (!busy) process.exit(0);
});

// What jobs needed so far, loaded while the runner waits for its first.
for (const cli of process.argv.slice(2)) void program(cli);
send({ type: 'ready' });
