/**
 * The conversation room: the exchange with a person around the turns. The reply context, the queue
 * of a conversation's messages, chat commands' replies, and asking and telling the owner (owner
 * approval, owner notices). It may use turn, policy, accounting and memory.
 */
export { commandAuthorizer, ownerDirectChat } from './owner-approval.js';
export { tellOwnerOf } from './owner-notice.js';
export { answerCommand } from './answer-command.js';
