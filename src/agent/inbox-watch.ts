import type { Logger } from '../core/logger.js';
import type { StoredThread, ThreadEvent } from '../thread/index.js';
import { INBOX_FILTER } from './lifecycle.js';

export interface InboxWatchOptions {
  /** Messages after this id are seen: the batch's own, and what comes while the run goes on. */
  afterId: number;
  /** Called once for each message, in inbox order. */
  onMessage: (event: ThreadEvent) => void | Promise<void>;
  logger: Logger;
  /** Default: 250 ms. */
  intervalMs?: number;
}

export interface InboxWatch {
  /** Reads what came since the last look, now (after the look under way, if one is). */
  look(): Promise<void>;
  close(): void;
}

const PAGE = 200;

/**
 * A run watches its inbox while it runs: for `/stop` (turn-stop.ts), and for messages that join
 * the run (conversation-queue.ts). It reads every `intervalMs`, and whenever `look` is called.
 * The first look happens before this resolves, so what is in the batch is seen before any turn
 * begins.
 */
export async function watchInbox(inbox: StoredThread, options: InboxWatchOptions): Promise<InboxWatch> {
  let cursor = options.afterId;
  const read = async () => {
    try {
      for (;;) {
        const events = await inbox.peek({ afterId: cursor, filter: INBOX_FILTER, limit: PAGE });
        for (const event of events) {
          cursor = event.id;
          await options.onMessage(event);
        }
        if (events.length < PAGE) return;
      }
    } catch (error) {
      // A busy or failing disk: the next look tries again; the turns go on meanwhile.
      options.logger.warn(`run: reading the inbox while the run goes on failed: ${(error as Error).message}`);
    }
  };
  // One look at a time, in order: each reads on from where the one before it ended.
  let looking: Promise<void> = Promise.resolve();
  const look = () => {
    looking = looking.then(read);
    return looking;
  };
  await look();
  const timer = setInterval(look, options.intervalMs ?? 250);
  timer.unref();
  return { look, close: () => clearInterval(timer) };
}
