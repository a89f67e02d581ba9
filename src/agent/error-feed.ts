import { formatAddress } from '../core/address.js';
import { errorFeedPath } from '../core/layout.js';
import { openThread } from '../thread/index.js';

/** One error of an agent, as the maintainer's feed has it (see theclaw/maintainer.ts). */
export interface FeedEntry {
  agent: string;
  thread: string;
  /** `llm` (the model failed), `turn`, `deliver`… (ErrorRecord.stage). */
  stage: string;
  kind: string;
  status: number | null;
  /** A few words of ours, never the provider's text. */
  reason: string;
}

/**
 * Appends an error to the feed the maintainer sweeps: one thread for every agent, so that the
 * sweep reads what is new since its last look instead of every agent's every thread. Written
 * only when a message gets no answer, so the answered path pays nothing. A failure to write it is
 * the caller's to log: the error is recorded in its own thread already.
 */
export function appendToErrorFeed(home: string, entry: FeedEntry): void {
  const feed = openThread(errorFeedPath(home), { home, create: true });
  try {
    feed.push({
      source: formatAddress({ kind: 'internal', conversationType: 'feed', conversationId: 'errors', agentId: entry.agent }),
      type: 'record',
      subtype: 'error',
      content: JSON.stringify(entry),
    });
  } finally {
    feed.close();
  }
}
