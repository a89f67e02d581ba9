import type { StoredThread } from '../../thread/index.js';
import type { UsageRecord } from '../types.js';

/** Model calls of a thread summed up, from its `record/usage` events. */
export interface UsageTotals {
  calls: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
}

export const NO_USAGE: UsageTotals = { calls: 0, input_tokens: 0, output_tokens: 0, cost: 0 };

/** One usage record as totals (one call), or null for a record that does not hold the figures. */
export function usageOfRecord(content: string): UsageTotals | null {
  try {
    const { input_tokens, output_tokens, cost } = JSON.parse(content) as Partial<UsageRecord>;
    const numbers = [input_tokens, output_tokens, cost];
    return numbers.every((n) => typeof n === 'number' && Number.isFinite(n)) ? { calls: 1, input_tokens: input_tokens!, output_tokens: output_tokens!, cost: cost! } : null;
  } catch {
    return null;
  }
}

/** Two totals added up. */
export function plusUsage(a: UsageTotals, b: UsageTotals): UsageTotals {
  return { calls: a.calls + b.calls, input_tokens: a.input_tokens + b.input_tokens, output_tokens: a.output_tokens + b.output_tokens, cost: a.cost + b.cost };
}

/** The thread's usage, from `since` (an ISO time or day, UTC) when given; `upkeep`: of the runtime's upkeep calls alone. */
export async function threadUsage(thread: StoredThread, since?: string, upkeep = false): Promise<UsageTotals> {
  // Filters take only literals; `since` is an ISO date the caller made, never a person's text.
  const filter = `type = 'record' AND subtype = 'usage'${since === undefined ? '' : ` AND created_at >= '${since}'`}`;
  let totals = NO_USAGE;
  for (const event of await thread.peek({ filter, limit: 1_000_000 })) {
    const record = usageOfRecord(event.content);
    if (record && (!upkeep || isUpkeep(event.content))) totals = plusUsage(totals, record);
  }
  return totals;
}

function isUpkeep(content: string): boolean {
  return (JSON.parse(content) as Partial<UsageRecord>).purpose !== undefined;
}

/** `3 calls, 1,234 in + 56 out tokens, $0.0012` */
export function describeUsage(totals: UsageTotals): string {
  const count = (n: number) => n.toLocaleString('en-US');
  return `${count(totals.calls)} model call${totals.calls === 1 ? '' : 's'}, ${count(totals.input_tokens)} in + ${count(totals.output_tokens)} out tokens, $${totals.cost.toFixed(4)}`;
}
