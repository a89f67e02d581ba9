import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ClawError, errnoCode } from '../../core/errors.js';

/** The HTTP side of the channels that serve one (web chat, API): listening, the error a start fails with, closing. */

/** Listens on the channel's host and port; resolves with the port (the one picked, for port 0). */
export async function listenHttp(http: Server, channel: { id: string; host: string; port: number }): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(channel.port, channel.host, () => {
        http.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    throw listenError(error, channel);
  }
  return (http.address() as AddressInfo).port;
}

/** Closes the server and every connection it holds. */
export async function closeHttp(http: Server | undefined): Promise<void> {
  if (!http?.listening) return;
  await new Promise<void>((resolve) => {
    http.close(() => resolve());
    http.closeAllConnections();
  });
}

function listenError(error: unknown, channel: { id: string; host: string; port: number }): ClawError {
  const what = `${channel.id} cannot listen on ${channel.host}:${channel.port}`;
  const code = errnoCode(error);
  if (code === 'EADDRINUSE') {
    return new ClawError('conflict', `${what}: the port is in use`, {
      suggestion: `set another port for ${channel.id} in xgw/config.yaml (0 picks a free one), or stop the program that uses it`,
      cause: error,
    });
  }
  const reason = code === 'EADDRNOTAVAIL' ? 'no such address on this machine' : error instanceof Error ? error.message : String(error);
  return new ClawError('io', `${what}: ${reason}`, { suggestion: `check host and port of ${channel.id} in xgw/config.yaml`, cause: error });
}
