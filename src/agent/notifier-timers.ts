import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { ClawError } from '../core/errors.js';
import { cliPath } from '../core/package.js';

/**
 * `notifier timer …` as a process: the agent tool does not import notifier (the tools'
 * direction), it runs its command line, which works whether the daemon runs or not (timers are
 * stored in its timers.db, and a running daemon is told). Never in a turn's name: the variables
 * that mark a turn are cleared, so notifier takes a command timer rather than a reminder request.
 * Returns what it printed; a failure is an `io` error with notifier's own words.
 */
export async function notifierTimer(home: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [cliPath('notifier'), 'timer', ...args], timerOptions(home, env));
    return stdout;
  } catch (error) {
    throw timerError(args, error);
  }
}

/** The same, blocking: for a step that cannot wait (a sandboxed call's `afterCall`). */
export function notifierTimerSync(home: string, args: string[], env: NodeJS.ProcessEnv): string {
  try {
    return execFileSync(process.execPath, [cliPath('notifier'), 'timer', ...args], { ...timerOptions(home, env), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    throw timerError(args, error);
  }
}

function timerOptions(home: string, env: NodeJS.ProcessEnv) {
  return { env: { ...env, THECLAW_HOME: home, THECLAW_OUTBOX: '', THECLAW_AGENT: '', THECLAW_CONVERSATION: '' }, timeout: 10_000 };
}

function timerError(args: string[], error: unknown): ClawError {
  const detail = String((error as { stderr?: string | Buffer }).stderr ?? '').trim() || (error as Error).message;
  return new ClawError('io', `notifier timer ${args[0]}: ${detail.replace(/^Error: /, '')}`, { suggestion: 'see: notifier timer list, and theclaw doctor', cause: error });
}
