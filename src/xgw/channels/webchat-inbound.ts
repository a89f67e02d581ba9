import type { RawData, WebSocket } from 'ws';
import * as z from 'zod/mini';
import { deliveryOf, notPassedOn } from '../notices.js';
import type { ChannelContext } from '../channel.js';
import type { InboundOutcome, WebchatChannelConfig } from '../types.js';
import { MAX_TEXT_BYTES, type ClientMessage, type Delivery } from './webchat-protocol.js';
import { sendJson, type WebchatSockets } from './webchat-sockets.js';
import type { WebchatUploads } from './webchat-uploads.js';

/** Files one message may carry. */
const MAX_FILES = 4;
/** Client message ids remembered per channel (with what became of them), so a resend after a reconnect is only acked. */
const RECENT_IDS = 2_000;

const ClientMessageSchema: z.ZodMiniType<ClientMessage> = z.object({
  type: z.literal('message'),
  id: z.string().check(z.regex(/^[A-Za-z0-9_-]{1,64}$/)),
  text: z.string(),
  files: z.optional(z.array(z.object({ id: z.string().check(z.regex(/^[0-9a-f]{32}$/)) })).check(z.maxLength(MAX_FILES))),
});

/**
 * What a peer's page sends: checked (an error for anything the server cannot take, the
 * connection kept), handed to the gateway, acked with whether an answer is on its way, kept in
 * the peer's mailbox and shown in its other tabs, and followed by a notice where the gateway did
 * not pass it on. Every chat is a DM whose conversation id is the peer id.
 */
export class WebchatInbound {
  private readonly recentIds = new Map<string, Delivery>();

  constructor(
    private readonly config: WebchatChannelConfig,
    private readonly uploads: WebchatUploads,
  ) {}

  async take(context: ChannelContext, sockets: WebchatSockets, ws: WebSocket, peer: string, data: RawData, isBinary: boolean): Promise<void> {
    const { config, uploads } = this;
    const { state: gatewayState } = context;
    let json: unknown;
    try {
      json = isBinary ? undefined : JSON.parse(rawText(data));
    } catch {
      json = undefined;
    }
    const parsed = ClientMessageSchema.safeParse(json);
    if (!parsed.success) return sendJson(ws, { type: 'error', text: 'The page sent something the server does not understand. Reload it.' });
    const { id, text } = parsed.data;
    const files = (parsed.data.files ?? []).map((file) => uploads.find(peer, file.id));
    if (files.some((file) => file === undefined)) {
      return sendJson(ws, { type: 'error', id, text: 'A file of that message is no longer held (an upload waits 10 minutes). Attach it again.' });
    }
    const held = files as NonNullable<(typeof files)[number]>[];
    if (Buffer.byteLength(text) > MAX_TEXT_BYTES) {
      return sendJson(ws, { type: 'error', id, text: `That message is too long (the limit is ${MAX_TEXT_BYTES / 1024} KB). Split it or shorten it.` });
    }
    if (text.trim() === '' && held.length === 0) return sendJson(ws, { type: 'error', id, text: 'That message is empty.' });
    // Frames are UTF-8 (ws closes a connection that sends other bytes with 1007), but JSON can
    // still spell a lone surrogate ("\ud800"), which the mailbox (SQLite text) cannot keep as it is.
    if (!text.isWellFormed()) return sendJson(ws, { type: 'error', id, text: 'That message holds a broken character (a lone UTF-16 surrogate). Retype it.' });
    const key = `${peer}:${id}`;
    const known = this.recentIds.get(key);
    if (known) return sendJson(ws, { type: 'ack', id, delivery: known });

    let outcome: InboundOutcome;
    try {
      outcome = await context.receive({ channelId: config.id, conversationType: 'dm', conversationId: peer, peerId: peer, messageId: id, text, ...(held.length ? { files: held } : {}) });
    } catch (error) {
      context.logger.error(`${config.id}: could not take a message from peer ${peer}: ${error instanceof Error ? error.message : String(error)}`);
      return sendJson(ws, { type: 'error', id, text: 'The message could not be delivered. Try again in a moment; the owner can look at the xgw log.' });
    }
    const delivery = deliveryOf(outcome);
    this.remember(key, delivery);
    uploads.forget(held.map((file) => file.ref));
    if (!(outcome.kind === 'accepted' && outcome.duplicate)) {
      const shown = held.length ? { files: held.map((file) => ({ name: file.name, bytes: file.bytes })) } : {};
      const entry = gatewayState.addToMailbox(config.id, peer, { role: 'user', text, reply_to: null, message_id: id, ...shown }, config.history_limit);
      sockets.broadcast(peer, { type: 'message', message: entry }, ws); // the peer's other tabs
    }
    sendJson(ws, { type: 'ack', id, delivery });
    const notice = context.noticeFor(outcome) ?? notPassedOn(outcome);
    if (notice !== null) {
      const entry = gatewayState.addToMailbox(config.id, peer, { role: 'system', text: notice, reply_to: null }, config.history_limit);
      sockets.broadcast(peer, { type: 'message', message: entry });
    }
  }

  private remember(key: string, delivery: Delivery): void {
    this.recentIds.set(key, delivery);
    if (this.recentIds.size > RECENT_IDS) this.recentIds.delete(this.recentIds.keys().next().value!);
  }
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
}
