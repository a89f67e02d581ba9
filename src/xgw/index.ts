export { Gateway, type GatewayOptions } from './gateway.js';
export type { SendRequest, SendResult } from './delivery.js';
export { noticeFor } from './notices.js';
export { runXgw } from './daemon.js';
export { DEFAULT_XGW_CONFIG, loadXgwConfig, checkConfig, inspectXgwConfig, describeFindings, xgwCheckEnvironment, type ConfigFinding, type XgwConfigReport } from './config.js';
export { GatewayState, type PairingRequest, type MailboxEntry } from './state.js';
export { findRoute } from './route.js';
export { runTerminalChat, type TerminalChatOptions } from './chat-client.js';
export { askXgw, isXgwUnavailable } from './client.js';
export { connectWebchat, type WebchatClient } from './channels/webchat-client.js';
export type { XgwReloadResult, XgwRequest, XgwStatus } from './protocol.js';
export * from './types.js';
export type { ChannelAdapter, ChannelContext } from './channel.js';
export { startGateway, gatewayStatus, reloadGateway, describeReload } from './control.js';
export { createChannel } from './channels/index.js';
export { addChannel, addRoute } from './config-edit.js';
export { createControlSource, parseControlAction, type ControlSource, type RunnerAnswer, type RunnerRequest } from './control-source.js';
export type {
  BudgetLeft,
  ControlAction,
  ControlAgent,
  ControlOutcome,
  ControlView,
  ConversationMessage,
  ConversationSummary,
  ConversationView,
  Problem,
  Spend,
  SpendDay,
  WaitingItem,
} from './channels/control-protocol.js';
export { approvePairing, denyPairing, pendingPairings } from './pairing.js';
