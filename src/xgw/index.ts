export { Gateway, type SendRequest, type SendResult, type GatewayOptions } from './gateway.js';
export { noticeFor } from './notices.js';
export { runXgw } from './daemon.js';
export { loadXgwConfig, checkConfig, inspectXgwConfig, xgwConfigPath, type XgwConfigReport } from './config.js';
export { GatewayState, type PairingRequest, type MailboxEntry } from './state.js';
export { findRoute } from './route.js';
export { runTerminalChat, type TerminalChatOptions } from './chat-client.js';
export type { XgwRequest, XgwStatus } from './protocol.js';
export * from './types.js';
