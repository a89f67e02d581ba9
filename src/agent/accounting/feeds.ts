import * as z from 'zod/mini';
import { formatAddress } from '../../core/address.js';
import { feedPath, type FeedName } from '../../core/layout.js';
import type { Logger } from '../../core/logger.js';
import type { StoredThread } from '../../thread/index.js';
import { openAgentThread, push } from '../threads.js';

/** One error of an agent, as the maintainer's feed has it (see theclaw/maintainer.ts). */
export const ErrorFeedEntrySchema = z.object({
  agent: z.string(),
  thread: z.string(),
  /** `llm` (the model failed), `turn`, `deliver`… (ErrorRecord.stage). */
  stage: z.string(),
  kind: z.string(),
  status: z.nullable(z.number()),
  /** A few words of ours, never the provider's text. */
  reason: z.string(),
});
export type ErrorFeedEntry = z.output<typeof ErrorFeedEntrySchema>;

/** One command a turn ran or was refused, as the warden's feed has it (see theclaw/warden.ts). */
export const ToolcallFeedEntrySchema = z.object({
  agent: z.string(),
  /** The conversation's thread id, and the id of the toolcall record there. */
  thread: z.string(),
  event: z.number(),
  /** As the model wrote it, with the secret values the runtime knows of removed. */
  command: z.string(),
  /** 126: refused (by the policy, or the owner); it did not run. */
  exit_code: z.number(),
});
export type ToolcallFeedEntry = z.output<typeof ToolcallFeedEntrySchema>;

/**
 * Appends to the feeds (core/layout.ts) in an agent's name. A feed is opened on its first entry
 * and kept open until `close`: closing a thread after a write checkpoints its WAL, some 10 ms,
 * which a turn running many commands would pay for each. An entry that cannot be written is the
 * caller's to log: the feeds are a copy of what the agent's own threads record.
 */
export class FeedWriter {
  private readonly open = new Map<FeedName, Promise<StoredThread>>();

  constructor(
    private readonly home: string,
    private readonly agent: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  async append(feed: FeedName, subtype: string, entry: object, idempotencyKey?: string): Promise<void> {
    let opening = this.open.get(feed);
    if (!opening) {
      opening = openAgentThread(this.home, feedPath(this.home, feed), { create: true }, this.env);
      this.open.set(feed, opening);
      opening.catch(() => this.open.delete(feed)); // the next entry tries again
    }
    await push(await opening, {
      source: formatAddress({ kind: 'internal', conversationType: 'feed', conversationId: feed, agentId: this.agent }),
      type: 'record',
      subtype,
      content: JSON.stringify(entry),
      idempotency_key: idempotencyKey,
    });
  }

  async close(): Promise<void> {
    const open = [...this.open.values()];
    this.open.clear();
    await Promise.all(open.map(async (opening) => (await opening.catch(() => null))?.close()));
  }
}

/**
 * A feed entry written in passing, for a turn or a beat: one that cannot be written is logged and
 * the work goes on (its own thread has the record; the feed is the sweep's copy).
 */
export function feedCopier(feeds: FeedWriter, logger: Logger, who: string): (feed: FeedName, subtype: string, entry: object) => void {
  return (feed, subtype, entry) => {
    feeds.append(feed, subtype, entry).catch((feedError: unknown) => {
      logger.warn(`${who}: the ${subtype} could not go to the feed ${feed}: ${(feedError as Error).message}`);
    });
  };
}
