/**
 * What the agent's side sends instead of an answer, or before it (MessageContent.notice): the
 * answer failed (`error`), it comes later (`delayed`), or the owner is asked to approve a command
 * (`approval`). A module of its own, importing nothing, because the web chat page uses it too.
 */
export const NOTICE_KINDS = ['error', 'delayed', 'approval'] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];
