import { createHash } from 'node:crypto';
import { incidentsPath } from '../core/layout.js';
import { REPORTS_AGENT, tellOwnerOf, ToolcallFeedEntrySchema, type ToolcallFeedEntry } from '../agent/index.js';
import { Incidents, readFeed } from './feed-sweep.js';
import { review, type Finding } from './warden-rules.js';

/**
 * The warden's sweep (`theclaw ward`, on the notifier timer `warden-sweep` that `theclaw up`
 * registers): reads the commands the agents' turns ran since its last sweep (the `toolcalls`
 * feed), reviews each against the table of dangerous patterns (warden-rules.ts) and tells the
 * owner of each dangerous one in their direct chat with admin: which agent, in which
 * conversation, the exact command, why it is dangerous, and whether it ran. The same command of
 * the same agent again within the hour is counted, not told again. No model call.
 */
export interface WardResult {
  read: number;
  findings: WardFinding[];
}

export interface WardFinding extends ToolcallFeedEntry {
  rules: Finding[];
  /** What the owner reads; `told` is false when they have no direct chat with admin yet. */
  text: string;
  told: boolean;
}

export async function ward(home: string): Promise<WardResult> {
  const incidents = new Incidents(incidentsPath(home, 'warden'));
  const findings: WardFinding[] = [];
  try {
    // Told before the entry is acknowledged (readFeed); a tell has its key, and is told once.
    const { read } = await readFeed(home, 'toolcalls', 'warden', ToolcallFeedEntrySchema, async (entry, event) => {
      const rules = review(entry.command);
      if (rules.length === 0) return;
      const key = `${entry.agent}|${rules.map((rule) => rule.rule).join(',')}|${createHash('sha256').update(entry.command).digest('hex')}`;
      await incidents.occur(key, event.created_at, async () => {
        const text = findingText(entry, rules);
        const finding = { ...entry, rules, text, told: false };
        findings.push(finding);
        finding.told = await tellOwnerOf(home, REPORTS_AGENT, text, 'error', `warden:${event.id}`);
      });
    });
    return { read, findings };
  } finally {
    incidents.close();
  }
}

/** Commands are shown whole up to this length: enough for any real one, not a pasted file. */
const SHOWN_COMMAND = 500;

export function findingText(entry: ToolcallFeedEntry, rules: readonly Finding[]): string {
  const command = entry.command.length > SHOWN_COMMAND ? `${entry.command.slice(0, SHOWN_COMMAND)} [... ${entry.command.length - SHOWN_COMMAND} characters more]` : entry.command;
  const outcome = entry.exit_code === 126 ? 'It was refused (exit 126): it did not run.' : `It ran (exit ${entry.exit_code}).`;
  return [
    `warden: ${entry.agent} ran a dangerous command in conversation ${entry.thread} (its record ${entry.event}):`,
    command,
    `Why: ${rules.map((rule) => rule.why).join('; ')}. ${outcome}`,
    `To forbid such commands: a policy rule in agents/${entry.agent}/config.yaml. (I report this once while it goes on.)`,
  ].join('\n');
}
