import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { listenSocket } from '../core/ipc.js';
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
  // Short: a socket's path has at most 107 bytes.
  const folder = mkdtempSync(join(tmpdir(), 'theclaw-browser-'));
  const socket = join(folder, 'browser.sock');
  const server = await listenSocket(socket, async (raw) => {
    const { command } = validate(ProxyRequestSchema, raw, { what: 'browser request', kind: 'usage', suggestion: 'send {"op":"command","command":{...}}' });
    return askAgentBrowser(home, agent, command, env);
  });
  return {
    socket,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          rmSync(folder, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
