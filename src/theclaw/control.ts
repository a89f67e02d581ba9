import { agentDir, listAgentIds, loadAgentConfig } from '../agent/agent-dir.js';
import { setIdentity } from '../agent/agent-settings.js';
import { defaultIdentity } from '../agent/identity.js';
import { agentStatus, createAgent, startAgent, stopAgent } from '../agent/lifecycle.js';
import { decideFor, waitingDecisions } from '../agent/owner-decisions.js';
import { formatError } from '../core/errors.js';
import type { BudgetLeft, ControlAction, ControlAgent, ControlOutcome, ControlView, Spend, WaitingItem } from '../xgw/index.js';
import { approvePairing, denyPairing, pendingPairings } from '../xgw/pairing.js';
import { conversationSummaries } from './control-conversations.js';
import { controlProblems } from './control-problems.js';
import { usagePerDay } from './usage-days.js';

/**
 * The owner's control page's reading and doing (the page: src/xgw/page/control.ts; the way here:
 * xgw/control-source.ts and control-runner.ts). Each action calls what its command calls, so the
 * page and the terminal cannot drift apart.
 */

/** Who decides on the page, as a decision records it. */
const BY = 'the owner (control page)';
/** The days the spend chart shows. */
export const SPEND_DAYS = 30;

/** Everything the page shows. One agent failing never hides the others. */
export async function controlView(home: string, now = new Date()): Promise<ControlView> {
  const ids = listAgentIds(home);
  const problems = await controlProblems(home, now);
  return {
    checked_at: now.toISOString(),
    agents: await Promise.all(ids.map((id) => controlAgent(home, id))),
    waiting: [...ids.flatMap((id) => waitingIn(home, id)), ...waitingPairings(home)],
    spend: await spend(home, ids, now),
    conversations: await conversationSummaries(home),
    problems,
  };
}

async function spend(home: string, ids: string[], now: Date): Promise<Spend> {
  const days = Array.from({ length: SPEND_DAYS }, (_, i) => new Date(now.getTime() - (SPEND_DAYS - 1 - i) * 86_400_000).toISOString().slice(0, 10));
  const usage = await usagePerDay(home, SPEND_DAYS, now);
  const today = days.at(-1);
  const budgets = ids.flatMap((agent): BudgetLeft[] => {
    let cap: number | undefined;
    try {
      cap = loadAgentConfig(agentDir(home, agent)).budget.daily_tokens;
    } catch {
      return []; // a broken agent: its row says why
    }
    if (cap === undefined) return [];
    const used = usage.filter((u) => u.agent === agent && u.day === today).reduce((sum, u) => sum + u.input_tokens + u.output_tokens, 0);
    return [{ agent, daily_tokens: cap, used_today: used }];
  });
  return { days, usage, budgets };
}

async function controlAgent(home: string, id: string): Promise<ControlAgent> {
  try {
    const a = await agentStatus(home, id);
    return { id, state: a.running ? 'running' : a.started ? 'started' : 'stopped', kind: a.kind, model: a.model, last_activity: a.last_activity, pending: a.pending };
  } catch (error) {
    return { id, state: 'broken', error: formatError(error).replace(/^Error: /, '') };
  }
}

function waitingIn(home: string, agent: string): WaitingItem[] {
  let waiting;
  try {
    waiting = waitingDecisions(home, agent);
  } catch {
    return []; // a broken agent: its row says why
  }
  return [
    ...waiting.commands.map((a): WaitingItem => ({ kind: 'command', agent, code: a.code, command: a.command, conversation: a.conversation, expires_at: a.expires_at })),
    ...waiting.proposals.map((p): WaitingItem => ({ kind: 'proposal', agent, code: p.code, file: p.file, summary: p.summary, added: p.added, removed: p.removed })),
  ];
}

function waitingPairings(home: string): WaitingItem[] {
  return pendingPairings(home).map((p) => ({ kind: 'pairing', code: p.code, channel: p.channel_id, peer: p.peer_id, ...(p.peer_name ? { peer_name: p.peer_name } : {}), expires_at: p.expires_at }));
}

/** Carries an action out; what it did, in a sentence. */
export async function controlAction(home: string, action: ControlAction, env: NodeJS.ProcessEnv = process.env): Promise<Pick<ControlOutcome, 'text'>> {
  switch (action.action) {
    case 'agent_start':
      await startAgent(home, action.agent, env);
      return { text: `started ${action.agent}` };
    case 'agent_stop':
      return { text: (await stopAgent(home, action.agent, env)) ? `stopped ${action.agent} (its messages wait until it starts again)` : `${action.agent} was not started` };
    case 'agent_create':
      await createAgent(home, action.agent, {}, env);
      await setIdentity(home, action.agent, defaultIdentity(action.agent, action.purpose), env);
      return { text: `created ${action.agent}; start it to have it take messages` };
    case 'decide':
      return { text: decideFor(home, action.agent, action.code, action.approve, BY).text };
    case 'pairing_decide': {
      if (!action.approve) {
        const request = denyPairing(home, action.code);
        return { text: `denied ${request.peer_id} on ${request.channel_id}: not admitted` };
      }
      const { request, welcomed } = await approvePairing(home, action.code);
      return { text: `approved ${request.peer_id} on ${request.channel_id}; ${welcomed ? 'they were told' : 'they will be told when xgw starts'}` };
    }
    default:
      return action satisfies never;
  }
}
