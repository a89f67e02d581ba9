import type { Logger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { INBOX_FILTER } from '../lifecycle.js';
import type { AgentDir } from '../agent-dir.js';
import {
  createApproval,
  decideApproval,
  readApproval,
  waitForDecision,
  type Approval,
  decideProposal,
  describeOutcome,
  findProposal,
  decide,
  isOwner,
  isOwnerDirectChat,
  overReadLimit,
  type CommandRule,
  type Policy,
} from '../policy/index.js';
import { chatCommandArgument, chatCommandOf } from '../chat-commands.js';
import { REPORTS_AGENT } from '../identity.js';
import { describeSeconds } from '../turn/index.js';

/**
 * Where the policy (tool-policy.ts) meets a turn and a chat: what bash_exec is told before a
 * command runs, and the owner's `/approve` and `/deny`.
 */
export interface AskSettings {
  dir: AgentDir;
  policy: Policy;
  logger: Logger;
  /** The asking conversation's thread id, and the source of the message its turn answers. */
  conversation: string;
  askedFor: string;
  /**
   * Puts the request into the owner's direct chat with the agent (the one they wrote in last);
   * false when the owner has none.
   */
  tellOwner: (text: string) => Promise<boolean>;
}

/** bash_exec's `authorize` under a rule: null runs the command; a text is why it does not run. */
export function commandAuthorizer(rule: CommandRule, settings: AskSettings): (command: string, signal?: AbortSignal) => Promise<string | null> {
  return async (command, signal) => {
    const tooLong = overReadLimit(rule, command);
    if (tooLong !== null) {
      settings.logger.info(`run: the policy refused a command of ${Buffer.byteLength(command)} bytes in ${settings.conversation} unread`);
      return tooLong;
    }
    const decision = decide(rule, command);
    if (decision === 'allow') return null;
    if (decision === 'deny') {
      settings.logger.info(`run: the policy denied a command in ${settings.conversation}: ${command}`);
      return "denied by the owner's policy for this conversation: it did not run. Do not try to run it another way; answer without it, or say that it needs the owner.";
    }
    return ask(command, settings, signal);
  };
}

async function ask(command: string, settings: AskSettings, signal?: AbortSignal): Promise<string | null> {
  const { dir, policy, logger } = settings;
  const approval = createApproval(dir, { command, conversation: settings.conversation, askedFor: settings.askedFor, timeoutSeconds: policy.approval_timeout_seconds });
  const within = describeSeconds(policy.approval_timeout_seconds);
  if (!(await settings.tellOwner(requestText(dir, approval, within)))) {
    logger.warn(`run: approval ${approval.code} for ${settings.conversation} cannot be asked: the owner has no direct chat with agent ${dir.id}`);
    decideApproval(dir, approval.code, false, 'nobody: the owner has no direct chat with the agent');
    return "needs the owner's approval, and the owner has no direct chat with this agent to be asked in: it did not run. Say that it needs the owner.";
  }
  logger.info(`run: approval ${approval.code} asked of the owner for ${settings.conversation}: ${command}`);
  const outcome = await waitForDecision(dir, approval, signal);
  logger.info(`run: approval ${approval.code}: ${outcome}`);
  switch (outcome) {
    case 'approved':
      return null;
    case 'denied':
      return `the owner denied this command (approval ${approval.code}): it did not run. Do not try to run it another way.`;
    case 'expired':
      return `the owner did not approve this command within ${within} (approval ${approval.code}): it did not run.`;
    case 'aborted':
      return 'not run: the turn ended while it waited for the owner';
  }
}

function requestText(dir: AgentDir, approval: Approval, within: string): string {
  return [`Agent ${dir.id} asks to run a command for ${approval.conversation}:`, approval.command, `Reply /approve ${approval.code} to run it or /deny ${approval.code}, within ${within}.`].join('\n');
}

/** The owner's direct chat with the agent they wrote in last (a source address), or null. */
export async function ownerDirectChat(inbox: StoredThread, policy: Policy): Promise<string | null> {
  const recent = await inbox.peek({ last: 1000, filter: INBOX_FILTER });
  return recent.findLast((event) => isOwnerDirectChat(policy, event.source))?.source ?? null;
}

/**
 * Decides an approval as soon as the run sees the owner's `/approve` or `/deny` in its inbox
 * (inbox-watch.ts), though the turn that asked holds the run: the command's own turn answers it
 * later, in order. Only the owner's direct chats decide.
 */
export function noticeApproval(event: ThreadEvent, dir: AgentDir, policy: Policy, logger: Logger): void {
  const command = chatCommandOf(event);
  if ((command !== 'approve' && command !== 'deny') || !isOwnerDirectChat(policy, event.source)) return;
  const code = chatCommandArgument(textOf(event));
  if (code === null || readApproval(dir, code) === null) return;
  const { state } = decideApproval(dir, code, command === 'approve', decider(event));
  if (state.state === 'decided') logger.info(`run: approval ${code} ${state.decision.approved ? 'approved' : 'denied'} by ${state.decision.by}`);
}

/**
 * The answer to `/approve <code>` or `/deny <code>`: what became of the request, or of the
 * proposal (proposals.ts) — the agent's own, and in the owner's chat with the agent the system
 * agents report to, any agent's.
 */
export function approvalReply(command: 'approve' | 'deny', event: ThreadEvent, dir: AgentDir, policy: Policy, home: string): string {
  if (!isOwner(policy, event.source)) return 'Only the owner can approve or deny commands.';
  if (!isOwnerDirectChat(policy, event.source)) return 'Approve or deny in your direct chat with me, not here.';
  const code = chatCommandArgument(textOf(event));
  if (code === null) return `Say which request: /${command} <code>, as in the request.`;
  const approval = readApproval(dir, code);
  if (!approval) {
    const found = findProposal(home, code, dir.id === REPORTS_AGENT ? undefined : [dir.id]);
    return found ? describeOutcome(decideProposal(home, found.dir, found.proposal, command === 'approve', decider(event)), home) : `There is no request ${code}.`;
  }
  // Mostly decided already, by the run that saw this message come in (noticeApproval).
  const { state } = decideApproval(dir, code, command === 'approve', decider(event));
  if (state.state === 'expired') return `Request ${approval.code} had expired; the command did not run.`;
  if (state.state === 'pending') return `Request ${approval.code} is still open.`;
  const mine = state.decision.by === decider(event);
  const verdict = state.decision.approved ? 'Approved' : 'Denied';
  return mine ? `${verdict}: ${approval.command}` : `Request ${approval.code} was ${verdict.toLowerCase()} before: ${approval.command}`;
}

function decider(event: ThreadEvent): string {
  return `${event.source} (inbox event ${event.id})`;
}

function textOf(event: ThreadEvent): string {
  try {
    return parseMessageContent(event.content).text;
  } catch {
    return '';
  }
}
