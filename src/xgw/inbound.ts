import { encodeSegment, formatAddress } from '../core/address.js';
import { storedFilePath, storeFile } from '../core/agent-files.js';
import { ClawError, isClawError } from '../core/errors.js';
import { agentInboxPath, INBOX_CONSUMER } from '../core/layout.js';
import type { Logger } from '../core/logger.js';
import { formatMessageContent, type Attachment, type GroupContextEntry } from '../core/message.js';
import { MAX_CONTENT_BYTES, MAX_SHARED_FILE_BYTES, threadName, type StoredThread, type ThreadStore } from '../thread/index.js';
import type { ChannelAdapter } from './channel.js';
import type { ContextClaim } from './group-context.js';
import type { GatewayState } from './state.js';
import { splitChannelId, type ChannelConfig, type InboundMessage, type InboundOutcome } from './types.js';

/**
 * A message access.ts let through, into its agent's inbox: its files stored within the channel's
 * `media` limits, its content with the reply context (and in a group its pending context), and the push, keyed by the platform's
 * message id so that a message the platform delivers twice reaches the agent once.
 */
export class Inbound {
  /** Conversations told that their agent is stopped, until a message finds it started again. */
  private readonly toldStopped = new Set<string>();

  /** The push under way in each group, which the next one waits for (see `push`). */
  private readonly groupPushes = new Map<string, Promise<unknown>>();

  constructor(
    private readonly home: string,
    /** Where the agents' inboxes are: the home's SQLite files, or the PostgreSQL every host shares. */
    private readonly store: ThreadStore,
    private readonly state: GatewayState,
    private readonly logger: Logger,
    /** The running adapter of a channel, which downloads the message's files. */
    private readonly adapter: (channelId: string) => ChannelAdapter | undefined,
  ) {}

  /**
   * Pushes `message` from `channel` into `agent`'s inbox, or says why not (what it holds is
   * refused). A group's messages go one at a time, from the claim of its pending context to the
   * push: the store answers asynchronously, and a message coming between would see the rows
   * claimed by a key not yet in the inbox as a crash's leftovers and take them too.
   */
  push(channel: ChannelConfig, message: InboundMessage, agent: string): Promise<InboundOutcome> {
    if (message.conversationType === 'dm' || !('groups' in channel)) return this.pushNow(channel, message, agent);
    const group = `${channel.id}:${message.conversationId}`;
    const previous = this.groupPushes.get(group) ?? Promise.resolve();
    const pushed = previous.then(() => this.pushNow(channel, message, agent));
    const settled = pushed.catch(() => {});
    this.groupPushes.set(group, settled);
    void settled.then(() => this.groupPushes.get(group) === settled && this.groupPushes.delete(group));
    return pushed;
  }

  private async pushNow(channel: ChannelConfig, message: InboundMessage, agent: string): Promise<InboundOutcome> {
    const { logger, home } = this;
    if (message.unsupported) {
      logger.info(`${channel.id}: ${JSON.stringify(message.peerId)} sent ${message.unsupported}, which no agent takes yet`);
      return { kind: 'unsupported', what: message.unsupported };
    }
    const attachments = message.files?.length ? await this.storeFiles(channel, message, agent) : [];
    if (!Array.isArray(attachments)) return attachments;
    const { type: channelType, instance } = splitChannelId(channel.id);
    const source = formatAddress({
      kind: 'external',
      channelType,
      instance,
      conversationType: message.conversationType,
      conversationId: message.conversationId,
      peerId: message.peerId,
    });
    let thread: StoredThread;
    try {
      thread = await this.store.open(threadName(home, agentInboxPath(home, agent)));
    } catch (error) {
      if (!isClawError(error, 'not_found')) throw error;
      logger.error(`${channel.id}: the route for ${JSON.stringify(message.peerId)} names agent ${agent}, which has no inbox in ${this.store.location}`);
      return { kind: 'missing_agent', agent };
    }
    try {
      // The channel id has exactly one ':' (see its schema); the other segments are encoded.
      const key = `${channel.id}:${encodeSegment(message.conversationId)}:${encodeSegment(message.messageId)}`;
      const groupContext = await this.claimContext(channel, message, { agent, key }, thread);
      const content = formatMessageContent({
        text: message.text,
        attachments,
        reply_context: {
          kind: 'external',
          channel_id: channel.id,
          conversation_type: message.conversationType,
          conversation_id: message.conversationId,
          peer_id: message.peerId,
          message_id: message.messageId,
        },
        ...(message.addressed !== undefined && { addressed: message.addressed }),
        ...(groupContext.length > 0 && { group_context: groupContext }),
      });
      // Refused whole rather than stored cut: a platform (or a client) may send more than a thread takes.
      if (Buffer.byteLength(content) > MAX_CONTENT_BYTES) {
        logger.warn(
          `${channel.id}: refused message ${JSON.stringify(message.messageId)} from ${JSON.stringify(message.peerId)}: ${Buffer.byteLength(content)} bytes, more than the ${MAX_CONTENT_BYTES} an inbox event holds`,
        );
        return { kind: 'refused', reason: 'too_long', limit_bytes: MAX_CONTENT_BYTES };
      }
      const [{ id: eventId, duplicate }] = (await thread.append([{ source, type: 'message', content, idempotency_key: key }])) as [{ id: number; duplicate: boolean }];
      if (groupContext.length > 0) this.state.groupContext.consume(channel.id, message.conversationId, key);
      const agentStopped = (await thread.consumer(INBOX_CONSUMER))?.subscribed !== true;
      const conversation = `${agent}:${channel.id}:${encodeSegment(message.conversationId)}`;
      const addressed = message.conversationType === 'dm' || message.addressed === true;
      const notify = agentStopped && addressed && !duplicate && !this.toldStopped.has(conversation);
      if (notify) this.toldStopped.add(conversation);
      if (!agentStopped) this.toldStopped.delete(conversation);
      logger.info(`${channel.id}: ${duplicate ? 'duplicate of' : 'pushed'} event ${eventId} from ${JSON.stringify(message.peerId)} to ${agent}${agentStopped ? ' (stopped: it waits)' : ''}`);
      return { kind: 'accepted', agent, eventId, duplicate, agentStopped, notify };
    } finally {
      await thread.close();
    }
  }

