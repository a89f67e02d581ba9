import { joinCommand } from '../core/command.js';
import { cliPath } from '../core/package.js';
import type { Schedule } from '../notifier/index.js';
import { addTimer, listTimers } from '../notifier/control.js';

/**
 * The system agents' work on notifier timers, which `theclaw up` registers once each: a timer of
 * that id the owner changed (or replaced) stays as they left it, and one they removed comes back
 * at the next `up`. No model call but the evolver's.
 */
export const SYSTEM_TIMERS: readonly { id: string; schedule: Schedule; args: string[] }[] = [
  { id: 'maintainer-sweep', schedule: { kind: 'every', ms: 30_000 }, args: ['maintain'] },
  { id: 'warden-sweep', schedule: { kind: 'every', ms: 30_000 }, args: ['ward'] },
  { id: 'evolver-daily', schedule: { kind: 'cron', expr: '0 22 * * *' }, args: ['evolve'] },
];

export async function registerSystemTimers(home: string): Promise<string[]> {
  const present = new Set(listTimers(home).map((timer) => timer.id));
  const added: string[] = [];
  for (const timer of SYSTEM_TIMERS) {
    if (present.has(timer.id)) continue;
    await addTimer(home, timer.id, timer.schedule, joinCommand([process.execPath, cliPath('theclaw'), ...timer.args]));
    added.push(timer.id);
  }
  return added;
}
