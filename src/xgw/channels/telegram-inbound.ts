import type { Message, MessageEntity, UserFromGetMe } from 'grammy/types';
import type { InboundFile, InboundMessage, TelegramChannelConfig } from '../types.js';

/**
 * The gateway's view of a Telegram message, or null when the channel does not take it: no text,
 * file or anything else a person sends (a service message: someone joined), from a bot, or from a
 * channel. A mention of the bot is removed from the text; `addressed` keeps that there was one (or
 * a reply to the bot): the gateway keeps a group message without it as the group's pending context
 * where the config requires a mention, and the agent takes a group's `/stop` as a command only then. A photo, document, audio or
 * video comes as a file with its caption as the text, a voice message as a `voice` file (the
 * agent's runtime transcribes it); what the agent cannot take (a video message, a sticker, a
 * location) as `unsupported`, so that the person is told.
 */
export function toInboundMessage(message: Message, config: Pick<TelegramChannelConfig, 'id'>, me: Pick<UserFromGetMe, 'id' | 'username'>): InboundMessage | null {
  const { chat, from } = message;
  const files = filesOf(message);
  const unsupported = files.length === 0 ? unsupportedOf(message) : undefined;
  const text = message.text ?? message.caption ?? (files.length > 0 || unsupported ? '' : undefined);
  if (text === undefined || !from || from.is_bot) return null;
  const base = {
    channelId: config.id,
    conversationId: String(chat.id),
    peerId: String(from.id),
    peerName: from.username ?? [from.first_name, from.last_name].filter(Boolean).join(' '),
    messageId: String(message.message_id),
    ...(files.length > 0 ? { files } : {}),
    ...(unsupported ? { unsupported } : {}),
  };
  if (chat.type === 'private') return { ...base, conversationType: 'dm', text };
  if (chat.type !== 'group' && chat.type !== 'supergroup') return null;
  const mentions = findMentions(text, message.entities ?? message.caption_entities, me);
  // In a forum, every message replies to its topic's first message: that is not a reply to us.
  const reply = message.reply_to_message;
  const repliesToBot = reply !== undefined && reply.forum_topic_created === undefined && reply.from?.id === me.id;
  const addressed = mentions.length > 0 || repliesToBot;
  const stripped = removeRanges(text, mentions).trim();
  return { ...base, conversationType: 'group', text: stripped === '' && files.length === 0 ? text : stripped, addressed };
}

/** Images sent as documents (uncompressed) are images too. */
const IMAGE_TYPES = /^image\/(jpeg|png|webp|gif)$/;

function filesOf(message: Message): InboundFile[] {
  const { photo, document, audio, video, animation, voice } = message;
  // A photo comes in several sizes, the largest last.
  const largest = photo?.at(-1);
  if (largest) return [{ kind: 'image', ref: largest.file_id, mime_type: 'image/jpeg', ...(largest.file_size ? { bytes: largest.file_size } : {}) }];
  // Telegram records voice as OGG/Opus and names no file.
  if (voice) return [{ kind: 'voice', ref: voice.file_id, mime_type: voice.mime_type ?? 'audio/ogg', ...(voice.file_size ? { bytes: voice.file_size } : {}) }];
  const file = document ?? audio ?? video ?? animation;
  if (!file) return [];
  const kind = file === document ? (IMAGE_TYPES.test(document.mime_type ?? '') ? 'image' : 'document') : file === audio ? 'audio' : 'video';
  return [
    {
      kind,
      ref: file.file_id,
      ...(file.mime_type ? { mime_type: file.mime_type } : {}),
      ...('file_name' in file && file.file_name ? { name: file.file_name } : {}),
      ...(file.file_size ? { bytes: file.file_size } : {}),
    },
  ];
}

/** What a person sent that no agent can take yet. */
function unsupportedOf(message: Message): string | undefined {
  if (message.video_note) return 'video messages';
  if (message.sticker) return 'stickers';
  if (message.location || message.venue) return 'locations';
  if (message.contact) return 'contacts';
  if (message.poll) return 'polls';
  if (message.dice || message.game) return 'games';
  return undefined;
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
