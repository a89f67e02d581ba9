import * as z from 'zod/mini';
import { listenPrivateSocket } from '../core/ipc.js';
import { validate } from '../core/validate.js';
import { askAgentBrowser } from './client.js';
import { BrowserCommandSchema } from './types.js';

const ProxyRequestSchema = z.strictObject({ op: z.literal('command'), command: BrowserCommandSchema });

/**
 * An agent run's door to the browser service for its turns' commands: a socket in a private
 * directory of its own (bound into the sandbox, as the embeddings socket is), whose every request
 * goes to this agent's browser, whatever the sandboxed caller says. The service starts on the
 * first command, so a turn that never browses costs nothing.
 */
export async function serveBrowserProxy(home: string, agent: string, env: NodeJS.ProcessEnv): Promise<{ socket: string; close: () => Promise<void> }> {
  return listenPrivateSocket('browser', async (raw) => {
    const { command } = validate(ProxyRequestSchema, raw, { what: 'browser request', kind: 'usage', suggestion: 'send {"op":"command","command":{...}}' });
    return askAgentBrowser(home, agent, command, env);
  });
}