  /**
   * The group's pending context for this message (group-context.ts), claimed for its inbox key;
   * none in a direct chat, nor when the inbox holds the key already (a platform's second delivery:
   * the rows went with the first, and are removed now if a crash kept them).
   */
  private async claimContext(channel: ChannelConfig, message: InboundMessage, claim: ContextClaim, inbox: StoredThread): Promise<GroupContextEntry[]> {
    if (message.conversationType === 'dm' || !('groups' in channel)) return [];
    const store = this.state.groupContext;
    if ((await inbox.findByKey(claim.key)) !== undefined) {
      store.consume(channel.id, message.conversationId, claim.key);
      return [];
    }
    const pushed = new Set<string>();
    for (const other of store.claimsLeft(channel.id, message.conversationId, claim.key)) if (await this.inInbox(other)) pushed.add(other.key);
    return store.claim(channel.id, message.conversationId, claim, channel.groups.context, (other) => pushed.has(other.key));
  }

  /** Whether an agent's inbox holds an event of this key (an inbox that is gone holds none). */
  private async inInbox({ agent, key }: ContextClaim): Promise<boolean> {
    let thread: StoredThread;
    try {
      thread = await this.store.open(threadName(this.home, agentInboxPath(this.home, agent)));
    } catch (error) {
      if (isClawError(error, 'not_found')) return false;
      throw error;
    }
    try {
      return (await thread.findByKey(key)) !== undefined;
    } finally {
      await thread.close();
    }
  }

  /**
   * Downloads the message's files into the agent's `files/` (core/agent-files.ts), within the
   * channel's `media` limits: a file too large, past the peer's quota of the day, or that cannot be
   * fetched is the message's outcome (the person is told), and nothing of the message reaches the
   * agent. On a store shared by hosts the agent's directory may be on another host: the file goes
   * into the store instead (at most `MAX_SHARED_FILE_BYTES`), under the same name, and the agent's
   * host fetches it by that name before the turn (agent/delivery/shared-files.ts).
   */
  private async storeFiles(channel: ChannelConfig, message: InboundMessage, agent: string): Promise<Attachment[] | InboundOutcome> {
    const { state, logger, home } = this;
    const shared = this.store.files;
    const { peer_daily_bytes: quota } = channel.media;
    const maxBytes = shared ? Math.min(channel.media.max_bytes, MAX_SHARED_FILE_BYTES) : channel.media.max_bytes;
    const adapter = this.adapter(channel.id);
    const day = new Date().toISOString().slice(0, 10);
    const attachments: Attachment[] = [];
    for (const file of message.files ?? []) {
      const refused = (reason: 'file_too_large' | 'over_quota'): InboundOutcome => {
        logger.info(`${channel.id}: refused a file from ${JSON.stringify(message.peerId)}: ${reason === 'file_too_large' ? `more than ${maxBytes} bytes` : `past the ${quota} bytes a day`}`);
        return { kind: 'refused', reason, limit_bytes: reason === 'file_too_large' ? maxBytes : quota };
      };
      if ((file.bytes ?? 0) > maxBytes) return refused('file_too_large');
      const used = state.mediaUsed(channel.id, message.peerId, day);
      if (used + (file.bytes ?? 0) > quota) return refused('over_quota');
      let bytes: Buffer;
      try {
        if (!adapter?.download) throw new ClawError('io', `${channel.id} cannot download files`);
        bytes = await adapter.download(file, maxBytes);
      } catch (error) {
        if (isClawError(error, 'usage')) return refused('file_too_large');
        logger.warn(`${channel.id}: could not fetch a file from ${JSON.stringify(message.peerId)}: ${error instanceof Error ? error.message : String(error)}`);
        return { kind: 'file_failed' };
      }
      if (used + bytes.length > quota) return refused('over_quota');
      const path = shared ? storedFilePath(await shared.put(bytes), file) : storeFile(home, agent, bytes, file);
      state.recordMediaUse(channel.id, message.peerId, day, bytes.length);
      attachments.push({ type: file.kind, path, bytes: bytes.length, ...(file.mime_type ? { mime_type: file.mime_type } : {}), ...(file.name ? { name: file.name } : {}) });
    }
    return attachments;
  }
}
