export { chat, DEFAULT_SYSTEM_PROMPT, type ChatOptions } from './chat.js';
export { bashExec, BASH_EXEC_TOOL, HeadTail, type BashExecOptions } from './bash-exec.js';
export { ModelCallError, classify } from './model-error.js';
export { loadPaiConfig, resolveModel, chooseModel, providerSecrets, MOCK_PROVIDER, BUILTIN_PROVIDERS, type ModelChoice } from './models.js';
export { preloadProvider } from './pi.js';
export { BASE_SANDBOX_ENV, findBwrap, sandboxProblem, type Sandbox, type SandboxBind } from './sandbox.js';
export { readSession, appendSession, SessionLineSchema, type ImageRef, type SessionLine } from './session.js';
export { createModelCaller, type ModelCaller, type ModelRequest, type ModelReply, type CallResult } from './llm.js';
export * from './types.js';
