/**
 * The policy room: what a tool call may do and who decides. The tool policy and the shell command
 * rules it reads (wrappers, names), the bubblewrap profile a turn runs in and the sends a sandbox
 * queues, and the owner's decisions on record (approvals, the evolver's proposals). It may use
 * memory (the profile binds memory folders) and accounting (proposals write a feed).
 */
export { type Approval, createApproval, decideApproval, readApproval, waitForDecision } from './approvals.js';
export { decideProposal, describeOutcome, findProposal } from './proposals.js';
export { agentSandbox, messageScope, sandboxFact, turnShows, type TurnScope, turnWorkdir } from './sandbox-profile.js';
export { ATTACH_PREFIX, outboxDir } from './sandbox-sends.js';
export { type CommandRule, commandRuleFor, commandsFact, decide, isOwner, isOwnerDirectChat, offersTools, overReadLimit, type Policy } from './tool-policy.js';
