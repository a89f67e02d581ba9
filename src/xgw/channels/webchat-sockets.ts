import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { Logger } from '../../core/logger.js';
import { WEBCHAT_PROTOCOL } from './webchat-http.js';
import { MAX_TEXT_BYTES, type MailboxEntry, type ServerMessage } from './webchat-protocol.js';

/** Client messages one socket may have waiting to be handled; past that it is closed (1008). */
export const MAX_QUEUED_MESSAGES = 100;
// Frames larger than this are cut off by `ws` (close 1009); smaller oversize texts get a polite
// error. JSON escaping can make a frame up to 6x its text.
const MAX_FRAME_BYTES = 6 * MAX_TEXT_BYTES + 1024;
const PING_INTERVAL_MS = 30_000;
const STOP_GRACE_MS = 1_000;

/** What a peer's socket is for: its messages, one at a time, and what it is shown on connecting. */
export interface PeerHandler {
  message(ws: WebSocket, peer: string, data: RawData, isBinary: boolean): Promise<void>;
  history(peer: string): MailboxEntry[];
}

/**
 * The web chat's open WebSockets, by peer (a peer's tabs each have one): accepted after the HTTP
 * checks (webchat-routes.ts), pinged so that a dead one is dropped, and what the server tells a
 * peer goes to every one of them.
 */
export class WebchatSockets {
  private readonly byPeer = new Map<string, Set<WebSocket>>();
  private readonly alive = new WeakSet<WebSocket>();
  private wss: WebSocketServer | undefined;
  private pinger: NodeJS.Timeout | undefined;

  constructor(
    private readonly channelId: string,
    private readonly logger: Logger,
    private readonly handler: PeerHandler,
  ) {}

  /** Whether upgrades are taken: between `open` and `close`. */
  get open(): boolean {
    return this.wss !== undefined;
  }

  start(): void {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, handleProtocols: () => WEBCHAT_PROTOCOL });
  }

  /** Pings every socket from now on; one that did not answer the last ping is ended. */
  keepAlive(): void {
    this.pinger = setInterval(() => {
      for (const ws of this.wss?.clients ?? []) {
        if (!this.alive.has(ws)) ws.terminate();
        else {
          this.alive.delete(ws);
          ws.ping();
        }
      }
    }, PING_INTERVAL_MS);
    this.pinger.unref();
  }

  /** Completes the handshake of a peer the HTTP checks let in (`issued`: the credential of a new peer id, told first). */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer, peer: string, issued?: string): void {
    this.wss!.handleUpgrade(req, socket, head, (ws) => this.connected(ws, peer, issued));
  }

  broadcast(peer: string, payload: ServerMessage, except?: WebSocket): void {
    for (const ws of this.byPeer.get(peer) ?? []) if (ws !== except) sendJson(ws, payload);
  }

  /** Closes every socket (those that do not close within a grace period are ended) and the server. */
  async close(): Promise<void> {
    clearInterval(this.pinger);
    this.pinger = undefined;
    const open = [...(this.wss?.clients ?? [])];
    await new Promise<void>((resolve) => {
      if (open.length === 0) return resolve();
      let pending = open.length;
      const done = (): void => void (--pending === 0 && finish());
      const timer = setTimeout(finish, STOP_GRACE_MS);
      function finish(): void {
        clearTimeout(timer);
        for (const ws of open) ws.terminate();
        resolve();
      }
      for (const ws of open) {
        ws.once('close', done);
        ws.close(1001, 'server stopping');
      }
    });
    this.byPeer.clear();
    this.wss?.close();
    this.wss = undefined;
  }

  private connected(ws: WebSocket, peer: string, issued: string | undefined): void {
    const { channelId, logger } = this;
    let peerSockets = this.byPeer.get(peer);
    if (!peerSockets) {
      peerSockets = new Set();
      this.byPeer.set(peer, peerSockets);
    }
    peerSockets.add(ws);
    this.alive.add(ws);
    logger.debug(`${channelId}: peer ${peer} connected (${peerSockets.size} open)`);
    ws.on('pong', () => this.alive.add(ws));
    ws.on('error', (error) => logger.debug(`${channelId}: socket of peer ${peer}: ${error.message}`));
    ws.on('close', () => {
      peerSockets.delete(ws);
      if (peerSockets.size === 0) this.byPeer.delete(peer);
      logger.debug(`${channelId}: peer ${peer} disconnected`);
    });
    // One message at a time per socket, so the mailbox keeps the order the peer wrote in; a
    // client that floods the queue is cut off (its page reconnects and resends what is unacked).
    let queue = Promise.resolve();
    let queued = 0;
    ws.on('message', (data, isBinary) => {
      if (ws.readyState !== ws.OPEN) return;
      if (queued >= MAX_QUEUED_MESSAGES) {
        logger.warn(`${channelId}: peer ${peer} sent more than ${MAX_QUEUED_MESSAGES} messages before they could be handled; closing its connection`);
        return ws.close(1008, 'too many messages at once');
      }
      queued += 1;
      queue = queue
        .then(() => this.handler.message(ws, peer, data, isBinary))
        .catch((error: unknown) => {
          logger.error(`${channelId}: message from peer ${peer} failed: ${error instanceof Error ? error.message : String(error)}`);
        })
        .finally(() => (queued -= 1));
    });
    if (issued !== undefined) sendJson(ws, { type: 'peer', credential: issued });
    sendJson(ws, { type: 'history', messages: this.handler.history(peer) });
  }
}

export function sendJson(ws: WebSocket, payload: ServerMessage): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(payload));
}
