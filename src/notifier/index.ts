export { runNotifier } from './daemon.js';
export { startDaemon, stopDaemon, daemonStatus, reloadNotifier, describeNotifierReload, addTimer, removeTimer, listTimers } from './control.js';
export { loadConfig, NotifierConfigSchema, type NotifierConfig } from './config.js';
export { parseSchedule, parseDuration, nextRunAt, type Schedule, type Timer, type TimerJson } from './timers.js';
export type { NotifierReloadResult, NotifierRequest, NotifierStatus, SubscriptionStatus } from './types.js';
