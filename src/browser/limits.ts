import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { loadYamlConfig } from '../core/config.js';
import { agentRoot } from '../core/layout.js';
import { BrowserLimitsSchema, DEFAULT_BROWSER_LIMITS, type BrowserLimits } from './types.js';

/** Debian's chromium, which every agent's browser runs. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * The browser itself behind Debian's launcher script (CHROMIUM), which every start would pay
 * for: a shell and a dozen processes (grep, findmnt, ls, tr...) before the browser, and flags and
 * variables a headless browser does not want (Google's API keys, GPU rasterization, extensions).
 */
const CHROMIUM_BINARY = '/usr/lib/chromium/chromium';

/** What an agent's browser runs: the browser itself where Debian's package put it, else CHROMIUM. */
export function chromiumExecutable(): string {
  return existsSync(CHROMIUM_BINARY) ? CHROMIUM_BINARY : CHROMIUM;
}

/** An agent's Chromium profile: `agents/<id>/browser/profile`. */
export function browserProfileDir(home: string, agent: string): string {
  return join(agentRoot(home, agent), 'browser', 'profile');
}

/** `browser:` of the agent's config.yaml (the rest of it is the agent runtime's to check). */
export function loadBrowserLimits(home: string, agent: string): BrowserLimits {
  const config = loadYamlConfig(join(agentRoot(home, agent), 'config.yaml'), z.looseObject({ browser: z.optional(BrowserLimitsSchema) }));
  return config.browser ?? DEFAULT_BROWSER_LIMITS;
}
