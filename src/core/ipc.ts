import { chmodSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { ClawError, errnoCode, errorToJson } from './errors.js';
import { storageError } from './storage-error.js';
import { ensureDir } from './home.js';

export { notify, request, type RequestOptions, subscribe } from './ipc-client.js';

/**
 * The daemons' local control sockets: one JSON request per connection, one JSON response line
 * back. Unix sockets only (never TCP), created with mode 0600 so that only the owner can talk to
 * a daemon.
 */
export type Handler = (request: unknown) => Promise<unknown> | unknown;

/**
 * A handler's answer that keeps the connection open: after the first line (`{"ok":true,
 * "stream":true}`) the server writes one JSON line per `send` until the client disconnects
 * (`closed` fires) or the server ends it. Used for terminal chat, where replies arrive later.
 */
export class SocketStream {
  constructor(readonly open: (send: (message: unknown) => void, closed: AbortSignal) => void) {}
}

const MAX_REQUEST_BYTES = 1 << 20;

export async function listenSocket(path: string, handle: Handler): Promise<Server> {
  ensureDir(dirname(path));
  // The caller holds the daemon's lock, so a socket file still here belongs to a dead daemon.
  try {
    unlinkSync(path);
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
  }
  const server = createServer((socket) => serve(socket, handle));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // umask-independent: the file is restricted before anyone else can connect in practice, and
    // chmod below makes it exact.
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  return server;
}

/**
 * A socket for one run's sandboxed commands (the embeddings, the browser): `<name>.sock` in a
 * private temp directory of its own, which the sandbox binds; `close` removes both. Short: a
 * socket's path has at most 107 bytes, and an agent's directory can be deep.
 */
export async function listenPrivateSocket(name: string, handle: Handler): Promise<{ socket: string; close: () => Promise<void> }> {
  const folder = mkdtempSync(join(tmpdir(), `theclaw-${name}-`));
  const socket = join(folder, `${name}.sock`);
  const server = await listenSocket(socket, handle);
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

function serve(socket: Socket, handle: Handler): void {
  let buffer = '';
  socket.setEncoding('utf8');
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    if (buffer.length > MAX_REQUEST_BYTES) return socket.destroy();
    const end = buffer.indexOf('\n');
    if (end === -1) return;
    socket.removeAllListeners('data');
    void respond(socket, buffer.slice(0, end), handle);
  });
}

async function respond(socket: Socket, line: string, handle: Handler): Promise<void> {
  let reply: unknown;
  try {
    const result = await handle(JSON.parse(line));
    if (result instanceof SocketStream) return openStream(socket, result);
    reply = { ok: true, result };
  } catch (raw) {
    // errorToJson gives an unexpected error a suggestion too, so that the client's line keeps
    // the `Error: what - how to fix` form.
    const error = storageError(raw) ?? raw;
    // The status goes along: a client tells a platform's outage (5xx, 429) from its refusal (4xx).
    reply = {
      ok: false,
      ...errorToJson(error),
      kind: error instanceof ClawError ? error.kind : 'invalid',
      ...(error instanceof ClawError && error.status !== undefined ? { status: error.status } : {}),
    };
  }
  if (!socket.destroyed) socket.end(JSON.stringify(reply) + '\n');
}

function openStream(socket: Socket, stream: SocketStream): void {
  const closed = new AbortController();
  socket.on('close', () => closed.abort());
  const send = (message: unknown) => {
    if (!socket.destroyed) socket.write(JSON.stringify(message) + '\n');
  };
  // The acceptance and what the stream sends at once (a backlog) in one write: a client that
  // reads them apart could end before the backlog came, which the server took as shown.
  socket.cork();
  send({ ok: true, stream: true });
  stream.open(send, closed.signal);
  process.nextTick(() => socket.uncork());
}
