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
 * the contract. A run under way is shared, and its answer kept for a moment after it ends.
 * Channel URLs are dropped: they carry each channel's token, and one web chat's token must not
 * open the others.
 */
export function createSystemStatusSource(home: string, env: NodeJS.ProcessEnv = process.env): () => Promise<unknown> {
  let cached: { endedAt: number | null; value: Promise<unknown> } | undefined;
  return () => {
    if (cached && (cached.endedAt === null || Date.now() - cached.endedAt < CACHE_MS)) return cached.value;
    const entry: { endedAt: number | null; value: Promise<unknown> } = { endedAt: null, value: runStatus(home, env) };
    cached = entry;
    entry.value.then(
      () => {
        entry.endedAt = Date.now();
      },
      () => {
        if (cached === entry) cached = undefined;
      },
    );
    return entry.value;
  };
}

function runStatus(home: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [cliPath('theclaw'), 'status', '--json', '--recent', String(STATUS_PAGE_EVENTS)],
      { env: { ...env, THECLAW_HOME: home }, timeout: TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout) => {
        let parsed: { error?: string; suggestion?: string; channels?: { url?: string }[] };
        try {
          parsed = JSON.parse(stdout) as typeof parsed;
        } catch {
          return reject(
            new ClawError('io', `theclaw status ${error ? `failed (${error.message.split('\n')[0]})` : 'printed something that is not JSON'}`, {
              suggestion: 'run theclaw status --json in a terminal to see why',
            }),
          );
        }
        // With --json a failure is a JSON document too: its own words say why.
        if (error || parsed.error)
          return reject(new ClawError('io', `theclaw status failed: ${parsed.error ?? error?.message}`, { suggestion: parsed.suggestion ?? 'run theclaw status in a terminal' }));
        for (const channel of parsed.channels ?? []) delete channel.url;
        resolve(parsed);
      },
    );
  });
}
