export { up, down, defaultModel, OFFLINE_NOTICE, type UpResult, type ModelChoice } from './system.js';
export { systemStatus, statusDetails, type SystemStatus, type StatusDetails, type ComponentStatus, type QueueStatus, type ThreadActivity, type UsageDay, type EventLine } from './status.js';
export { doctor, type Check, type CheckStatus } from './doctor.js';
export { runDemo, DEMO_MESSAGE, type DemoResult, type DemoOptions } from './demo.js';
