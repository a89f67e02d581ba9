import type { Message, MessageEntity, UserFromGetMe } from 'grammy/types';
import type { InboundMessage, TelegramChannelConfig } from '../types.js';

/**
 * The gateway's view of a Telegram text message, or null when the channel does not take it: not
 * text, from a bot, from a channel, or in a group without mention or reply while the config
 * requires one. A mention of the bot is removed from the text; `addressed` keeps that there was
 * one (or a reply to the bot), so that the agent takes a group's `/stop` as a command only then.
 */
export function toInboundMessage(message: Message, config: Pick<TelegramChannelConfig, 'id' | 'groups'>, me: Pick<UserFromGetMe, 'id' | 'username'>): InboundMessage | null {
  const { chat, from, text } = message;
  if (text === undefined || !from || from.is_bot) return null;
  const base = {
    channelId: config.id,
    conversationId: String(chat.id),
    peerId: String(from.id),
    peerName: from.username ?? [from.first_name, from.last_name].filter(Boolean).join(' '),
    messageId: String(message.message_id),
  };
  if (chat.type === 'private') return { ...base, conversationType: 'dm', text };
  if (chat.type !== 'group' && chat.type !== 'supergroup') return null;
  const mentions = findMentions(text, message.entities, me);
  // In a forum, every message replies to its topic's first message: that is not a reply to us.
  const reply = message.reply_to_message;
  const repliesToBot = reply !== undefined && reply.forum_topic_created === undefined && reply.from?.id === me.id;
  const addressed = mentions.length > 0 || repliesToBot;
  if (config.groups.require_mention && !addressed) return null;
  const stripped = removeRanges(text, mentions).trim();
  return { ...base, conversationType: 'group', text: stripped === '' ? text : stripped, addressed };
}

/** Where the text addresses the bot: `@username`, a text mention of it, or `/command@username` (its suffix). */
function findMentions(text: string, entities: MessageEntity[] | undefined, me: Pick<UserFromGetMe, 'id' | 'username'>): Array<[number, number]> {
  const handle = `@${me.username}`.toLowerCase();
  const ranges: Array<[number, number]> = [];
  for (const entity of entities ?? []) {
    const end = entity.offset + entity.length;
    const part = text.slice(entity.offset, end).toLowerCase();
    if (entity.type === 'mention' && part === handle) ranges.push([entity.offset, end]);
    else if (entity.type === 'text_mention' && entity.user.id === me.id) ranges.push([entity.offset, end]);
    else if (entity.type === 'bot_command' && part.endsWith(handle)) ranges.push([end - handle.length, end]);
  }
  if (ranges.length > 0 || entities?.some((entity) => entity.type === 'mention')) return ranges;
  // No entities (some clients and bridges send none): find `@username` as a word.
  const pattern = new RegExp(`(?<![A-Za-z0-9_])@${me.username}(?![A-Za-z0-9_])`, 'gi');
  for (const match of text.matchAll(pattern)) ranges.push([match.index, match.index + match[0].length]);
  return ranges;
}

/** Cuts the ranges out; where a cut leaves two spaces side by side, one goes with it. */
function removeRanges(text: string, ranges: Array<[number, number]>): string {
  let out = text;
  for (const [start, end] of [...ranges].sort((a, b) => b[0] - a[0])) {
    const before = out.slice(0, start);
    let after = out.slice(end);
    if (/\s$/.test(before) && /^\s/.test(after)) after = after.slice(1);
    out = before + after;
  }
  return out;
}
