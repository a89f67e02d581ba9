import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseMessageIds, replySubject, replyThreading, threadRoot, type MailThreading } from './email-thread.js';

const messageId = fc.tuple(fc.stringMatching(/^[a-z0-9.$_-]{1,12}$/), fc.stringMatching(/^[a-z0-9.-]{1,12}$/)).map(([local, domain]) => `<${local}@${domain}>`);

/** A thread as clients write it: a first mail, then replies to any earlier mail of it. */
const thread = fc.tuple(messageId, fc.array(fc.tuple(messageId, fc.nat()), { maxLength: 30 })).map(([rootId, replies]) => {
  const mails: MailThreading[] = [{ messageId: rootId, references: [] }];
  for (const [id, pick] of replies) {
    const original = mails[pick % mails.length]!;
    if (mails.some((mail) => mail.messageId === id)) continue;
    const { inReplyTo, references } = replyThreading(original);
    mails.push({ messageId: id, inReplyTo, references });
  }
  return mails;
});

describe('mail threads', () => {
  it('puts every reply, however deep, in the conversation of the thread’s first mail', () => {
    fc.assert(
      fc.property(thread, (mails) => {
        for (const mail of mails) expect(threadRoot(mail)).toBe(mails[0]!.messageId);
      }),
    );
  });

  it('answers with In-Reply-To the mail answered and References its chain plus it, at most 20 keeping the root', () => {
    expect(replyThreading({ messageId: '<c@x>', inReplyTo: '<b@x>', references: ['<a@x>', '<b@x>'] })).toEqual({ inReplyTo: '<c@x>', references: ['<a@x>', '<b@x>', '<c@x>'] });
    const long = Array.from({ length: 30 }, (_, index) => `<${index}@x>`);
    const { references } = replyThreading({ messageId: '<30@x>', references: long });
    expect(references).toHaveLength(20);
    expect(references[0]).toBe('<0@x>');
    expect(references.at(-1)).toBe('<30@x>');
  });

  it('takes the root of a mail whose client sent only In-Reply-To, or nothing', () => {
    expect(threadRoot({ messageId: '<b@x>', inReplyTo: '<a@x>', references: [] })).toBe('<a@x>');
    expect(threadRoot({ messageId: '<a@x>', references: [] })).toBe('<a@x>');
  });

  it('reads the ids of a header, folded or not, each once', () => {
    expect(parseMessageIds('<a@x>\r\n <b@x> <a@x>')).toEqual(['<a@x>', '<b@x>']);
    expect(parseMessageIds(['<a@x>', '<c@y>'])).toEqual(['<a@x>', '<c@y>']);
    expect(parseMessageIds(undefined)).toEqual([]);
  });

  it('keeps the subject behind one Re:, however many replies it went through', () => {
    expect(replySubject('Dinner')).toBe('Re: Dinner');
    expect(replySubject('Re: Re: RE: Dinner')).toBe('Re: Dinner');
    expect(replySubject('AW: Re[2]: Dinner')).toBe('Re: Dinner');
    expect(replySubject('Rental car')).toBe('Re: Rental car');
    expect(replySubject('')).toBe('Re:');
    fc.assert(
      fc.property(fc.string(), (subject) => {
        expect(replySubject(replySubject(subject))).toBe(replySubject(subject));
      }),
    );
  });
});
