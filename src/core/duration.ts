import { usageError } from './errors.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** The longest duration: a timer further out is a typo, and one far enough out is past what a Date holds. */
export const MAX_DURATION_DAYS = 36_500;

/**
 * `500ms`, `30s`, `5m`, `1h30m`, `2d`. At least one second, so a typo cannot spin the daemon, and
 * at most MAX_DURATION_DAYS (100 years). Shared by notifier's timers and the agents' heartbeats,
 * which are timers too. `name` says what it is in errors (e.g. `--in`).
 */
export function parseDuration(text: string, name = 'duration'): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  const label = name === 'duration' ? name : `${name} duration`;
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) {
    throw usageError(`invalid ${label} ${JSON.stringify(text)}`, 'write it like 30s, 5m, 1h30m or 2d');
  }
  const ms = parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS], 0);
  if (ms < 1_000) throw usageError(`${label} ${text} is shorter than one second`, 'use 1s or more');
  if (ms > MAX_DURATION_DAYS * UNIT_MS.d) throw usageError(`${label} ${text} is longer than ${MAX_DURATION_DAYS}d (100 years)`, `use ${MAX_DURATION_DAYS}d or less`);
  return ms;
}
