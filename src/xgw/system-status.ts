import { execFile } from 'node:child_process';
import { ClawError } from '../core/errors.js';
import { cliPath } from '../core/package.js';

/** Events per thread the status page lists. */
export const STATUS_PAGE_EVENTS = 10;
/** A page refreshing every few seconds, or several open at once, costs one run per this long. */
const CACHE_MS = 2_000;
const TIMEOUT_MS = 10_000;

/**
 * The whole system's status for the web chat's status page, from `theclaw status --json`. The
 * gateway runs the umbrella tool rather than importing it: the umbrella depends on xgw (and on
 * agent, which depends on xgw), so an import would turn the dependencies into a cycle; the CLI is
 * the contract. Runs are shared while one is under way and cached briefly.
 */
export function createSystemStatusSource(home: string, env: NodeJS.ProcessEnv = process.env): () => Promise<unknown> {
  let cached: { at: number; value: Promise<unknown> } | undefined;
  return () => {
    if (cached && Date.now() - cached.at < CACHE_MS) return cached.value;
    const value = new Promise<unknown>((resolve, reject) => {
      execFile(
        process.execPath,
        [cliPath('theclaw'), 'status', '--json', '--recent', String(STATUS_PAGE_EVENTS)],
        { env: { ...env, THECLAW_HOME: home }, timeout: TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          if (error) return reject(new ClawError('io', `theclaw status failed: ${stderr.trim().split('\n').at(-1) ?? error.message}`, { suggestion: 'run theclaw status in a terminal to see why' }));
          try {
            resolve(JSON.parse(stdout));
          } catch {
            reject(new ClawError('io', 'theclaw status printed something that is not JSON', { suggestion: 'run theclaw status --json in a terminal to see why' }));
          }
        },
      );
    });
    cached = { at: Date.now(), value };
    value.catch(() => (cached = undefined));
    return value;
  };
}
