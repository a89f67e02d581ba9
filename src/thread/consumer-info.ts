import { dispatchInfo, type DispatchColumns } from './dispatch/state.js';
import type { ConsumerInfo } from './types.js';

/** A consumer's row as every store reads it (`subscribed` made a boolean). */
export interface ConsumerFields extends DispatchColumns {
  consumer: string;
  progress: number;
  subscribed: boolean;
  handler: string | null;
  filter: string | null;
}

/**
 * Filters are checked at subscribe, but one stored earlier may not compile now (a hand-edited
 * database, a changed filter language). It disables only its own consumer, so that dispatch and
 * status go on for every other one (DESIGN §9: one bad filter stopped dispatch for everyone).
 * Returns why, or null; `compile` is the store's own (it throws on a bad filter).
 */
export function brokenFilter(filter: string | null, compile: (filter: string) => unknown): string | null {
  if (filter === null) return null;
  try {
    compile(filter);
    return null;
  } catch (error) {
    return `the stored filter is invalid (${(error as Error).message}); subscribe again with a valid --filter`;
  }
}

/** The row as `info` and dispatch show it: both halves, and a broken filter as its last error. */
export function consumerInfo(row: ConsumerFields, pending: number, broken: string | null): ConsumerInfo {
  const dispatch = dispatchInfo(row);
  return {
    consumer: row.consumer,
    progress: row.progress,
    pending,
    subscribed: row.subscribed,
    handler: row.handler,
    filter: row.filter,
    ...dispatch,
    last_error: broken ?? dispatch.last_error,
  };
}
