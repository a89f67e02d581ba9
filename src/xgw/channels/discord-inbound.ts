import type { APIUser, GatewayMessageCreateDispatchData } from 'discord.js';
import type { DiscordChannelConfig, InboundFile, InboundMessage } from '../types.js';
import { joinCut, kindOfMimeType } from './inbound-parts.js';

/** What the Discord channel makes of a message a person sent. */
export interface DiscordInbound {
  /** For the gateway; its text is empty when the message brought files only (`files`). */
  message: InboundMessage;
  /** The Discord channel to answer in (for a direct message, the DM channel, not the peer). */
  channelId: string;
}

/** MessageFlags.IsVoiceMessage: a voice note (its one attachment, OGG/Opus), which the agent's runtime transcribes. */
const VOICE_MESSAGE = 1 << 13;

// MessageType.Default and MessageType.Reply: what people write. The rest (joins, pins, boosts,
// thread notices) are the platform's own.
const PERSON_WRITTEN = new Set([0, 19]);

/**
 * The gateway's view of a Discord message, or null when the channel does not take it: from a bot
 * or a webhook, a system message, or empty. Telegram's rules, Discord's terms: a direct message is a
 * `dm` whose conversation is the peer (as a Telegram private chat's id is the user's), a server
 * channel (or thread) is a `group` whose conversation is the channel. The mention of the bot is
 * removed from the text; `addressed` keeps that there was one (or a reply to the bot), which the
 * gateway needs where the config requires a mention (without it: the group's pending context).
 */
export function toDiscordInbound(data: GatewayMessageCreateDispatchData, config: Pick<DiscordChannelConfig, 'id'>, me: Pick<APIUser, 'id'>): DiscordInbound | null {
  const { author } = data;
  if (author.bot || data.webhook_id !== undefined || !PERSON_WRITTEN.has(data.type)) return null;
  const voice = ((data.flags ?? 0) & VOICE_MESSAGE) !== 0;
  const files: InboundFile[] = (data.attachments ?? []).map((attachment) => ({
    kind: voice ? 'voice' : kindOfMimeType(attachment.content_type),
    ref: attachment.url,
    name: attachment.filename,
    bytes: attachment.size,
    ...(attachment.content_type ? { mime_type: attachment.content_type } : {}),
  }));
  const unsupported = files.length === 0 && data.content.trim() === '' && data.sticker_items?.length ? 'stickers' : undefined;
  if (data.content.trim() === '' && files.length === 0 && !unsupported) return null;
  const base = {
    channelId: config.id,
    peerId: author.id,
    peerName: author.global_name ?? author.username,
    messageId: data.id,
    ...(files.length > 0 ? { files } : {}),
    ...(unsupported ? { unsupported } : {}),
  };
  if (data.guild_id === undefined) {
    return { message: { ...base, conversationType: 'dm', conversationId: author.id, text: data.content }, channelId: data.channel_id };
  }
  const parts = data.content.split(new RegExp(`<@!?${me.id}>`));
  const mentioned = parts.length > 1 || data.mentions.some((user) => user.id === me.id);
  const addressed = mentioned || data.referenced_message?.author.id === me.id;
  const stripped = joinCut(parts).trim();
  const text = stripped === '' && files.length === 0 ? data.content : stripped;
  return { message: { ...base, conversationType: 'group', conversationId: data.channel_id, text, addressed }, channelId: data.channel_id };
}
