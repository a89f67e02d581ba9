import { join } from 'node:path';
import * as z from 'zod/mini';
import { loadYamlConfig } from '../core/config.js';
import { agentRoot } from '../core/layout.js';
import { BrowserLimitsSchema, DEFAULT_BROWSER_LIMITS, type BrowserLimits } from './types.js';

/** Debian's chromium, which every agent's browser runs. */
export const CHROMIUM = '/usr/bin/chromium';

/** An agent's Chromium profile: `agents/<id>/browser/profile`. */
export function browserProfileDir(home: string, agent: string): string {
  return join(agentRoot(home, agent), 'browser', 'profile');
}

/** `browser:` of the agent's config.yaml (the rest of it is the agent runtime's to check). */
export function loadBrowserLimits(home: string, agent: string): BrowserLimits {
  const config = loadYamlConfig(join(agentRoot(home, agent), 'config.yaml'), z.looseObject({ browser: z.optional(BrowserLimitsSchema) }));
  return config.browser ?? DEFAULT_BROWSER_LIMITS;
}
