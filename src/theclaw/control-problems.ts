import { REPORTS_AGENT } from '../agent/identity.js';
import { agentDir } from '../agent/agent-dir.js';
import { storedConversationThreads } from '../agent/lifecycle.js';
import { withAgentThread } from '../agent/threads.js';
import { parseMessageContent } from '../core/message.js';
import { daemonStatus } from '../notifier/control.js';
import { gatewayStatus } from '../xgw/control.js';
import type { Problem } from '../xgw/index.js';

/**
 * The control page's problems: channels and daemons that are not running, and the incidents the
 * maintainer and the warden told the owner of (their reports, in the owner's direct chat with
 * the agent they report to, each saying what to do), from the last INCIDENT_DAYS days.
 */

const INCIDENT_DAYS = 7;
const MAX_INCIDENTS = 20;
const REPORTERS = ['maintainer', 'warden'] as const;

export async function controlProblems(home: string, now = new Date()): Promise<Problem[]> {
  return [...(await stoppedParts(home)), ...(await incidents(home, now))];
}

async function stoppedParts(home: string): Promise<Problem[]> {
  const found: Problem[] = [];
  const [notifier, xgw] = await Promise.all([daemonStatus(home).catch(() => null), gatewayStatus(home).catch(() => null)]);
  if (!notifier?.running) found.push({ from: 'system', text: 'notifier is not running: no agent answers, and no answer is delivered', fix: 'run: theclaw up' });
  for (const channel of xgw?.channels ?? []) {
    if (channel.state === 'running' || channel.state === 'starting' || channel.state === 'standby') continue;
    found.push({
      from: 'system',
      text: `${channel.id} is ${channel.state}${channel.detail ? `: ${channel.detail}` : ''}`,
      fix:
        channel.state === 'error'
          ? 'xgw tries it again by itself; theclaw doctor checks the channel and says what to change (its token, its config); after a change: theclaw reload'
          : 'theclaw reload starts it',
    });
  }
  return found;
}

async function incidents(home: string, now: Date): Promise<Problem[]> {
  const since = new Date(now.getTime() - INCIDENT_DAYS * 86_400_000).toISOString();
  const found: Problem[] = [];
  let threads: string[];
  try {
    threads = await storedConversationThreads(home, agentDir(home, REPORTS_AGENT));
  } catch {
    return []; // no admin yet: nobody was told anything
  }
  for (const path of threads) {
    try {
      // Filters take only literals, and `since` is a time this code made.
      const told = await withAgentThread(home, path, (thread) => thread.peek({ filter: `type = 'message' AND source = 'self' AND created_at >= '${since}'`, limit: 100_000 }));
      for (const event of told) {
        const problem = incidentOf(event.content, event.created_at);
        if (problem) found.push(problem);
      }
    } catch {
      // a damaged conversation: the status page names it
    }
  }
  return found.sort((a, b) => b.at!.localeCompare(a.at!)).slice(0, MAX_INCIDENTS);
}

/** A report of the maintainer's or the warden's (an error notice that starts with its name), as a problem. */
function incidentOf(content: string, at: string): Problem | undefined {
  let message;
  try {
    message = parseMessageContent(content);
  } catch {
    return undefined;
  }
  const from = REPORTERS.find((reporter) => message.text.startsWith(`${reporter}: `));
  return message.notice === 'error' && from ? { from, at, text: message.text.slice(from.length + 2) } : undefined;
}
