export { askAgentBrowser, askBrowserService, browserServiceStatus, ensureBrowserService, sendCommand } from './client.js';
export { serveBrowserProxy } from './proxy.js';
export { browserProfileDir, CHROMIUM, loadBrowserLimits } from './limits.js';
export { createBrowserProgram } from './program.js';
export * from './types.js';
