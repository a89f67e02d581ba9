import * as z from 'zod/mini';
import type { InboundFile, InboundMessage, SlackChannelConfig } from '../types.js';
import { joinCut, kindOfMimeType } from './inbound-parts.js';
import { fromSlackText } from './slack-text.js';

/** What the Slack channel makes of a message a person sent. */
export interface SlackInbound {
  /** For the gateway; its text is empty when the message brought files only (`files`). */
  message: InboundMessage;
  /** The Slack conversation to answer in (for a direct message, the DM's `D…` id, not the peer). */
  channelId: string;
  /** The thread the answer goes to: the thread the message is in, else the message itself. */
  threadTs: string;
}

/** A message's place in Slack: its `ts`, and the `ts` of the thread it is in (its own when it starts none). */
export interface SlackMessageRef {
  ts: string;
  threadTs: string;
}

const TS = /^\d+\.\d+$/;

/**
 * A message's id for the gateway (what a reply names as `replyTo`): its `ts`, or for a reply in a
 * thread `<thread_ts>/<ts>`, so that the answer finds its thread (Slack wants the thread's first
 * `ts` as `thread_ts`, not a reply's) after a restart too.
 */
export function formatSlackMessageRef(ref: SlackMessageRef): string {
  return ref.threadTs === ref.ts ? ref.ts : `${ref.threadTs}/${ref.ts}`;
}

/** The inverse of `formatSlackMessageRef`; undefined for anything it does not make (no thread then). */
export function parseSlackMessageRef(id: string | undefined): SlackMessageRef | undefined {
  const [first = '', second, ...rest] = (id ?? '').split('/');
  if (rest.length > 0 || !TS.test(first) || (second !== undefined && !TS.test(second))) return undefined;
  return second === undefined ? { ts: first, threadTs: first } : { ts: second, threadTs: first };
}

const SlackFileSchema = z.looseObject({
  id: z.string(),
  name: z.optional(z.string()),
  mimetype: z.optional(z.string()),
  size: z.optional(z.number()),
  /** `slack_audio` for a voice clip. */
  subtype: z.optional(z.string()),
  url_private_download: z.optional(z.string()),
  url_private: z.optional(z.string()),
});

/** The fields of a `message` event (Events API) this channel reads; Slack sends many more. */
export const SlackMessageEventSchema = z.looseObject({
  type: z.literal('message'),
  subtype: z.optional(z.string()),
  channel: z.string(),
  /** `im`, `mpim`, `channel` or `group` (a private channel). */
  channel_type: z.optional(z.string()),
  user: z.optional(z.string()),
  bot_id: z.optional(z.string()),
  text: z.optional(z.string()),
  ts: z.string().check(z.regex(TS)),
  thread_ts: z.optional(z.string().check(z.regex(TS))),
  /** The author of the thread's first message, on a reply in a thread. */
  parent_user_id: z.optional(z.string()),
  files: z.optional(z.array(SlackFileSchema)),
});
export type SlackMessageEvent = z.output<typeof SlackMessageEventSchema>;

// What people write: plain messages, messages with files, and thread replies also sent to the
// channel. Other subtypes (edits, deletions, joins, bots) are Slack's or other apps'.
const PERSON_WRITTEN = new Set([undefined, 'file_share', 'thread_broadcast']);

/**
 * The gateway's view of a Slack message event, or null when the channel does not take it: from a
 * bot (this one too), an edit or other notice of Slack's, or empty. Telegram's rules, Slack's terms: a direct
 * message is a `dm` whose conversation is the peer (as a Telegram private chat's id is the
 * user's); a channel, private channel or group DM is a `group` whose conversation is the channel.
 * A mention of the bot (`<@U…>`) is removed from the text, and `addressed` keeps that there was
 * one (or that the thread is the bot's own): without it the gateway keeps a channel's message as
 * its pending context where the config requires a mention. The rest of Slack's markup becomes plain text.
 */
export function toSlackInbound(event: SlackMessageEvent, config: Pick<SlackChannelConfig, 'id'>, me: { userId: string }): SlackInbound | null {
  const { user } = event;
  if (!user || user === me.userId || event.bot_id !== undefined || !PERSON_WRITTEN.has(event.subtype)) return null;
  const raw = event.text ?? '';
  const files: InboundFile[] = (event.files ?? []).flatMap((file) => {
    const ref = file.url_private_download ?? file.url_private;
    if (!ref) return []; // not shared with the bot (Slack Connect, a file it may not read)
    return [
      {
        kind: file.subtype === 'slack_audio' ? 'voice' : kindOfMimeType(file.mimetype),
        ref,
        ...(file.name ? { name: file.name } : {}),
        ...(file.size !== undefined ? { bytes: file.size } : {}),
        ...(file.mimetype ? { mime_type: file.mimetype } : {}),
      },
    ];
  });
  const unsupported = files.length === 0 && raw.trim() === '' && (event.files?.length ?? 0) > 0 ? 'files Slack does not let the bot download' : undefined;
  if (raw.trim() === '' && files.length === 0 && !unsupported) return null;
  const ref = { ts: event.ts, threadTs: event.thread_ts ?? event.ts };
  const base = {
    channelId: config.id,
    peerId: user,
    messageId: formatSlackMessageRef(ref),
    ...(files.length > 0 ? { files } : {}),
    ...(unsupported ? { unsupported } : {}),
  };
  const at = { channelId: event.channel, threadTs: ref.threadTs };
  if (event.channel_type === 'im') return { message: { ...base, conversationType: 'dm', conversationId: user, text: fromSlackText(raw) }, ...at };
  const parts = raw.split(new RegExp(`<@${me.userId}(?:\\|[^>]*)?>`));
  const addressed = parts.length > 1 || (event.thread_ts !== undefined && event.parent_user_id === me.userId);
  const stripped = fromSlackText(joinCut(parts)).trim();
  const text = stripped === '' && files.length === 0 ? fromSlackText(raw) : stripped;
  return { message: { ...base, conversationType: 'group', conversationId: event.channel, text, addressed }, ...at };
}
