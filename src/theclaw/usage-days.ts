import { NO_USAGE, plusUsage, usageOfRecord } from '../agent/accounting/usage.js';
import type { StoredThread } from '../thread/index.js';
import type { SpendDay } from '../xgw/index.js';
import { forEachAgentThread, newestFirst } from './agent-threads.js';

/** Model usage per agent per day, from the usage records of every agent's threads: the status page's and the control page's. */

/** One agent's model calls on one UTC day: the control page's type (xgw's, which the page is built against). */
export type UsageDay = SpendDay;

/** Model usage per agent per day over the last `days` (today included), newest first: the control page's spend. */
export async function usagePerDay(home: string, days: number, now = new Date()): Promise<UsageDay[]> {
  const usage = new UsageByDay(days, now);
  await forEachAgentThread(home, { inbox: true }, ({ agent, thread }) => usage.add(agent, thread));
  return usage.days();
}

/** Usage records summed per agent and UTC day, from `days` ago on. */
export class UsageByDay {
  private readonly since: string;
  private readonly sums = new Map<string, UsageDay>();

  constructor(days: number, now: Date) {
    this.since = new Date(now.getTime() - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  }

  async add(agent: string, thread: StoredThread): Promise<void> {
    // Filters take only literals, and `since` is a date this code made.
    for (const event of await thread.peek({ filter: `type = 'record' AND subtype = 'usage' AND created_at >= '${this.since}'`, limit: 1_000_000 })) {
      const record = usageOfRecord(event.content);
      if (!record) continue;
      const day = event.created_at.slice(0, 10);
      const key = `${agent}\n${day}`;
      const entry = this.sums.get(key) ?? { agent, day, ...NO_USAGE };
      this.sums.set(key, { ...entry, ...plusUsage(entry, record) });
    }
  }

  days(): UsageDay[] {
    return [...this.sums.values()].sort((a, b) => newestFirst(a.day, b.day) || a.agent.localeCompare(b.agent));
  }
}
