export { runAgent, type RunOptions, type RunSummary } from './run.js';
export { deliverReplies, type DeliverOptions, type DeliverSummary } from './deliver.js';
export { initAgent, startAgent, stopAgent, agentStatus, listAgents, conversationThreads, type AgentStatus } from './lifecycle.js';
export { sendToAgent, chatWithAgent, defaultSource } from './send.js';
export { agentDir, requireAgent, loadAgentConfig, listAgentIds, type AgentDir } from './agent-dir.js';
export { routeMessage, threadById } from './router.js';
export { compactIfNeeded, SUMMARISER_PROMPT } from './compaction.js';
export { SYSTEM_AGENTS, isSystemAgentId } from './identity.js';
export * from './types.js';
