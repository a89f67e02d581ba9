import { userInfo } from 'node:os';
import { ClawError } from '../../core/errors.js';
import { agentEntry, type MailboxEntry } from '../state.js';
import type { ChannelAdapter, ChannelContext } from '../channel.js';
import type { ChannelSendOptions, ChannelStatus, OutboundMessage, TerminalChannelConfig } from '../types.js';

type Listener = (entry: MailboxEntry) => void;

/** An attached chat: `agent chat <id>` sees that agent's entries (and the gateway's); `xgw chat` all. */
interface Attached {
  agent: string | undefined;
  listener: Listener;
}

const shows = (attached: Attached, entry: MailboxEntry) => attached.agent === undefined || entry.agent === undefined || entry.agent === attached.agent;

/** The peer a terminal chat speaks as when it names none: the local OS user. */
export function defaultTerminalPeer(): string {
  return userInfo().username;
}

/**
 * The channel `xgw chat` and `agent chat` use: the person is the local OS user, the "platform"
 * is the daemon's socket. A reply goes into the peer's mailbox, under the agent that sent it, and to
 * every attached chat with that agent; one that arrives while none is attached is shown at the
 * next attach of a chat with that agent.
 */
export class TerminalChannel implements ChannelAdapter {
  readonly type = 'terminal' as const;
  private context: ChannelContext | undefined;
  private readonly listeners = new Map<string, Set<Attached>>();

  constructor(private readonly config: TerminalChannelConfig) {}

  get id(): string {
    return this.config.id;
  }

  async start(context: ChannelContext): Promise<void> {
    this.context = context;
  }

  async send(message: OutboundMessage, options: ChannelSendOptions = {}): Promise<{ messageIds: string[] }> {
    if (options.sent?.length) return { messageIds: [...options.sent] }; // one part, sent before
    const kept = { ...agentEntry(message, this.context!.home), ...(message.agent !== undefined && { agent: message.agent }) };
    const entry = this.state().addToMailbox(this.id, message.peerId, kept, this.config.history_limit);
    this.push(message.peerId, entry);
    return { messageIds: [String(entry.id)] };
  }

  /** A notice from the gateway (pairing, no route) shown to the chat with `agent` like a reply. */
  notify(peerId: string, agent: string | undefined, text: string): void {
    this.push(peerId, this.state().addToMailbox(this.id, peerId, { role: 'system', text, reply_to: null, ...(agent !== undefined && { agent }) }, this.config.history_limit));
  }

  /** A person's line to `agent`, kept so that an answer shown later can say what it answers. */
  said(peerId: string, agent: string | undefined, messageId: string, text: string): void {
    this.state().addToMailbox(this.id, peerId, { role: 'user', text, reply_to: null, message_id: messageId, ...(agent !== undefined && { agent }) }, this.config.history_limit);
  }

  /**
   * Shows `listener` what the peer has not seen yet in its chat with `agent` (all, without) — each
   * answer with the text it answers, for a chat opened after the answer came — then every new
   * such entry; returns the detach.
   */
  attach(peerId: string, agent: string | undefined, listener: Listener): () => void {
    const backlog = this.state().unseen(this.id, peerId, agent);
    for (const entry of backlog) {
      const question = entry.reply_to === null ? undefined : this.state().messageText(this.id, peerId, entry.reply_to);
      listener(question === undefined ? entry : { ...entry, question });
    }
    this.state().markSeen(backlog.map((entry) => entry.id));
    const set = this.listeners.get(peerId) ?? new Set<Attached>();
    const attached = { agent, listener };
    set.add(attached);
    this.listeners.set(peerId, set);
    return () => {
      set.delete(attached);
      if (set.size === 0 && this.listeners.get(peerId) === set) this.listeners.delete(peerId);
    };
  }

  status(): ChannelStatus {
    const attached = this.listeners.size;
    return { id: this.id, type: this.type, state: this.context ? 'running' : 'stopped', ...(attached > 0 && { detail: `${attached} peer(s) attached` }) };
  }

  async stop(): Promise<void> {
    this.listeners.clear();
    this.context = undefined;
  }

  private push(peerId: string, entry: MailboxEntry): void {
    const listeners = [...(this.listeners.get(peerId) ?? [])].filter((attached) => shows(attached, entry));
    if (listeners.length === 0) return;
    for (const { listener } of listeners) listener(entry);
    this.state().markSeen([entry.id]);
  }

  private state() {
    if (!this.context) throw new ClawError('io', `${this.id} is not running`, { suggestion: 'see its state with: xgw status' });
    return this.context.state;
  }
}
