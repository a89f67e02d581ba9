import { createHash } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import type { AttachmentKind } from '../../core/message.js';
import type { EmailChannelConfig, InboundFile, InboundMessage } from '../types.js';
import { parseMessageIds, threadRoot, type MailThreading } from './email-thread.js';

/** A mail as the channel reads it: what it needs of the MIME, with the attachments' bytes. */
export interface Mail extends MailThreading {
  subject: string;
  /** The sender's address, lower-cased (the peer id); empty when the mail names none. */
  from: string;
  fromName?: string;
  /** Why no one should answer it (an auto-reply, a bounce, a list), or none. */
  automatic?: string;
  /** The person's text, as Markdown for HTML mail, quoted history and signature cut. */
  text: string;
  attachments: { name?: string; mimeType: string; content: Buffer }[];
}

/** The gateway's message for a mail, and the bytes of its files by their `ref` (for the channel's `download`). */
export interface InboundMail {
  message: InboundMessage;
  files: Map<string, Buffer>;
}

/**
 * Parses a mail's source (RFC 5322 with its MIME parts). mailparser and the HTML reader load with
 * the first mail, not when xgw builds the channel before it listens (seconds on a loaded machine).
 */
export async function readMail(source: Buffer): Promise<Mail> {
  const [{ simpleParser }, { htmlMailToMarkdown, trimReply }] = await Promise.all([import('mailparser'), import('./email-text.js')]);
  const parsed = await simpleParser(source, { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true });
  const sender = parsed.from?.value[0];
  const html = typeof parsed.html === 'string' && parsed.html.trim() !== '' ? parsed.html : undefined;
  return {
    // A mail without a Message-ID gets one from its bytes: the same mail read again is the same message.
    messageId: parseMessageIds(parsed.messageId)[0] ?? `<${createHash('sha256').update(source).digest('hex').slice(0, 32)}@theclaw.invalid>`,
    ...(parseMessageIds(parsed.inReplyTo)[0] ? { inReplyTo: parseMessageIds(parsed.inReplyTo)[0] } : {}),
    references: parseMessageIds(parsed.references),
    subject: parsed.subject ?? '',
    from: sender?.address?.toLowerCase() ?? '',
    ...(sender?.name ? { fromName: sender.name } : {}),
    ...automatic(parsed),
    text: html ? htmlMailToMarkdown(html) : trimReply(parsed.text ?? ''),
    // Parts shown inside the HTML (a signature's logo) are not the person's files.
    attachments: parsed.attachments.filter((part) => !part.related).map((part) => ({ ...(part.filename ? { name: part.filename } : {}), mimeType: part.contentType, content: part.content })),
  };
}

/**
 * Mail a program sent (RFC 3834's Auto-Submitted, bulk and list mail, bounces): answering it
 * could start a loop between two programs.
 */
function automatic(parsed: ParsedMail): { automatic?: string } {
  const header = (name: string) => {
    const value = parsed.headers.get(name);
    return typeof value === 'string' ? value.toLowerCase().trim() : '';
  };
  const autoSubmitted = header('auto-submitted');
  if (autoSubmitted !== '' && autoSubmitted !== 'no') return { automatic: `Auto-Submitted: ${autoSubmitted}` };
  const precedence = header('precedence');
  if (['bulk', 'list', 'junk', 'auto_reply'].includes(precedence)) return { automatic: `Precedence: ${precedence}` };
  const from = parsed.from?.value[0]?.address?.toLowerCase() ?? '';
  if (/^(mailer-daemon|postmaster)@/.test(from)) return { automatic: 'a delivery report' };
  return {};
}

/**
 * The gateway's view of a mail, or why the channel does not take it: one it sent itself, one
 * a program sent, one without a sender. The sender's address is the peer; the thread's root is
 * the conversation (a direct one: access, pairing and owners work as in any direct chat); the
 * Message-ID is the message id, so a mail read twice reaches the agent once. The first mail of a
 * thread gives its subject as the text's first line.
 */
export function toInboundMail(mail: Mail, config: Pick<EmailChannelConfig, 'id' | 'address'>): InboundMail | { ignored: string } {
  if (mail.from === '') return { ignored: 'it names no sender' };
  if (mail.from === config.address.toLowerCase()) return { ignored: 'it comes from the channel itself' };
  if (mail.automatic) return { ignored: `a program sent it (${mail.automatic})` };
  const files = new Map<string, Buffer>();
  const inboundFiles: InboundFile[] = mail.attachments.map((part, index) => {
    const ref = `part-${index}`;
    files.set(ref, part.content);
    return { kind: kindOf(part.mimeType), ref, mime_type: part.mimeType, ...(part.name ? { name: part.name } : {}), bytes: part.content.length };
  });
  const first = mail.inReplyTo === undefined && mail.references.length === 0;
  const text = first && mail.subject.trim() !== '' ? `${mail.subject.trim()}\n\n${mail.text}`.trim() : mail.text;
  return {
    message: {
      channelId: config.id,
      conversationType: 'dm',
      conversationId: threadRoot(mail),
      peerId: mail.from,
      ...(mail.fromName ? { peerName: mail.fromName } : {}),
      messageId: mail.messageId,
      text,
      ...(inboundFiles.length > 0 ? { files: inboundFiles } : {}),
    },
    files,
  };
}

function kindOf(mimeType: string): AttachmentKind {
  if (/^image\/(jpeg|png|webp|gif)$/.test(mimeType)) return 'image';
  if (mimeType.startsWith('audio/')) return 'audio';
  if (mimeType.startsWith('video/')) return 'video';
  return 'document';
}
