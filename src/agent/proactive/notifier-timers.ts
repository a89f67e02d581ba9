import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ClawError } from '../../core/errors.js';
import { cliPath } from '../../core/package.js';

/**
 * `notifier timer …` as a process: the agent tool does not import notifier (the tools'
 * direction), it runs its command line, which works whether the daemon runs or not (timers are
 * stored in its timers.db, and a running daemon is told). Never in a turn's name: the variables
 * that mark a turn are cleared, so notifier takes a command timer rather than a reminder request.
 * Returns what it printed; a failure is an `io` error with notifier's own words.
 */
export async function notifierTimer(home: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [cliPath('notifier'), 'timer', ...args], {
      env: { ...env, THECLAW_HOME: home, THECLAW_OUTBOX: '', THECLAW_AGENT: '', THECLAW_CONVERSATION: '' },
      timeout: 10_000,
    });
    return stdout;
  } catch (error) {
    const detail = (error as { stderr?: string }).stderr?.trim() || (error as Error).message;
    throw new ClawError('io', `notifier timer ${args[0]}: ${detail.replace(/^Error: /, '')}`, { suggestion: 'see: notifier timer list, and theclaw doctor', cause: error });
  }
}
