import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { packageRoot } from '../core/package.js';
import { ensureDir } from '../core/home.js';

/** Debian's chromium (`.ci/run` installs it); browser tests skip, saying so, where it is missing. */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

/**
 * Headless chromium with the flags that keep it off the network: this machine has none, and
 * without them chromium keeps trying background connections.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-default-apps'],
  });
}

/** Where browser tests save screenshots for a human to look at (`.test-artifacts/<name>`, ignored by git). */
export function artifactPath(name: string): string {
  const dir = join(packageRoot(), '.test-artifacts');
  ensureDir(dir);
  return join(dir, name);
}
