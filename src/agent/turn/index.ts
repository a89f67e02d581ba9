/**
 * The turn room: one model turn and what keeps it going. The model call, compaction and a fresh
 * conversation's summary, the memory flush and condensing that upkeep runs, context overflow, how a
 * failure is told and retried (failure, failover, outage), a turn's attempts and its /stop. It may
 * use memory, accounting and policy; no room below it knows of a turn.
 */
export { classifyFailure, noticeEvent } from './failure.js';
export { compactIfNeeded } from './compaction.js';
export { startFreshConversation } from './fresh-conversation.js';
export { callModel, turnRecorder, withAgentSettings } from './model-call.js';
export { describeSeconds } from './turn-attempts.js';
export { messageAccount, type MessageAccount, type MessageOutcome, type ModelInput, type ReplyProgress, type TakenMessage, type TurnSettings } from './turn-settings.js';
export { runModelTurn, type TurnSurroundings } from './model-turn.js';
