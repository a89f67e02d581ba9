import { join } from 'node:path';
import { kindContained, renameContained } from '../../core/contained-fs.js';
import type { Logger } from '../../core/logger.js';
import { isStorageError } from '../../core/storage-error.js';
import type { StoredThread } from '../../thread/index.js';
import { historyStart, readSummary, recordByKey, summariseTurns, uncompacted } from './compaction.js';
import type { Summarise } from '../accounting/index.js';
import { ARCHIVE_DIR, fileStamp, writeSummary } from '../memory/index.js';
import { CONVERSATIONS_DIR } from '../context.js';
import type { ResetRecord } from '../types.js';
import { push } from '../threads.js';

/**
 * `/new` and `/reset`: a fresh conversation in the same thread. The thread is not moved (notifier's
 * registry and the outbound subscription name its path) and keeps every old event; a
 * `record/reset` marks where the new conversation starts, and the history of later calls begins
 * after it (compaction.ts `historyStart`). The thread's running summary
 * (`memory/thread-<tid>.md`) is moved to `memory/archive/`, out of the prompt.
 *
 * `/new` first saves a summary of the old conversation (the running summary merged with the turns
 * since, by the compaction's summariser) to `memory/conversations/<tid>/<time>.md`, where the agent
 * can look it up later (the thread's prompt names that folder). Without a model it saves the
 * running summary as it is, and says so.
 */
export interface FreshConversationInput {
  command: 'new' | 'reset';
  thread: StoredThread;
  threadId: string;
  /** The agent's memory directory. */
  memoryDir: string;
  /** The thread's running summary file. */
  summaryFile: string;
  /** The command's event in the thread. */
  commandId: number;
  /** When the command was sent (ISO): names the saved files, the same on a retry after a crash. */
  sentAt: string;
  contextWindow: number;
  mixedPeople: boolean;
  /** The summariser; throws when the model cannot be used. */
  summarise: Summarise;
  redact: (text: string) => string;
  logger: Pick<Logger, 'warn'>;
}

/** Starts the fresh conversation and returns the reply to the command. */
export async function startFreshConversation(input: FreshConversationInput): Promise<string> {
  const { thread, command, commandId } = input;
  const key = `reset:${commandId}`;
  // Done before a crash: the record says what was saved, and the steps after it are repeated.
  let record = await recordByKey<ResetRecord>(thread, key);
  if (!record) {
    record = { to_id: commandId, command, summary_file: null, ...(command === 'new' ? await saveSummary(input) : {}) };
    await push(thread, { source: 'self', type: 'record', subtype: 'reset', content: JSON.stringify(record), idempotency_key: key });
  }
  // A link a command left in its place moves as itself: nothing reads through it.
  if (kindContained(input.memoryDir, input.summaryFile) !== null) {
    renameContained(input.memoryDir, input.summaryFile, join(input.memoryDir, ARCHIVE_DIR, `thread-${input.threadId}-${fileStamp(input.sentAt)}.md`));
  }
  return replyFor(record);
}

async function saveSummary(input: FreshConversationInput): Promise<Pick<ResetRecord, 'summary_file' | 'summary_error'>> {
  const previous = readSummary(input.memoryDir, input.summaryFile, input.logger);
  const turns = (await uncompacted(input.thread, await historyStart(input.thread), input.commandId)).filter((event) => event.id < input.commandId);
  if (!previous && turns.length === 0) return { summary_file: null };
  const file = join(CONVERSATIONS_DIR, input.threadId, `${fileStamp(input.sentAt)}.md`);
  const path = join(input.memoryDir, file);
  let summary: string;
  try {
    summary = await summariseTurns({ previous, turns, contextWindow: input.contextWindow, mixedPeople: input.mixedPeople, summarise: input.summarise });
  } catch (error) {
    if (isStorageError(error)) throw error;
    const summaryError = input.redact(error instanceof Error ? error.message : String(error));
    if (!previous) return { summary_file: null, summary_error: summaryError };
    writeSummary(input.memoryDir, path, previous);
    return { summary_file: file, summary_error: summaryError };
  }
  writeSummary(input.memoryDir, path, summary);
  return { summary_file: file };
}

function replyFor(record: ResetRecord): string {
  const started = 'Started a new conversation.';
  if (record.command === 'reset') return `${started} Nothing of the old one was saved.`;
  const saved = record.summary_file ? `memory/${record.summary_file}` : null;
  if (record.summary_error !== undefined) {
    const why = `The model could not summarise the old one (${record.summary_error})`;
    return saved ? `${started} ${why}, so only its earlier summary was saved, to ${saved}.` : `${started} ${why}, so nothing was saved.`;
  }
  return saved ? `${started} A summary of the old one is saved in ${saved}.` : `${started} The old one was empty: there was nothing to save.`;
}
