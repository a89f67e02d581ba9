import { join, relative } from 'node:path';
import type { Logger } from '../../core/logger.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { inputBudgetChars, recordByKey, transcriptOf } from './compaction.js';
import type { Summarise } from '../accounting/index.js';
import { capMemory, appendNewLines, dailyFolder, readMemoryFile } from '../memory/index.js';
import { warningRecord } from './failure.js';
import type { MemoryFlushRecord } from '../types.js';
import { push } from '../threads.js';

/**
 * The memory flush: before a compaction folds older turns into the conversation's summary, one
 * call picks the lasting facts out of them (names, preferences, decisions, promises) and appends
 * them to the memory file this conversation already holds as its own — the person's in their
 * direct thread, the group's in a group — and a few lines on what happened to that file's daily
 * notes, `memory/daily/<file>/<YYYY-MM-DD>.md`. So a fact said once survives the summary's
 * shortening, and a later conversation with the same person has it in its prompt.
 *
 * Never another file: the agent's memory is in every conversation's prompt, so what one person
 * says never goes there (the owner's conversations included: agent.md is written only on
 * purpose, by `agent memory edit` or the agent's own commands); a thread several people's direct
 * chats share (per-channel, per-agent routing) has no one person to write for, and another
 * agent's conversation has no memory file of its own: neither is flushed.
 *
 * A flush is a `record/memory` (action `flush`) keyed by the end of the range it covers
 * (`memory-flush:<to_id>`), pushed before the file is written: a retry after a crash applies the
 * recorded lines instead of asking again, and lines a file already holds are not added twice.
 * Each flush covers only what the last one did not. A failing flush is a warning record and
 * changes nothing else: the compaction and the answer go on without it.
 */
export const FLUSH_PROMPT = `Pre-compaction memory flush: the conversation below is about to be shortened into a summary, and what is not written down now may be lost.
Write down what is worth knowing in every later conversation with this person (in a group chat: with this group).
FACTS: lasting facts - names, relationships, preferences, decisions, commitments and promises, standing requests. One short sentence each, in the third person. Leave out what the memory below already holds, passing chatter, and secrets (passwords, keys, codes).
NOTES: what happened in this part of the conversation, in a few lines, for a dated diary.
Answer in exactly this form, one item per line, with "- none" under a heading that has nothing:
FACTS:
- ...
NOTES:
- ...`;

/** What one flush may add: a runaway answer does not flood the file. */
const MAX_FACTS = 20;
const MAX_NOTES = 10;
const MAX_ITEM_CHARS = 300;

export interface FlushedItems {
  facts: string[];
  notes: string[];
}

