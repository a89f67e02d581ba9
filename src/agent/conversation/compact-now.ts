import { basename } from 'node:path';
import type { Logger } from '../../core/logger.js';
import type { StoredThread } from '../../thread/index.js';
import type { Summarise } from '../accounting/index.js';
import { compactIfNeeded } from '../turn/index.js';
import type { AgentConfig } from '../types.js';

export interface CompactNow {
  thread: StoredThread;
  memoryDir: string;
  summaryFile: string;
  /** The `/compact` command's event: not part of what is compacted. */
  commandId: number;
  context: AgentConfig['context'];
  contextWindow: number;
  mixedPeople: boolean;
  summarise: Summarise;
  logger: Logger;
  /** What the person asked the summary to keep or leave out; '' for none. */
  instructions: string;
}

/**
 * `/compact [instructions]`: folds the conversation into its running summary now, as a compaction
 * at the threshold would (keeping the last `keep_recent` messages), with the person's instructions
 * given to the summariser after its own.
 */
export async function compactNow(args: CompactNow): Promise<string> {
  const { instructions } = args;
  const summarise: Summarise = instructions ? (system, input) => args.summarise(`${system}\nThe person also asked of this summary: ${instructions}`, input) : args.summarise;
  const result = await compactIfNeeded({
    thread: args.thread,
    memoryDir: args.memoryDir,
    summaryFile: args.summaryFile,
    logger: args.logger,
    currentId: args.commandId,
    system: '',
    input: '',
    contextWindow: args.contextWindow,
    threshold: args.context.compaction_threshold,
    recentMessages: args.context.recent_messages,
    keepRecent: args.context.keep_recent,
    mixedPeople: args.mixedPeople,
    summarise,
    force: true,
  });
  const { compacted } = result;
  if (compacted === null) return `Nothing to compact: the conversation is no longer than the ${args.context.keep_recent} messages kept as they are.`;
  const kept = args.context.keep_recent;
  return `Compacted the conversation up to its last ${kept === 1 ? 'message' : `${kept} messages`} into its summary (memory/${basename(args.summaryFile)}, ${compacted.summary_chars} characters).`;
}
