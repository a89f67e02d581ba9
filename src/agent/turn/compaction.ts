import { basename } from 'node:path';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { withoutChatCommands } from '../chat-commands.js';
import { isNotice } from './failure.js';
import type { Summarise } from '../accounting/index.js';
import { historyLines } from '../context.js';
import type { Logger } from '../../core/logger.js';
import { readMemoryOrEmpty, warnRefused, writeSummary } from '../memory/index.js';
import { CHARS_PER_TOKEN, estimateTokens } from '../tokens.js';
import type { CompactionRecord } from '../types.js';

/**
 * Compaction, its own module so the strategy can change: when a thread's context grows past a
 * share of the model's window, the older turns are folded by an independent summarising call
 * into `memory/thread-<tid>.md` (incrementally: the old summary plus the new turns), and a
 * `record/compaction` event records the event range it covered. Later contexts hold the summary
 * (in the system prompt) and only the messages after that range, so nothing appears twice.
 */
export const SUMMARISER_PROMPT = `You compress conversations for an assistant's long-term memory.
Write a concise Markdown summary of the conversation below, merged with the earlier summary if one is given.
Keep every fact, name, number, preference, decision, promise and open task; drop greetings and chatter.
Write in the third person about the user ("the user said ..."). Output only the summary.`;

export interface CompactionInput {
  thread: StoredThread;
  /** The agent's memory directory, and the thread memory file in it. */
  memoryDir: string;
  summaryFile: string;
  logger: Pick<Logger, 'warn'>;
  /** The current inbound message (not compacted: it is this call's input). */
  currentId: number;
  system: string;
  input: string;
  contextWindow: number;
  threshold: number;
  /** Messages a call carries; more uncompacted ones than this are compacted. */
  recentMessages: number;
  keepRecent: number;
  mixedPeople: boolean;
  summarise: Summarise;
  /** Compact whatever lies beyond keepRecent, below the threshold too: the provider found the context too long. */
  force?: boolean;
  /**
   * The memory flush (memory-flush.ts): given the turns about to be folded, run alongside the
   * summarising call so the turn waits for no more than the longer of the two. It never throws.
   */
  flush?: (covered: readonly ThreadEvent[]) => Promise<unknown>;
}

export interface CompactionResult {
  /** Messages after this id are the history of the next call. */
  afterId: number;
  compacted: CompactionRecord | null;
}

// A `/new` or `/reset` records where the fresh conversation starts (`record/reset`) the way a
// compaction records where its summary ends; both carry `to_id`. The later marker always has the
// greater `to_id`: a compaction covers only messages after the last reset, and a reset's `to_id`
// is its command, newer than anything compacted before it.
const HISTORY_MARKERS = "type = 'record' AND subtype IN ('compaction', 'reset')";

/** The id after which the thread's history starts: the end of the last compaction or reset. */
export async function historyStart(thread: StoredThread): Promise<number> {
  const last = (await thread.peek({ filter: HISTORY_MARKERS, last: 1 }))[0];
  return last ? (JSON.parse(last.content) as Pick<CompactionRecord, 'to_id'>).to_id : 0;
}

/** The content of the record the thread holds under an idempotency key, or null. */
export async function recordByKey<T>(thread: StoredThread, key: string): Promise<T | null> {
  const id = await thread.findByKey(key);
  if (id === undefined) return null;
  const event = (await thread.peek({ afterId: id - 1, limit: 1 }))[0];
  return event ? (JSON.parse(event.content) as T) : null;
}

// Compaction keeps the uncompacted part of a thread near `recentMessages`; this bound only
// matters for a thread that grew before it could compact (read a part, compact that, go on).
const MAX_UNCOMPACTED = 2_000;

/** Messages after the last compaction or reset, without the current message. */
export async function uncompacted(thread: StoredThread, afterId: number, currentId: number): Promise<ThreadEvent[]> {
  return conversation(thread, await thread.peek({ afterId, filter: "type = 'message'", limit: MAX_UNCOMPACTED }), currentId);
}

