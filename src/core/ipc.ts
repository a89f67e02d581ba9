import { chmodSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { ClawError, errnoCode, errorToJson } from './errors.js';
import { storageError } from './storage-error.js';
import { ensureDir } from './home.js';

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

/**
 * Opens a stream (see SocketStream): resolves once the server accepted it, then calls
 * `onMessage` for each line until `signal` aborts or the server goes away (`onClose`).
 */
export function subscribe(path: string, message: unknown, handlers: { onMessage: (message: unknown) => void; onClose?: () => void }, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let buffer = '';
    let accepted = false;
    signal?.addEventListener('abort', () => socket.destroy(), { once: true });
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(JSON.stringify(message) + '\n'));
    socket.on('error', (error) => {
      if (accepted) return;
      const code = errnoCode(error);
      const down = code === 'ENOENT' || code === 'ECONNREFUSED';
      reject(new ClawError(down ? 'not_found' : 'io', down ? `nothing listens on ${path}` : error.message, { cause: error }));
    });
    socket.on('close', () => {
      if (accepted) handlers.onClose?.();
      else reject(new ClawError('io', `the daemon on ${path} closed the connection without an answer`));
    });
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (let end = buffer.indexOf('\n'); end !== -1; end = buffer.indexOf('\n')) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        let parsed: { ok?: boolean; stream?: boolean; error?: string; kind?: ClawError['kind']; suggestion?: string };
        try {
          parsed = JSON.parse(line);
        } catch {
          continue;
        }
        if (accepted) handlers.onMessage(parsed);
        else if (parsed.ok && parsed.stream) {
          accepted = true;
          resolve();
        } else {
          socket.destroy();
          reject(new ClawError(parsed.kind ?? 'invalid', parsed.error ?? 'stream refused', { suggestion: parsed.suggestion }));
        }
      }
    });
  });
}

export interface RequestOptions {
  /** Give up after this long. Default: 5000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Sends one request and waits for the response. A daemon that is not running is a `not_found`
 * error (no socket, or nobody listening); a daemon that answers too slowly is a `timeout`.
 */
export function request<T = unknown>(path: string, message: unknown, options: RequestOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  return new Promise<T>((resolve, reject) => {
    const socket = connect(path);
    let buffer = '';
    const fail = (error: ClawError) => {
      socket.destroy();
      reject(error);
    };
    const onAbort = () => fail(new ClawError('aborted', 'request aborted'));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.setTimeout(timeoutMs, () => fail(new ClawError('timeout', `no answer on ${path} within ${timeoutMs} ms`)));
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(JSON.stringify(message) + '\n'));
    socket.on('data', (chunk: string) => (buffer += chunk));
    socket.on('error', (error) => {
      const code = errnoCode(error);
      const down = code === 'ENOENT' || code === 'ECONNREFUSED';
      fail(new ClawError(down ? 'not_found' : 'io', down ? `nothing listens on ${path}` : error.message, { cause: error }));
    });
    socket.on('close', () => {
      options.signal?.removeEventListener('abort', onAbort);
      const line = buffer.split('\n')[0] ?? '';
      if (!line) return reject(new ClawError('io', `the daemon on ${path} closed the connection without an answer`));
      let reply: { ok: boolean; result?: T; error?: string; kind?: ClawError['kind']; suggestion?: string; status?: number };
      try {
        reply = JSON.parse(line);
      } catch {
        return reject(new ClawError('io', `the daemon on ${path} answered with malformed JSON`));
      }
      if (reply.ok) resolve(reply.result as T);
      else reject(new ClawError(reply.kind ?? 'invalid', reply.error ?? 'request failed', { suggestion: reply.suggestion, status: reply.status }));
    });
  });
}

/**
 * Sends a message without waiting for an answer and never fails: used for pokes, where a daemon
 * that is down simply finds the work on its next sweep. The returned promise settles when the
 * message was handed to the kernel or dropped, within `timeoutMs`.
 */
export function notify(path: string, message: unknown, timeoutMs = 500): Promise<void> {
  return new Promise<void>((resolve) => {
    const socket = connect(path);
    const done = () => {
      socket.destroy();
      resolve();
    };
    socket.setTimeout(timeoutMs, done);
    socket.on('error', done);
    socket.on('connect', () => socket.end(JSON.stringify(message) + '\n', done));
  });
}
