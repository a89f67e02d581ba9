import { usageError } from './errors.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `500ms`, `30s`, `5m`, `1h30m`, `2d`. At least one second, so a typo cannot spin the daemon.
 * Shared by notifier's timers and the agents' heartbeats, which are timers too.
 */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) {
    throw usageError(`invalid duration ${JSON.stringify(text)}`, 'write it like 30s, 5m, 1h30m or 2d');
  }
  const ms = parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS], 0);
  if (ms < 1_000) throw usageError(`duration ${text} is shorter than one second`, 'use 1s or more');
  return ms;
}