/**
 * The messages of the conversation the model sees and summarises: not the current one, not chat
 * commands with their answers, not the runtime's notices (they are no answer of the model's).
 */
export async function conversation(thread: StoredThread, messages: readonly ThreadEvent[], currentId: number): Promise<ThreadEvent[]> {
  return (await withoutChatCommands(thread, messages)).filter((event) => event.id !== currentId && !isNotice(event));
}

export async function compactIfNeeded(args: CompactionInput): Promise<CompactionResult> {
  const { thread, contextWindow, threshold } = args;
  const afterId = await historyStart(thread);
  const messages = await uncompacted(thread, afterId, args.currentId);
  // Two triggers: the context would pass its share of the window, or more messages wait than a
  // call carries (older ones would otherwise drop out of the context unsummarised).
  const size = estimateTokens(args.system, args.input, JSON.stringify(historyLines(messages.slice(-args.recentMessages), args.mixedPeople)));
  if (!args.force && size <= threshold * contextWindow && messages.length <= args.recentMessages) return { afterId, compacted: null };
  const covered = messages.slice(0, Math.max(0, messages.length - args.keepRecent));
  if (covered.length === 0) return { afterId, compacted: null };

  // Both settled before going on: a flush still writing when the turn has moved on would race it.
  const [summarised] = await Promise.allSettled([summariseTurns({ previous: readSummary(args.memoryDir, args.summaryFile, args.logger), turns: covered, ...args }), args.flush?.(covered)]);
  if (summarised.status === 'rejected') throw summarised.reason;
  const summary = summarised.value;
  writeSummary(args.memoryDir, args.summaryFile, summary);
  const record: CompactionRecord = {
    from_id: covered[0]!.id,
    to_id: covered.at(-1)!.id,
    summary_file: basename(args.summaryFile),
    summary_chars: summary.length,
  };
  // Keyed by its range: a run that crashed after the summary was written and retries does not
  // record the same compaction twice.
  await thread.append([{ source: 'self', type: 'record', subtype: 'compaction', content: JSON.stringify(record), idempotency_key: `compaction:${record.to_id}` }]);
  return { afterId: record.to_id, compacted: record };
}

export interface SummariseTurnsInput {
  /** The earlier summary ('' when there is none). */
  previous: string;
  turns: readonly ThreadEvent[];
  contextWindow: number;
  mixedPeople: boolean;
  summarise: Summarise;
}

/** The turns merged into the earlier summary by the summariser; its input is bounded by the window. */
export async function summariseTurns({ previous, turns, contextWindow, mixedPeople, summarise }: SummariseTurnsInput): Promise<string> {
  const budgetChars = inputBudgetChars(contextWindow);
  const transcript = transcriptOf(turns, mixedPeople, budgetChars - Math.min(previous.length, budgetChars / 2));
  const input = `${previous ? `Earlier summary:\n${previous.slice(0, budgetChars / 2)}\n\n` : ''}Conversation to add:\n${transcript}`;
  return (await summarise(SUMMARISER_PROMPT, input)).trim();
}

/** What the input of a summarising call may hold: a quarter of the window. */
export function inputBudgetChars(contextWindow: number): number {
  return Math.floor(contextWindow * 0.25 * CHARS_PER_TOKEN);
}

/** The turns as `User: …` / `Assistant: …` lines, up to `chars` characters, the newest kept. */
export function transcriptOf(turns: readonly ThreadEvent[], mixedPeople: boolean, chars: number): string {
  const transcript = historyLines(turns, mixedPeople)
    .map((line) => `${line.role === 'assistant' ? 'Assistant' : 'User'}: ${line.content}`)
    .join('\n');
  return transcript.length > chars ? `[earlier turns left out]\n${transcript.slice(-chars)}` : transcript;
}

/** The summary file's text, '' when there is none or it is refused (a link: said in the log). */
export function readSummary(memoryDir: string, file: string, logger: Pick<Logger, 'warn'>): string {
  return readMemoryOrEmpty(memoryDir, file, warnRefused(logger)).trim();
}
