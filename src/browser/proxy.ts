import * as z from 'zod/mini';
import { isClawError } from '../core/errors.js';
import { listenPrivateSocket } from '../core/ipc.js';
import { redactedError } from '../core/secrets.js';
import { validate } from '../core/validate.js';
import { parseFetchRequest } from '../web/fetch-request.js';
import { askAgentBrowser, askBrowserService } from './client.js';
import { BrowserCommandSchema } from './types.js';

const ProxyRequestSchema = z.strictObject({ op: z.literal('command'), command: BrowserCommandSchema });

/**
 * An agent run's door to the browser service for its turns' commands: a socket in a private
 * directory of its own (bound into the sandbox, as the embeddings socket is), whose every request
 * goes to this agent's browser, whatever the sandboxed caller says. It takes the turns' `web
 * fetch` too (web/fetch-client.ts), which the service does warm, into this agent's cache. The
 * service starts on the first request, so a turn that never browses or fetches costs nothing.
 */
export async function serveBrowserProxy(home: string, agent: string, env: NodeJS.ProcessEnv): Promise<{ socket: string; close: () => Promise<void> }> {
  return listenPrivateSocket('browser', async (raw) => {
    // The sandbox's request names no agent (a strict schema): the service is told this run's.
    if ((raw as { op?: unknown } | null)?.op === 'fetch')
      return askBrowserService(home, { ...parseFetchRequest(raw), agent }, env).catch((error: unknown) => Promise.reject(isClawError(error) ? redactedError(error, env) : error));
    const { command } = validate(ProxyRequestSchema, raw, { what: 'browser request', kind: 'usage', suggestion: 'send {"op":"command","command":{...}} or {"op":"fetch","url":"..."}' });
    return askAgentBrowser(home, agent, command, env);
  });
}
