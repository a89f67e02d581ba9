import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { socketPath } from '../core/home.js';
import { listenSocket, SocketStream } from '../core/ipc.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { runTerminalChat } from './chat-client.js';
import type { MailboxEntry } from './protocol.js';

// The terminal chat against a stand-in for xgw's socket that answers a message over the stream
// before it answers the send itself, as a fast agent's reply can: the reply and the send's answer
// travel on two connections, in either order.
describe('terminal chat', () => {
  let t: TestHome;
  beforeEach(() => {
    t = createTestHome();
  });
  afterEach(() => t.cleanup());

  it('counts an answer that came before xgw said the message was taken: it ends once the input does, without waiting', async () => {
    let push: ((entry: MailboxEntry) => void) | undefined;
    let nextId = 1;
    const server = await listenSocket(socketPath(t.home, 'xgw'), async (request) => {
      const { op, message_id: messageId } = request as { op: string; message_id?: string };
      if (op === 'chat_attach') return new SocketStream((send) => (push = send));
      push!({ id: nextId++, role: 'agent', text: 'echo: hi', reply_to: messageId!, created_at: new Date().toISOString() });
      // The send's own answer leaves after the stream's line has been read.
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { kind: 'accepted' };
    });
    try {
      const input = new PassThrough();
      const output = new PassThrough();
      let shown = '';
      output.on('data', (chunk) => (shown += chunk));
      input.end('hi\n');
      await runTerminalChat({ home: t.home, agent: 'admin', input, output, status: new PassThrough() as unknown as NodeJS.WriteStream, waitSeconds: 3 });
      expect(shown).toBe('echo: hi\n');
    } finally {
      server.close();
    }
  });
});
