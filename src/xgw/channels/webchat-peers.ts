import { createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from './webchat-http.js';

/**
 * The web chat's peer ids, issued by the server. A peer id is what a person's chat is kept under
 * (their mailbox, their conversation with the agent, a pairing admission), and people may share a
 * channel's token (a guest web chat), so it cannot be whatever a client sends: the server makes a
 * new browser's id and signs it with the channel's peer key (`xgw/webchat-<instance>.peer-key`,
 * webchat-token.ts). The page keeps the credential `<peer id>.<signature>` and offers it on every
 * connection, upload and file fetch; one without a valid signature is ignored, and its socket
 * chats under a new id.
 */

/** A credential as the server issues it: the peer id (16 random bytes in hex) and its HMAC-SHA256. */
export const PEER_CREDENTIAL = /^([0-9a-f]{32})\.([0-9a-f]{64})$/;

export class WebchatPeers {
  constructor(
    private readonly key: string,
    private readonly channelId: string,
  ) {}

  /** A new peer id with its credential. */
  issue(): { peer: string; credential: string } {
    const peer = randomBytes(16).toString('hex');
    return { peer, credential: this.credential(peer) };
  }

  /** The credential of a peer id this channel issued. */
  credential(peer: string): string {
    return `${peer}.${this.signature(peer)}`;
  }

  /** The peer id of a credential this channel issued; undefined for anything else. */
  verify(credential: string | undefined): string | undefined {
    const match = PEER_CREDENTIAL.exec(credential ?? '');
    if (!match) return undefined;
    const peer = match[1]!;
    return safeEqual(match[2]!, this.signature(peer)) ? peer : undefined;
  }

  // The channel's id is signed too, so that one channel's credential means nothing to another.
  private signature(peer: string): string {
    return createHmac('sha256', this.key).update(`${this.channelId}\n${peer}`).digest('hex');
  }
}
