import { resolveHomeRef } from '../../core/layout.js';
import { hasAgentThread, openAgentThread } from '../threads.js';
import { deliverOne } from './deliver.js';
import { forgetGivenUp, givenUpReplies } from './given-up.js';
import { findSender } from './sender.js';

/** What `theclaw retry` did with a reply delivery had given up on. */
export interface ResentReply {
  agent: string;
  /** The conversation thread, relative to the home. */
  thread: string;
  event_id: number;
  /** `sent`; `failed` (kept for the next retry, with why); `gone`: its thread no longer has it. */
  outcome: 'sent' | 'failed' | 'gone';
  error?: string;
}

/**
 * Sends again every reply delivery gave up on, now, the way `agent deliver` sends it — with the
 * same idempotency key, so one that did reach the platform before is not sent twice. A reply sent
 * (or gone) is forgotten; one that fails again is kept for the next retry.
 */
export async function resendGivenUp(home: string, env: NodeJS.ProcessEnv = process.env): Promise<ResentReply[]> {
  const outcomes: ResentReply[] = [];
  for (const { agent, state, reply } of givenUpReplies(home)) {
    const base = { agent, thread: reply.thread, event_id: reply.event_id };
    const path = resolveHomeRef(home, reply.thread);
    const thread = (await hasAgentThread(home, path, env)) ? await openAgentThread(home, path, {}, env) : null;
    try {
      const event = (await thread?.peek({ afterId: reply.event_id - 1, limit: 1 }))?.find((e) => e.id === reply.event_id);
      if (!thread || !event) {
        outcomes.push({ ...base, outcome: 'gone' });
        forgetGivenUp(state, reply);
        continue;
      }
      const waiting = await deliverOne(home, await findSender(home, agent, env), thread, event, env);
      if (waiting) {
        outcomes.push({ ...base, outcome: 'failed', error: waiting });
        continue;
      }
      forgetGivenUp(state, reply);
      outcomes.push({ ...base, outcome: 'sent' });
    } catch (error) {
      outcomes.push({ ...base, outcome: 'failed', error: error instanceof Error ? error.message : String(error) });
    } finally {
      await thread?.close();
    }
  }
  return outcomes;
}
