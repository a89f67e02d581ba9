/**
 * The accounting room: what the agent spends and records of what it did. Usage records (a light door
 * for theclaw status), the spend caps and their ledger (budget), a model call's account and an
 * upkeep summariser that reserves before it calls, and the feeds the evolver reads (tool calls,
 * errors). It imports no other room.
 */
export { accountedSummariser, type CallAccount, recordUsage, type Summarise, UpkeepSkipped } from './accounting.js';
export { SpendLedger } from './budget.js';
export { type ErrorFeedEntry, feedCopier, FeedWriter, type ToolcallFeedEntry } from './feeds.js';
export { describeUsage, NO_USAGE, plusUsage, threadUsage, usageOfRecord } from './usage.js';
