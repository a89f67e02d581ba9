import { existsSync, readFileSync, rmSync } from 'node:fs';
import { writeFileWhole } from '../../core/whole-file.js';
import type { Logger } from '../../core/logger.js';
import type { AgentDir } from '../agent-dir.js';
import type { ModelOutage } from './failure.js';

/**
 * Whether the agent's messages wait for an unreachable model, for `theclaw status` and `doctor`:
 * notifier knows that the agent's runs fail and when it tries again, this file says that the
 * model is why (and since when). A run that left a message waiting for the model writes it; a
 * run that ended without failing removes it.
 */
export interface OutageState {
  /** When the first run of this outage found the model unavailable. */
  since: string;
  /** The latest run that did. */
  last_at: string;
  kind: string;
  status: number | null;
  /** What went wrong, secrets removed. */
  error: string;
}

/**
 * Stores what the run found: `outage` when it left a message waiting, none when it ended well
 * (`failed` false). A run that failed otherwise (a full disk) says nothing of the model. Never
 * throws: this is a report, and the run's own outcome is what matters.
 */
export function noteOutage(dir: AgentDir, found: { outage?: ModelOutage; failed: boolean }, logger: Logger, now = new Date()): void {
  try {
    if (found.outage) {
      const { failure, message } = found.outage;
      const state: OutageState = { since: readOutage(dir)?.since ?? now.toISOString(), last_at: now.toISOString(), kind: failure.kind, status: failure.status, error: message };
      writeFileWhole(dir.outage, JSON.stringify(state) + '\n');
    } else if (!found.failed && existsSync(dir.outage)) {
      rmSync(dir.outage, { force: true });
      logger.info('run: the model answers again');
    }
  } catch (error) {
    logger.warn(`run: could not note the model's state in ${dir.outage}: ${(error as Error).message}`);
  }
}

export function readOutage(dir: AgentDir): OutageState | null {
  try {
    return JSON.parse(readFileSync(dir.outage, 'utf8')) as OutageState;
  } catch {
    return null; // none (or damaged by hand: the next run writes it again)
  }
}
