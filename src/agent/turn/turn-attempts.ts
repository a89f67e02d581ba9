import { lastTurnStart, readSession, type SessionLine } from '../../pai/index.js';
import type { StoredThread } from '../../thread/index.js';
import { TurnAbandoned } from './failure.js';
import type { AgentConfig, AttemptRecord } from '../types.js';

/**
 * The turns of one message that never finished. Each turn that calls the model is recorded as an
 * attempt (`record/attempt`, key `attempt:<inbound id>:<n>`) before the model is called, so a turn
 * killed with its run (SIGKILL, the handler timeout, a crash) is known to the next run. A turn that
 * ends waiting for the model (an outage) is not the message's fault: its attempt is marked ended
 * and not counted. Once `turn.max_attempts` turns were cut off, the message is given up (an error
 * notice and record, see failure.ts) and the inbox moves on, instead of re-billing the model for
 * a turn that kills its run every time while the messages behind it wait.
 */
export interface Attempt {
  readonly number: number;
  /** The turn ended without an outcome through no fault of the message: this attempt does not count. */
  waits(): Promise<void>;
}

const ATTEMPTS = "type = 'record' AND subtype = 'attempt'";

/** Records the next attempt at the message, or throws TurnAbandoned when it has been cut off too often. */
export async function beginAttempt(thread: StoredThread, inboundId: number, settings: AgentConfig['turn']): Promise<Attempt> {
  const records = (await thread.peek({ afterId: inboundId, filter: ATTEMPTS, limit: 10_000 }))
    .map((event) => JSON.parse(event.content) as AttemptRecord)
    .filter((record) => record.in_reply_to === inboundId);
  const begun = records.filter((record) => record.ended === undefined).map((record) => record.attempt);
  const ended = new Set(records.flatMap((record) => (record.ended === undefined ? [] : [record.attempt])));
  const cutOff = begun.filter((attempt) => !ended.has(attempt)).length;
  if (cutOff >= settings.max_attempts) throw new TurnAbandoned('crashed', `answering failed ${cutOff} times`);
  const number = Math.max(0, ...begun) + 1;
  const push = async (content: AttemptRecord, key: string) => {
    await thread.append([{ source: 'self', type: 'record', subtype: 'attempt', content: JSON.stringify(content), idempotency_key: key }]);
  };
  await push({ in_reply_to: inboundId, attempt: number }, `attempt:${inboundId}:${number}`);
  return { number, waits: () => push({ in_reply_to: inboundId, attempt: number, ended: 'waits' }, `attempt-ended:${inboundId}:${number}`) };
}

/**
 * The lines of an earlier turn at this message that the session ends with (from its user line,
 * marked with the turn's name), or none: what a retried turn resumes from. A session that cannot
 * be read is not resumed; the turn starts over.
 */
export function unfinishedTurn(sessionFile: string, turn: string): SessionLine[] {
  let lines: SessionLine[];
  try {
    lines = readSession(sessionFile);
  } catch {
    return [];
  }
  const start = lastTurnStart(lines);
  const begun = lines[start];
  return begun?.role === 'user' && begun.turn === turn ? lines.slice(start) : [];
}

/** Why a turn that ran past `turn.timeout_seconds` got no answer. */
export function overTurnLimit(settings: AgentConfig['turn']): TurnAbandoned {
  const seconds = settings.timeout_seconds;
  return new TurnAbandoned('timeout', `the answer took longer than the turn limit (${describeSeconds(seconds)})`);
}

/** `600` → `10 min`, `90` → `90 s`: a configured duration as the person reads it. */
export function describeSeconds(seconds: number): string {
  return seconds % 60 === 0 ? `${seconds / 60} min` : `${seconds} s`;
}
