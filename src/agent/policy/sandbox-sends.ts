import * as z from 'zod/mini';
import { ClawError } from '../../core/errors.js';
import { leaveRequest, OUTBOX_ENV, outboxIn, takeRequests, TASK_PREFIX, TIMER_PREFIX } from '../../core/turn-outbox.js';
import { requireAgent, type AgentDir } from '../agent-dir.js';
import { sendToAgent, type SendOptions } from '../send.js';

/**
 * `agent send` from inside a sandbox. Another agent's inbox is out of reach there (a command
 * that could write in it could also plant a link there that the daemons would follow), so the
 * message is left in the conversation's outbox, the one directory outside its own the sandbox
 * may write in, and the runtime, outside the sandbox, pushes it once the call has ended: in the
 * name of the conversation that ran the command, whatever the file says, so a command can
 * neither pose as someone else nor reach a thread.
 */

export { OUTBOX_ENV };
/** Requests in the outbox that are files for the turn's answer (reply-files.ts), not messages. */
export const ATTACH_PREFIX = 'attach-';

const SendRequestSchema = z.strictObject({ to: z.string(), text: z.string(), idempotency_key: z.optional(z.string()) });
type SendRequest = z.infer<typeof SendRequestSchema>;

/** One conversation's outbox (core/turn-outbox.ts). */
export function outboxDir(dir: AgentDir, conversation: string): string {
  return outboxIn(dir.root, conversation);
}

/** Inside the sandbox: checks what can be checked there, and leaves the message (whole or not at all). */
export function queueSend(home: string, id: string, options: Pick<SendOptions, 'text' | 'source' | 'idempotencyKey'>, outbox: string, env: NodeJS.ProcessEnv = process.env): void {
  if (options.source !== undefined) {
    throw new ClawError('usage', '--source cannot be given inside the sandbox', { suggestion: 'leave it out: the message goes in the name of this conversation' });
  }
  requireAgent(home, id);
  if (id === env.THECLAW_AGENT) throw new ClawError('usage', `agent ${id} cannot send to itself`, { suggestion: 'send to another agent' });
  const request: SendRequest = { to: id, text: options.text, ...(options.idempotencyKey ? { idempotency_key: options.idempotencyKey } : {}) };
  leaveRequest(outbox, '', request);
}

/**
 * Outside the sandbox, after a call: pushes what it queued, oldest first, with `env` (the
 * conversation's THECLAW_AGENT, THECLAW_CONVERSATION, THECLAW_ASKING_EVENT), and empties the
 * outbox. Returns what could not be sent, for the command's result.
 */
export async function forwardSends(home: string, outbox: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  // Attachments (reply-files.ts) wait for the turn's answer, timers for its end (reminders.ts);
  // tasks are started by tasks.ts.
  const taken = takeRequests(
    outbox,
    (name) => !name.startsWith(ATTACH_PREFIX) && !name.startsWith(TIMER_PREFIX) && !name.startsWith(TASK_PREFIX),
    (json) => SendRequestSchema.parse(json),
  );
  const problems = taken.problems.map((problem) => `agent send: ${problem}`);
  for (const { name, request } of taken.requests) {
    try {
      await sendToAgent(home, request.to, { text: request.text, idempotencyKey: request.idempotency_key, env });
    } catch (error) {
      problems.push(`agent send: ${name} was not sent: ${(error as Error).message}`);
    }
  }
  return problems;
}
