import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { joinCommand } from '../../core/command.js';
import { cliPath } from '../../core/package.js';
import { takeRequests, TIMER_PREFIX } from '../../core/turn-outbox.js';
import type { AgentDir } from '../agent-dir.js';
import { notifierTimer } from '../notifier-timers.js';
import { outboxDir } from '../policy/index.js';

/**
 * Reminders an agent sets for a conversation: `notifier timer add --message` in a turn's
 * command leaves a request in the conversation's outbox (core/turn-outbox.ts), and the runtime,
 * when the turn ends, sets a notifier timer whose command is ours, not the model's: `agent send`
 * to the agent itself in the name of the conversation that asked (its source address, taken from
 * the turn, never from the request). When it fires, the agent is told the message in that
 * conversation, under that conversation's policy, and its answer goes there.
 */

const TimerRequestSchema = z.strictObject({
  id: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,39}$/)),
  cron: z.optional(z.string()),
  every: z.optional(z.string()),
  at: z.optional(z.string()),
  message: z.string().check(z.minLength(1), z.maxLength(4000)),
});

/** The timer id of a conversation's reminder: the agent and the conversation in it, so no other can touch it. */
export function reminderTimerId(agent: string, conversation: string, id: string): string {
  const conv = createHash('sha256').update(conversation).digest('hex').slice(0, 8);
  return `r-${agent}-${conv}-${id}`.slice(0, 63);
}

/**
 * Sets the timers the turn's commands asked for, for the conversation `source` speaks for.
 * Returns what was set and what could not be (for the log); never throws.
 */
export async function setReminders(home: string, dir: AgentDir, conversation: string, source: string, env: NodeJS.ProcessEnv): Promise<{ set: string[]; problems: string[] }> {
  const taken = takeRequests(
    outboxDir(dir, conversation),
    (name) => name.startsWith(TIMER_PREFIX),
    (json) => TimerRequestSchema.parse(json),
  );
  const set: string[] = [];
  const problems = taken.problems.map((problem) => `notifier timer: ${problem}`);
  for (const { name, request } of taken.requests) {
    try {
      const id = reminderTimerId(dir.id, conversation, request.id);
      const setAt = new Date().toISOString().slice(0, 16).replace('T', ' ');
      const command = joinCommand([process.execPath, cliPath('agent'), 'send', dir.id, '--source', source, '--text', `[A reminder I set on ${setAt} UTC in this conversation] ${request.message}`]);
      const schedule = request.cron !== undefined ? ['--cron', request.cron] : request.every !== undefined ? ['--every', request.every] : ['--at', request.at ?? ''];
      await notifierTimer(home, ['add', '--id', id, ...schedule, '--command', command], env);
      set.push(id);
    } catch (error) {
      problems.push(`${name} was not set: ${(error as Error).message}`);
    }
  }
  return { set, problems };
}
