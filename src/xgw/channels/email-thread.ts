/**
 * Mail threads (RFC 5322 §3.6.4): a thread is one conversation, named by its root's Message-ID —
 * the first entry of References, which every reply keeps (clients that shorten the list keep its
 * first entry), else In-Reply-To, else the mail's own id. A reply sets In-Reply-To to the mail it
 * answers and References to that mail's References plus its id, and keeps the subject behind one
 * `Re: `.
 */

/** The headers of a mail that place it in its thread. */
export interface MailThreading {
  messageId: string;
  inReplyTo?: string;
  /** Oldest first; the root is the first. */
  references: readonly string[];
}

/** Longest References a reply sets: the root and the newest, so that a long thread's header stays bounded. */
const MAX_REFERENCES = 20;

/** The `<id>` tokens of a Message-ID, In-Reply-To or References header, in order, each once. */
export function parseMessageIds(header: string | readonly string[] | undefined): string[] {
  const text = Array.isArray(header) ? header.join(' ') : ((header as string | undefined) ?? '');
  return [...new Set(text.match(/<[^<>\s]+>/g) ?? [])];
}

/** The Message-ID of the thread's root: the conversation id of every mail in the thread. */
export function threadRoot(mail: MailThreading): string {
  return mail.references[0] ?? mail.inReplyTo ?? mail.messageId;
}

/** What a reply to `original` sets. */
export function replyThreading(original: MailThreading): { inReplyTo: string; references: string[] } {
  const chain = [...new Set([...original.references, original.messageId])];
  const references = chain.length > MAX_REFERENCES ? [chain[0]!, ...chain.slice(-(MAX_REFERENCES - 1))] : chain;
  return { inReplyTo: original.messageId, references };
}

/** Reply prefixes of common clients (English, German, Nordic, Dutch), with an optional count (`Re[2]:`). */
const REPLY_PREFIX = /^(?:\s*(?:re|aw|sv|antw)(?:\s*\[\d+\])?\s*:)+\s*/i;

/** `Re: <subject>`, however many replies the subject has been through. */
export function replySubject(subject: string | undefined): string {
  const base = (subject ?? '').replace(/\s+/g, ' ').trim().replace(REPLY_PREFIX, '');
  return base === '' ? 'Re:' : `Re: ${base}`;
}
