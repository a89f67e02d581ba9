import { ClawError } from './errors.js';
import * as z from 'zod/mini';
import { validate } from './validate.js';
import { NOTICE_KINDS, type NoticeKind } from './notice.js';

export { NOTICE_KINDS, type NoticeKind };

/**
 * The content of a `message` event (DESIGN §7): a JSON string every tool reads through these
 * schemas. `reply_context` says where a reply goes; it travels with the inbound message into the
 * conversation thread and back out on the reply.
 */
export const ExternalReplyContextSchema = z.object({
  kind: z.literal('external'),
  /** `<channel_type>:<instance>`, e.g. `telegram:main`. */
  channel_id: z.string().check(z.minLength(1)),
  conversation_type: z.string().check(z.minLength(1)),
  conversation_id: z.string().check(z.minLength(1)),
  peer_id: z.string().check(z.minLength(1)),
  /** The platform's id of the message being answered, so the reply can quote it. */
  message_id: z.optional(z.string().check(z.minLength(1))),
});

export const InternalReplyContextSchema = z.object({
  kind: z.literal('internal'),
  conversation_type: z.string().check(z.minLength(1)),
  conversation_id: z.string().check(z.minLength(1)),
  /** The agent that sent the message and gets the reply in its inbox. */
  agent_id: z.string().check(z.minLength(1)),
  /**
   * The message (an event id in the asking agent's conversation thread) that the question was
   * asked for: the question carries it, and so does the answer, which goes to that message.
   */
  asking_event_id: z.optional(z.int().check(z.positive())),
});

export const ReplyContextSchema = z.discriminatedUnion('kind', [ExternalReplyContextSchema, InternalReplyContextSchema]);

/** `voice`: a voice message (a person speaking to the agent), which the runtime transcribes; `audio`: any other sound file. */
export const ATTACHMENT_KINDS = ['image', 'document', 'audio', 'video', 'voice'] as const;
export type AttachmentKind = (typeof ATTACHMENT_KINDS)[number];

/**
 * A file that comes with a message: what a person sent (stored by xgw in the agent's `files/`,
 * named by its SHA-256) or what an agent sends. `type` is an AttachmentKind for files from
 * people; the message's text is the caption.
 */
export const AttachmentSchema = z.object({
  type: z.string().check(z.minLength(1)),
  name: z.optional(z.string()),
  url: z.optional(z.string()),
  path: z.optional(z.string()),
  mime_type: z.optional(z.string()),
  bytes: z.optional(z.int().check(z.nonnegative())),
  /** A voice message whose words the runtime transcribed: they are the message's text (after the caption, if any). */
  transcribed: z.optional(z.boolean()),
});

/** One thing said in a group without addressing the agent (xgw's group-context.ts). */
export const GroupContextEntrySchema = z.object({
  peer_id: z.string().check(z.minLength(1)),
  /** The display name the platform gave, if any. */
  name: z.optional(z.string()),
  text: z.string(),
  /** When xgw received it (ISO 8601). */
  at: z.string(),
});

export const MessageContentSchema = z.object({
  text: z.string(),
  attachments: z._default(z.array(AttachmentSchema), []),
  reply_context: z.optional(ReplyContextSchema),
  /** Id of the event (in the same thread) this message answers. */
  in_reply_to: z.optional(z.int().check(z.positive())),
  /**
   * Outside a direct chat: whether the message addressed the agent (a mention, a reply to it,
   * `/cmd@botname`), set by the channel. A chat command in a group counts only then.
   */
  addressed: z.optional(z.boolean()),
  /**
   * On a group message that addresses the agent: what was said in the group since the last
   * message that reached the agent, oldest first, set by xgw (the group's pending context). The
   * runtime shows it with this message only, and only in a group's thread.
   */
  group_context: z.optional(z.array(GroupContextEntrySchema)),
  /**
   * Set on what the runtime says instead of an answer (src/agent/failure.ts): `error` (the message
   * gets no answer), `delayed` (the answer comes once the model is back), or on its own:
   * `approval` (a command waits for the owner, src/agent/approvals.ts). Chat clients show it as a
   * notice, not as the agent's answer.
   */
  notice: z.optional(z.enum(NOTICE_KINDS)),
});

export type ExternalReplyContext = z.infer<typeof ExternalReplyContextSchema>;
export type InternalReplyContext = z.infer<typeof InternalReplyContextSchema>;
export type ReplyContext = z.infer<typeof ReplyContextSchema>;
export type Attachment = z.infer<typeof AttachmentSchema>;
export type GroupContextEntry = z.infer<typeof GroupContextEntrySchema>;
export type MessageContent = z.infer<typeof MessageContentSchema>;

/** Parses the `content` string of a message event; a malformed one is an `invalid` error. */
export function parseMessageContent(content: string): MessageContent {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (error) {
    throw new ClawError('invalid', 'message content is not JSON', {
      suggestion: 'store message content as {"text": "..."}',
      cause: error,
    });
  }
  return validate(MessageContentSchema, json, {
    what: 'message content',
    suggestion: 'store message content as {"text": "...", "attachments": [], "reply_context": {...}}',
  });
}

export function formatMessageContent(content: MessageContent): string {
  return JSON.stringify(MessageContentSchema.parse(content));
}
