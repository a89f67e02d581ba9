import { relative } from 'node:path';
import { agentDir, listAgentIds } from '../agent/agent-dir.js';
import { INBOX_CONSUMER } from '../agent/lifecycle.js';
import { readOutage } from '../agent/turn/outage.js';
import type { ErrorRecord } from '../agent/index.js';
import { subscribedPath } from '../notifier/control.js';
import type { SubscriptionStatus } from '../notifier/index.js';
import { forEachAgentThread, newestFirst, type AgentDamage } from './agent-threads.js';

/**
 * What went wrong lately, for `theclaw status` and `doctor`: agents whose messages wait for an
 * unavailable model (failure.ts leaves them in the inbox; notifier retries), and the newest
 * error records (messages that got an error notice instead of an answer, replies given up on).
 */
export interface ModelWait {
  agent: string;
  /** Inbox messages not handled yet. */
  pending: number;
  /** When the model was first found unavailable. */
  since: string;
  kind: string;
  status: number | null;
  /** What went wrong (its first line). */
  error: string;
  /** When notifier runs the agent again (null: now, or notifier does not know). */
  retry_at: string | null;
}

export interface RecentError {
  agent: string;
  /** The thread, relative to the agent's directory. */
  thread: string;
  id: number;
  created_at: string;
  stage: string;
  kind: string | null;
  status: number | null;
  /** What went wrong (its first line). */
  error: string;
}

/** Agents that have messages waiting and whose last run found the model unavailable. */
export function modelWaits(home: string, subscriptions: readonly SubscriptionStatus[]): ModelWait[] {
  return listAgentIds(home).flatMap((id): ModelWait[] => {
    const dir = agentDir(home, id);
    const outage = readOutage(dir);
    const inbox = subscriptions.find((sub) => subscribedPath(home, sub) === dir.inbox && sub.consumer === INBOX_CONSUMER);
    if (!outage || !inbox || inbox.pending === 0) return [];
    return [{ agent: id, pending: inbox.pending, since: outage.since, kind: outage.kind, status: outage.status, error: firstLine(outage.error), retry_at: inbox.retry_at }];
  });
}

/**
 * The newest `limit` error records over every conversation of every agent, newest first. A damaged
 * conversation is left out and added to `damaged`.
 */
export async function recentErrors(home: string, limit: number, damaged?: AgentDamage[], env: NodeJS.ProcessEnv = process.env): Promise<RecentError[]> {
  const found: RecentError[] = [];
  await forEachAgentThread(
    home,
    { inbox: false },
    async ({ agent, dir, path, thread }) => {
      for (const event of await thread.peek({ filter: "type = 'record' AND subtype = 'error'", last: limit })) {
        const record = parseRecord(event.content);
        found.push({
          agent,
          thread: relative(dir.root, path),
          id: event.id,
          created_at: event.created_at,
          stage: record.stage ?? 'unknown',
          kind: record.kind ?? null,
          status: record.status ?? null,
          error: firstLine(record.error ?? event.content),
        });
      }
    },
    damaged,
    env,
  );
  return found.sort((a, b) => newestFirst(a.created_at, b.created_at)).slice(0, limit);
}

function parseRecord(content: string): Partial<ErrorRecord> {
  try {
    const value = JSON.parse(content) as unknown;
    return value && typeof value === 'object' ? (value as Partial<ErrorRecord>) : {};
  } catch {
    return {};
  }
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? '';
}
