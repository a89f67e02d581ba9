import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { ClawError } from '../../core/errors.js';
import type { MailboxEntry } from '../state.js';
import type { ServerMessage } from './webchat-protocol.js';
import { webchatProtocols } from './webchat-http.js';

/**
 * A program talking to the web chat the way its page does on its first visit: open `/ws` with the
 * page's Origin, offering the URL's token in the handshake, and chat under the peer id the server
 * issues. `theclaw demo` sends its message through
 * it, so the demo crosses the same door a browser does.
 */
export interface WebchatClient {
  /** Sends a message; resolves when the server acknowledged it (it is in the agent's inbox). */
  send(text: string, signal?: AbortSignal): Promise<void>;
  /** The next message of the agent (not the peer's own, not a system notice). */
  nextReply(signal?: AbortSignal): Promise<MailboxEntry>;
  close(): void;
}

export async function connectWebchat(url: string, signal?: AbortSignal): Promise<WebchatClient> {
  const page = new URL(url);
  const token = page.searchParams.get('token');
  if (!token) throw new ClawError('invalid', `the web chat URL ${page.origin} has no token`, { suggestion: 'use the URL that xgw status prints' });
  const ws = new WebSocket(`ws://${page.host}/ws`, webchatProtocols(token), { origin: page.origin });
  const queue: ServerMessage[] = [];
  const waiters: (() => void)[] = [];
  let closed: Error | undefined;
  const wake = () => {
    for (const resolve of waiters.splice(0)) resolve();
  };
  ws.on('message', (data) => {
    let message: ServerMessage;
    try {
      message = JSON.parse(String(data)) as ServerMessage;
    } catch {
      return; // not the protocol: nothing a caller waits for
    }
    if (message.type === 'typing' || message.type === 'peer') return; // nothing a caller waits for either
    queue.push(message);
    wake();
  });
  ws.on('close', () => {
    closed = new ClawError('io', 'the web chat closed the connection', { suggestion: 'see the xgw log' });
    wake();
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('unexpected-response', (_request, response) =>
      reject(new ClawError('io', `the web chat refused the connection (HTTP ${response.statusCode})`, { suggestion: 'use the URL with the token that xgw status prints' })),
    );
    ws.once('error', (error) => reject(new ClawError('io', `cannot reach the web chat at ${page.origin}: ${error.message}`, { suggestion: 'is xgw running? see xgw status' })));
    ws.once('open', () => resolve());
    signal?.addEventListener('abort', () => ws.terminate(), { once: true });
  });

  /** Takes the first queued message that `pick` accepts, waiting for one. */
  const take = async <T>(pick: (message: ServerMessage) => T | undefined, signal?: AbortSignal): Promise<T> => {
    for (;;) {
      signal?.throwIfAborted();
      const index = queue.findIndex((message) => pick(message) !== undefined);
      if (index >= 0) return pick(queue.splice(index, 1)[0]!)!;
      if (closed) throw closed;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          resolve();
        };
        waiters.push(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  };

  return {
    async send(text, signal) {
      const id = randomBytes(8).toString('hex');
      ws.send(JSON.stringify({ type: 'message', id, text }));
      const answer = await take((m) => ((m.type === 'ack' || m.type === 'error') && 'id' in m && m.id === id ? m : undefined), signal);
      if (answer.type === 'error') throw new ClawError('invalid', `the web chat refused the message: ${answer.text}`, { suggestion: 'see the xgw log' });
    },
    nextReply(signal) {
      return take((m) => (m.type === 'message' && m.message.role === 'agent' ? m.message : undefined), signal);
    },
    close() {
      ws.close();
    },
  };
}