/** The facts and notes of a flush's answer: `- ` items under `FACTS:` and `NOTES:`, bounded, one line each. */
export function parseFlush(answer: string): FlushedItems {
  const items: FlushedItems = { facts: [], notes: [] };
  let section: keyof FlushedItems | null = null;
  for (const line of answer.split('\n')) {
    const heading = /^[#*\s]*(facts|notes)[*\s]*:?[*\s]*$/i.exec(line);
    if (heading) {
      section = heading[1]!.toLowerCase() as keyof FlushedItems;
      continue;
    }
    const item = /^\s*[-*•]\s+(.*\S)/.exec(line)?.[1]?.replace(/\s+/g, ' ');
    if (section && item && !/^none\.?$/i.test(item)) items[section].push(item.slice(0, MAX_ITEM_CHARS));
  }
  return { facts: [...new Set(items.facts)].slice(0, MAX_FACTS), notes: [...new Set(items.notes)].slice(0, MAX_NOTES) };
}

/** What the runtime's memory writes (a flush, condensing) work with. */
export interface UpkeepSettings {
  dir: AgentDir;
  /** The conversation of the turn: the records go there. */
  thread: StoredThread;
  contextWindow: number;
  summarise: Summarise;
  /** Removes secret values from what is written and recorded. */
  redact: (text: string) => string;
  logger: Logger;
  /** The message of the turn: a failure's warning answers it. */
  inReplyTo: number;
}

export interface FlushSettings extends UpkeepSettings {
  /** The memory file to write: the conversation's own (context.ts ownMemoryFile). */
  file: string;
  /** Its cap: the part of it the flush is shown, to leave out what it holds. */
  cap: number;
  mixedPeople: boolean;
}

/** Flushes the turns about to be compacted; returns what it recorded, null when there was nothing to do or it failed. */
export async function flushMemory(settings: FlushSettings, covered: readonly ThreadEvent[]): Promise<MemoryFlushRecord | null> {
  const { thread, logger } = settings;
  if (covered.length === 0) return null;
  const key = `memory-flush:${covered.at(-1)!.id}`;
  try {
    const after = await lastFlushed(thread);
    const turns = covered.filter((event) => event.id > after);
    // The same range again is a retry (of a turn cut off after the record): applied from it.
    const retried = await recordByKey<MemoryFlushRecord>(thread, key);
    if (!retried && turns.length === 0) return null;
    const record = retried ?? (await askAndRecord(settings, turns, key));
    apply(settings, record);
    if (record.lines.length + record.daily_lines.length > 0) {
      logger.info(`run: memory flush of events ${record.from_id}..${record.to_id}: ${record.lines.length} fact(s) for ${record.file}, ${record.daily_lines.length} note(s) for ${record.daily_file}`);
    }
    return record;
  } catch (error) {
    const what = `the memory flush before the compaction failed, so no facts of these turns were added to ${relative(settings.dir.root, settings.file)} (the summary still has them)`;
    const { record, message } = warningRecord(settings.inReplyTo, 'memory', what, error, settings.redact);
    logger.warn(`run: memory flush of events up to ${covered.at(-1)!.id} failed (${message}); compacting without it`);
    try {
      await push(thread, { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: `memory-flush-failed:${covered.at(-1)!.id}` });
    } catch (recordError) {
      logger.warn(`run: the failed memory flush could not be recorded: ${(recordError as Error).message}`);
    }
    return null;
  }
}

async function askAndRecord(settings: FlushSettings, turns: readonly ThreadEvent[], key: string): Promise<MemoryFlushRecord> {
  const { dir, file } = settings;
  const held = readMemoryFile(dir.root, file).trim();
  const budget = inputBudgetChars(settings.contextWindow);
  const input = `Already in memory:\n${held ? capMemory('person', file, held, settings.cap).text : '(nothing yet)'}\n\nConversation:\n${transcriptOf(turns, settings.mixedPeople, budget)}`;
  const { facts, notes } = parseFlush(settings.redact(await settings.summarise(FLUSH_PROMPT, input)));
  const last = turns.at(-1)!;
  const record: MemoryFlushRecord = {
    action: 'flush',
    from_id: turns[0]!.id,
    to_id: last.id,
    file: relative(dir.root, file),
    lines: facts.map((fact) => `- ${fact}`),
    daily_file: relative(dir.root, join(dailyFolder(dir.memory, file), `${last.created_at.slice(0, 10)}.md`)),
    daily_lines: notes.map((note) => `- ${note}`),
    at: last.created_at,
  };
  // Recorded before it is applied: a crash in between is mended by the retry, from the record.
  await push(settings.thread, { source: 'self', type: 'record', subtype: 'memory', content: JSON.stringify(record), idempotency_key: key });
  return record;
}

function apply({ dir }: FlushSettings, record: MemoryFlushRecord): void {
  const day = record.at.slice(0, 10);
  appendNewLines(dir.root, join(dir.root, record.file), record.lines, `## Noted ${day}`);
  appendNewLines(dir.root, join(dir.root, record.daily_file), record.daily_lines, `## ${record.at.slice(11, 16)} UTC`, `# ${day}`);
}

// The last flush is among the thread's newest memory records: the others (a file condensed,
// memory-condense.ts) come at most once per version of a file.
const RECENT_MEMORY_RECORDS = 50;

/** The end of the range the thread's last flush covered (0: none yet). */
async function lastFlushed(thread: StoredThread): Promise<number> {
  const records = await thread.peek({ filter: "type = 'record' AND subtype = 'memory'", last: RECENT_MEMORY_RECORDS });
  const flush = records.map((event) => JSON.parse(event.content) as { action: string; to_id?: number }).findLast((record) => record.action === 'flush');
  return flush?.to_id ?? 0;
}
