import { join, relative } from 'node:path';
import type Database from 'better-sqlite3';
import { openSqlite } from '../../core/sqlite.js';
import type { AgentDir } from '../agent-dir.js';
import { capMemory, archiveFolder, fileStamp, memoryVersion, readMemoryFile, writeSummary } from '../memory/index.js';
import { CHARS_PER_TOKEN, estimateTokens } from '../tokens.js';
import { inputBudgetChars } from './compaction.js';
import { warningRecord } from './failure.js';
import { UpkeepSkipped } from '../accounting/index.js';
import type { UpkeepSettings } from './memory-flush.js';
import type { MemoryCondenseRecord, MemoryLayer } from '../types.js';
import { push } from '../threads.js';

/**
 * Person- and agent-level compaction: a memory file (agent.md, user-*.md, group-*.md) past its
 * cap (`context.memory_caps`) is rewritten by one summarising call to about 60% of the cap, the
 * old version kept in `memory/archive/<file>/<time>.md` (where a search of that conversation
 * still finds it), and the change recorded (`record/memory`, action `condense`).
 *
 * After the turn, not before it: the answer is in its thread (and on its way) before the call
 * is made, so condensing never delays it. The turn that found the file over its cap reads it
 * cut in the middle (memory-caps.ts), the next ones read it condensed. That cut stays the
 * fallback whenever condensing fails: a failed call, an answer still over the cap.
 *
 * Bounded: each version of a file is tried once, by whichever conversation claims it first in
 * the agent's state.db, never again — not after a failure, not after a crash. A new version (an
 * edit, a flush) may be tried again, once. A call a spend cap kept from being made is no try.
 */
export const CONDENSE_PROMPT = `You condense an assistant's memory file, which has grown past the room it has in the assistant's prompt.
Rewrite it shorter, within the length given: keep every lasting fact (names, relationships, preferences, decisions, commitments, standing instructions), merge repeated and related items, keep the newest where facts disagree, and drop what no longer matters.
Keep its Markdown headings and lists. Output only the new file.`;

/** The share of the cap a condensed file is asked to fit: room for what is added after it. */
export const CONDENSE_TARGET = 0.6;

export interface CondenseSettings extends UpkeepSettings {
  /** The memory files the turn loaded, by layer (the conversation summary is compaction's). */
  files: readonly [MemoryLayer, string | null][];
  caps: Record<MemoryLayer, number>;
  now?: Date;
}

/** Condenses each of the files that is over its cap; returns what it recorded. Never throws. */
export async function condenseOverCap(settings: CondenseSettings): Promise<MemoryCondenseRecord[]> {
  const done: MemoryCondenseRecord[] = [];
  for (const [layer, file] of settings.files) {
    if (!file) continue;
    try {
      const record = await condense(settings, layer, file);
      if (record) done.push(record);
    } catch (error) {
      settings.logger.warn(`run: ${file} could not be condensed: ${(error as Error).message}`);
    }
  }
  return done;
}

async function condense(settings: CondenseSettings, layer: MemoryLayer, file: string): Promise<MemoryCondenseRecord | null> {
  const { dir, thread, logger } = settings;
  const cap = settings.caps[layer];
  const text = readMemoryFile(dir.root, file).trim();
  const tokens = estimateTokens(text);
  if (tokens <= cap) return null;
  const version = memoryVersion(text);
  const name = relative(dir.root, file);
  if (!claimVersion(dir, name, version)) return null;
  const target = Math.floor(cap * CONDENSE_TARGET);
  try {
    // The input is bounded like any summarising call's: a file far over the window loses its
    // middle here too (the archive keeps it whole).
    const input = `Length: at most ${Math.floor(target * 0.75)} words (about ${target} tokens); it is about ${tokens} tokens now.\n\nThe memory file:\n${capMemory(layer, file, text, Math.floor(inputBudgetChars(settings.contextWindow) / CHARS_PER_TOKEN)).text}`;
    const condensed = settings.redact((await settings.summarise(CONDENSE_PROMPT, input)).trim());
    const after = estimateTokens(condensed);
    if (!condensed) throw new Error('the summariser returned nothing');
    if (after > cap) throw new Error(`the condensed text is still about ${after} tokens, over the cap of ${cap}`);
    if (readMemoryFile(dir.root, file).trim() !== text) {
      logger.info(`run: ${name} changed while it was condensed; left as it is now`);
      return null;
    }
    const archive = join(archiveFolder(dir.memory, file), `${fileStamp((settings.now ?? new Date()).toISOString())}.md`);
    writeSummary(dir.root, archive, text);
    writeSummary(dir.root, file, condensed);
    const record: MemoryCondenseRecord = { action: 'condense', file: name, layer, version, archive: relative(dir.root, archive), tokens_before: tokens, tokens_after: after, cap };
    await push(thread, { source: 'self', type: 'record', subtype: 'memory', content: JSON.stringify(record), idempotency_key: `memory-condense:${name}:${version}` });
    logger.info(`run: condensed ${name} from about ${tokens} to ${after} tokens (cap ${cap}); the old version is ${record.archive}`);
    return record;
  } catch (error) {
    // Not tried, only put off: the version may be condensed once the caps allow it again.
    if (error instanceof UpkeepSkipped) unclaimVersion(dir, name, version);
    const what = `${name} is over its cap of ${cap} (context.memory_caps.${layer}) and could not be condensed, so its middle stays left out of the context until the file changes`;
    const { record, message } = warningRecord(settings.inReplyTo, 'memory', what, error, settings.redact);
    await push(thread, { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: `memory-condense-failed:${name}:${version}` });
    logger.warn(`run: ${name} could not be condensed (${message}); it is cut to its cap in the context`);
    return null;
  }
}

/** True for the first claim of a file's version: the one condensing it. */
function claimVersion(dir: AgentDir, file: string, version: string): boolean {
  return withClaims(dir, (db) => db.prepare('INSERT OR IGNORE INTO memory_condensed VALUES (?, ?, ?)').run(file, version, new Date().toISOString()).changes === 1);
}

function unclaimVersion(dir: AgentDir, file: string, version: string): void {
  withClaims(dir, (db) => db.prepare('DELETE FROM memory_condensed WHERE file = ? AND version = ?').run(file, version));
}

function withClaims<T>(dir: AgentDir, use: (db: Database.Database) => T): T {
  const db = openSqlite(dir.state);
  try {
    db.exec('CREATE TABLE IF NOT EXISTS memory_condensed (file TEXT NOT NULL, version TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (file, version))');
    return use(db);
  } finally {
    db.close();
  }
}
