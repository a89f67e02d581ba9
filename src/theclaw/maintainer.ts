import { ErrorFeedEntrySchema, HEARTBEAT_THREAD_ID, REPORTS_AGENT, tellOwnerOf, type ErrorFeedEntry } from '../agent/index.js';
import { incidentsPath } from '../core/layout.js';
import { Incidents, readFeed } from './feed-sweep.js';

/**
 * The maintainer's sweep (`theclaw maintain`, on a notifier timer `theclaw up` registers): reads
 * what the agents appended to the error feed since its last sweep, groups it into incidents (one
 * agent, one kind of failure, one HTTP status, while it keeps happening within an hour), and
 * tells the owner once per incident, in their direct chat with admin — in words of its own, with
 * no model call: the model failing is exactly what it reports. Later errors of an open incident
 * are counted, not reported again.
 */
export interface SweepResult {
  read: number;
  reported: string[];
}

export async function sweep(home: string): Promise<SweepResult> {
  const incidents = new Incidents(incidentsPath(home, 'maintainer'));
  const reported: string[] = [];
  try {
    // Told before the entry is acknowledged (readFeed); a tell has its key, and is told once.
    const { read } = await readFeed(home, 'errors', 'maintainer', ErrorFeedEntrySchema, async (entry, event) => {
      const text = reportText(entry, event.created_at);
      await incidents.occur(`${entry.agent}|${entry.stage}|${entry.kind}|${entry.status ?? ''}`, event.created_at, async () => {
        if (await tellOwnerOf(home, REPORTS_AGENT, text, 'error', `maintainer:${event.id}`)) reported.push(text);
      });
    });
    return { read, reported };
  } finally {
    incidents.close();
  }
}

/** What the owner reads: what happened, where, since when, and what to do. */
export function reportText(entry: ErrorFeedEntry, at: string): string {
  if (entry.stage === 'deliver') {
    const refused = entry.status === null ? '' : ` (the channel answered ${entry.status})`;
    return `maintainer: ${entry.agent} could not deliver a reply (conversation ${entry.thread}): ${entry.reason}${refused}. To send it again once the channel takes it, run: theclaw retry. See: theclaw logs ${entry.agent} --since 1h. (first at ${at.slice(11, 19)} UTC; I report this once while it goes on.)`;
  }
  const fix =
    entry.kind === 'auth'
      ? 'Check the provider key (its variable in the environment of theclaw up, or pai/config.yaml), then run: theclaw doctor.'
      : entry.kind === 'over_budget'
        ? `Raise budget in agents/${entry.agent}/config.yaml, or wait for tomorrow (UTC).`
        : `See: theclaw logs ${entry.agent} --since 1h, and run: theclaw doctor.`;
  // A heartbeat and the evolver's reflection on an agent's day are no message.
  const what =
    entry.thread === HEARTBEAT_THREAD_ID ? 'run its heartbeat' : entry.stage === 'reflection' ? `make its daily reflection on ${entry.thread}` : `answer a message (conversation ${entry.thread})`;
  return `maintainer: ${entry.agent} could not ${what}: ${entry.reason}. ${fix} (first at ${at.slice(11, 19)} UTC; I report this once while it goes on.)`;
}
