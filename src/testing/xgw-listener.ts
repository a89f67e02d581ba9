import { socketPath } from '../core/home.js';
import { listenSocket } from '../core/ipc.js';
import type { XgwRequest } from '../xgw/index.js';

/** A stand-in for xgw's control socket in `home`: it answers every request with `{}` and keeps what it was told. */
export interface XgwListener {
  told: XgwRequest[];
  close(): Promise<void>;
}

export async function listenAsXgw(home: string): Promise<XgwListener> {
  const told: XgwRequest[] = [];
  const server = await listenSocket(socketPath(home, 'xgw'), (request) => {
    told.push(request as XgwRequest);
    return {};
  });
  return { told, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
