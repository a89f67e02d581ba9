import { join } from 'node:path';
import { ClawError } from '../core/errors.js';
import { requireAgent } from './agent-dir.js';
import { decideApproval, pendingApprovals, readApproval, type Approval } from './policy/approvals.js';
import { decideProposal, describeOutcome, pendingProposals, readProposal, type Proposal, type ProposalDecision } from './policy/proposals.js';

/**
 * What waits for the owner's decision in an agent (commands under a policy `ask`, changes the
 * evolver proposed), and the decision itself, as `agent approvals|approve|deny` and the owner's
 * control page take them: one path, so that the two cannot differ.
 */

export interface WaitingDecisions {
  commands: Approval[];
  /** Without their text (the new file), with where the proposal is. */
  proposals: (Omit<Proposal, 'text'> & { path: string })[];
}

export function waitingDecisions(home: string, id: string): WaitingDecisions {
  const dir = requireAgent(home, id);
  return {
    commands: pendingApprovals(dir),
    proposals: pendingProposals(dir).map(({ text: _, ...proposal }) => ({ ...proposal, path: join(dir.root, 'proposals', `${proposal.code}.md`) })),
  };
}

export type OwnerDecision =
  | { kind: 'proposal'; code: string; outcome: ProposalDecision['outcome']; file: string; before: string | null; text: string }
  | { kind: 'command'; code: string; approved: boolean; command: string; text: string };

/**
 * Approves or denies the command request or proposal `code` of agent `id`, as `by`. Throws a
 * conflict when it was decided before, expired, or (a proposal) its file changed since.
 */
export function decideFor(home: string, id: string, code: string, approved: boolean, by: string): OwnerDecision {
  const dir = requireAgent(home, id);
  const proposal = readApproval(dir, code) ? null : readProposal(dir, code);
  if (proposal) {
    const outcome = decideProposal(home, dir, proposal, approved, by);
    if (!outcome.mine) throw new ClawError('conflict', `proposal ${proposal.code} was ${outcome.decision.outcome} already, by ${outcome.decision.by}`, { suggestion: 'nothing to do' });
    if (outcome.decision.outcome === 'stale')
      throw new ClawError('conflict', `${id}'s ${proposal.file} changed since proposal ${proposal.code} was made; it is not applied`, {
        suggestion: 'the evolver proposes again from the file as it is now',
      });
    return { kind: 'proposal', code: proposal.code, outcome: outcome.decision.outcome, file: proposal.file, before: approved ? outcome.before : null, text: describeOutcome(outcome, home) };
  }
  const { approval, state } = decideApproval(dir, code, approved, by);
  if (state.state === 'expired')
    throw new ClawError('conflict', `approval ${approval.code} expired at ${approval.expires_at}; the command did not run`, { suggestion: 'the agent asks again if it still needs it' });
  if (state.state !== 'decided') throw new ClawError('io', `approval ${approval.code} could not be decided`, { suggestion: 'try again' });
  const mine = state.decision.approved === approved && state.decision.by === by;
  if (!mine) throw new ClawError('conflict', `approval ${approval.code} was ${state.decision.approved ? 'approved' : 'denied'} already, by ${state.decision.by}`, { suggestion: 'nothing to do' });
  return { kind: 'command', code: approval.code, approved, command: approval.command, text: `${approved ? 'approved' : 'denied'}: ${approval.command}` };
}
