import { agentRoot } from '../core/layout.js';
import { fetchPage } from './fetch.js';
import type { ServiceFetch } from './fetch-request.js';
import { fetchOutput } from './format.js';

/**
 * `web fetch` done by a warm process on the host for a thin client (fetch-client.ts): the
 * browser service, reached in a turn through the run's proxy (which names the turn's own agent,
 * whatever the sandbox sends) and from the owner's terminal through its control socket. The
 * page goes through the same `fetchPage` as in the CLI's own process (the guard at every hop,
 * the cache), into the agent's cache, and comes back as the exact bytes the CLI prints.
 */

/** The page as `web fetch` with these flags prints it, cached in `agent`'s workdir (else the home's cache). */
export async function answerFetch(home: string, request: ServiceFetch): Promise<{ stdout: string }> {
  const env = request.agent ? { THECLAW_AGENT_DIR: agentRoot(home, request.agent) } : {};
  const page = await fetchPage(
    request.url,
    { maxChars: request.max_chars, raw: request.raw, fresh: request.fresh, timeoutSeconds: request.timeout_seconds, maxBytes: request.max_bytes },
    { home, env },
  );
  return { stdout: fetchOutput(page, request) };
}

/** The article reader's code (a DOM, Readability, turndown), loaded before the first page needs it. */
export function preloadReader(): Promise<unknown> {
  return import('./article.js');
}
