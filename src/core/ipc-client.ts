import { connect } from 'node:net';
import { ClawError, errnoCode } from './errors.js';

/**
 * The client's side of the daemons' sockets (ipc.ts, whose servers this speaks to), apart from it:
 * a command that only asks a daemon (web fetch's thin client) loads this and core's errors alone.
 */

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
