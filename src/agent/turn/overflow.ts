import type { Logger } from '../../core/logger.js';
import { isStorageError } from '../../core/storage-error.js';
import { ModelCallError, type ChatResult, type SessionLine } from '../../pai/index.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { compactIfNeeded, conversation, historyStart, type CompactionInput } from './compaction.js';
import type { Summarise } from '../accounting/index.js';
import { buildSystemPrompt, historyLines, type SystemPromptInput } from '../context.js';
import { warningRecord } from './failure.js';
import { recordTruncations, warnRefused } from '../memory/index.js';
import { estimateTokens } from '../tokens.js';
import type { AgentConfig, ToolcallRecord } from '../types.js';

/**
 * The context of one message and the model call with it, so that no context is too long to answer:
 * - each memory layer is cut to its cap (memory-caps.ts), with one warning per file version;
 * - the thread is compacted once it passes the threshold (compaction.ts), its lasting facts
 *   flushed to the person's or group's memory first (memory-flush.ts);
 * - when the provider still refuses the context as too long (`context_length`), the thread is
 *   compacted, below the threshold too, and the call made once more. Not when commands already
 *   ran for the message: the retry starts the turn over and would run them twice;
 * - a summary call that fails is recorded (`record/error`, stage `compaction`) and the message is
 *   answered all the same, with the newest messages that fit in place of a summary of the others.
 * A second refusal is thrown like any failed call: the caller records the message's error outcome.
 */
export interface WindowedCall {
  thread: StoredThread;
  /** The inbound message being answered. */
  currentId: number;
  /** Messages that joined its turn, whose words are in `input`: left out of the history. */
  joinedIds: readonly number[];
  input: string;
  prompt: SystemPromptInput;
  settings: AgentConfig['context'];
  contextWindow: number;
  mixedPeople: boolean;
  summarise: Summarise;
  /** The memory flush a compaction runs alongside its summary (memory-flush.ts); none: no flush. */
  flush?: CompactionInput['flush'];
  /** Removes secrets from the text of a record. */
  redact: (text: string) => string;
  logger: Logger;
  /** Runs the turn with this context (the history becomes its session). */
  call: (context: CallContext) => Promise<ChatResult>;
}

export interface CallContext {
  system: string;
  history: SessionLine[];
}

export async function callWithinWindow(turn: WindowedCall): Promise<ChatResult> {
  const context = await prepare(turn, false);
  try {
    return await turn.call(context);
  } catch (error) {
    if (!(error instanceof ModelCallError) || error.modelError.kind !== 'context_length' || (await commandsRan(turn))) throw error;
    turn.logger.warn(`run: the model found the context of event ${turn.currentId} too long; compacting and trying once more`);
    return await turn.call(await prepare(turn, true));
  }
}

async function prepare(turn: WindowedCall, overflowed: boolean): Promise<CallContext> {
  const { thread, settings } = turn;
  const before = await systemPrompt(turn);
  let afterId: number;
  let compacted = false;
  let failed = false;
  try {
    const result = await compactIfNeeded({
      thread,
      memoryDir: turn.prompt.dir.memory,
      summaryFile: turn.prompt.memory.thread,
      logger: turn.logger,
      currentId: turn.currentId,
      system: before,
      input: turn.input,
      contextWindow: turn.contextWindow,
      threshold: settings.compaction_threshold,
      recentMessages: settings.recent_messages,
      keepRecent: settings.keep_recent,
      mixedPeople: turn.mixedPeople,
      summarise: turn.summarise,
      flush: turn.flush,
      force: overflowed,
    });
    afterId = result.afterId;
    compacted = result.compacted !== null;
  } catch (error) {
    if (isStorageError(error)) throw error;
    await recordCompactionFailure(turn, error);
    afterId = await historyStart(thread);
    failed = true;
  }
  // Built again after a compaction, so that the summary it wrote is in it.
  const system = compacted ? await systemPrompt(turn) : before;
  // After a refusal the call carries no more than a compaction keeps; after a refusal or without
  // the summary, only the newest messages that fit the threshold's share of the window.
  let messages = (await recentMessages(thread, afterId, turn.currentId, overflowed ? settings.keep_recent : settings.recent_messages)).filter((event) => !turn.joinedIds.includes(event.id));
  if (overflowed || failed) messages = newestThatFit(messages, Math.floor(settings.compaction_threshold * turn.contextWindow) - estimateTokens(system, turn.input), turn.mixedPeople);
  return { system, history: historyLines(messages, turn.mixedPeople) };
}

async function systemPrompt(turn: WindowedCall): Promise<string> {
  const prompt = buildSystemPrompt(turn.prompt);
  prompt.refused.forEach(warnRefused(turn.logger));
  for (const truncation of await recordTruncations(turn.thread, prompt.truncated, turn.currentId)) {
    turn.logger.warn(`run: ${truncation.file} is about ${truncation.tokens} tokens, over its cap of ${truncation.cap} (context.memory_caps.${truncation.layer}); its middle is left out`);
  }
  return prompt.text;
}

/** The last `limit` messages of the conversation after `afterId`. */
async function recentMessages(thread: StoredThread, afterId: number, currentId: number, limit: number): Promise<ThreadEvent[]> {
  return (await conversation(thread, await thread.peek({ afterId, filter: "type = 'message'", last: limit + 1 }), currentId)).slice(-limit);
}

function newestThatFit(messages: readonly ThreadEvent[], budget: number, mixedPeople: boolean): ThreadEvent[] {
  let used = 0;
  let start = messages.length;
  while (start > 0) {
    used += estimateTokens(JSON.stringify(historyLines([messages[start - 1]!], mixedPeople)));
    if (used > budget) break;
    start--;
  }
  return messages.slice(start);
}

/** Commands ran for this message (their records follow it: a thread's messages are handled in order). */
async function commandsRan(turn: WindowedCall): Promise<boolean> {
  return (await turn.thread.peek({ afterId: turn.currentId, filter: "type = 'record' AND subtype = 'toolcall'" })).some(
    (event) => (JSON.parse(event.content) as ToolcallRecord).in_reply_to === turn.currentId,
  );
}

async function recordCompactionFailure(turn: WindowedCall, error: unknown): Promise<void> {
  const { record, message } = warningRecord(turn.currentId, 'compaction', 'the summary of the older messages failed, so the answer sees only the newest ones', error, turn.redact);
  // One per message: the retry after a refusal may fail to summarise again.
  await turn.thread.append([{ source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: `compaction-failed:${turn.currentId}` }]);
  turn.logger.warn(`run: compaction for event ${turn.currentId} failed (${message}); answering with the newest messages`);
}
