import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { slug } from '../core/slug.js';
import { mailSystemUnavailable, startMailSystem, type MailSystem, type StoredMail } from '../testing/mail-system.js';
import { echoToolStep, settle, startSystem, until, type System } from './support.js';

/**
 * The e-mail channel end to end against real mail servers (Dovecot for IMAP, Postfix for SMTP,
 * on loopback with a throwaway config): a mail goes through the real xgw, notifier, agent run and
 * the fake model, and the answer arrives in the sender's mailbox, in the mail's thread. One mail
 * system and one TheClaw for the file; the tests run in order.
 */

const unavailable = mailSystemUnavailable();
const PASSWORD_ENV = 'E2E_MAIL_PASSWORD';

let mail: MailSystem;
let system: System;

beforeAll(async () => {
  if (unavailable) return;
  mail = await startMailSystem(['agent', 'anne', 'stranger']);
  const server = (port: number) => `{ host: 127.0.0.1, port: ${port}, tls: none }`;
  system = await startSystem({
    llm: { defaultStep: echoToolStep },
    env: { [PASSWORD_ENV]: mail.password('agent') },
    extraChannels: [
      `{ id: email:main, type: email, address: ${mail.address('agent')}, name: Admin, imap: ${server(mail.imapPort)}, smtp: ${server(mail.smtpPort)}, password_env: ${PASSWORD_ENV}, access: allowlist, allow: ["${mail.address('anne')}"] }`,
    ],
  });
}, 60_000);

afterAll(async () => {
  await system?.stop();
  await mail?.stop();
});

/** The messages people sent in anne's thread of admin, oldest first. */
function anneMessages() {
  const thread = join(system.home, 'agents', 'admin', 'threads', 'peers', slug(`email.main.${mail.address('anne')}`));
  return system.events(thread).filter((event) => event.type === 'message' && event.source !== 'self');
}

/** The answers in anne's mailbox, oldest first. */
async function answersToAnne(): Promise<StoredMail[]> {
  return (await mail.inbox('anne')).filter((stored) => stored.header('from')?.includes(mail.address('agent')));
}

describe.skipIf(unavailable)(`email end to end${unavailable ? ` (skipped: the mail system ${unavailable})` : ''}`, { timeout: 120_000 }, () => {
  it('answers a mail in its thread, exactly once across an xgw restart', async () => {
    expect((await system.xgwStatus()).channels).toContainEqual(expect.objectContaining({ id: 'email:main', state: 'running' }));
    const first = await mail.send('anne', { to: mail.address('agent'), subject: 'Dinner', text: 'where shall we go\n\n-- \nAnne\n' });
    const answer = await until(async () => (await answersToAnne()).find((stored) => stored.header('in-reply-to') === first), 'the answer in anne’s mailbox', 60_000);
    expect(answer.header('subject')).toBe('Re: Dinner');
    expect(answer.header('references')).toBe(first);
    expect(answer.header('from')).toBe(`Admin <${mail.address('agent')}>`);
    expect((await simpleParser(answer.source)).text?.trim()).toBe('reply to: Dinner\n\nwhere shall we go');

    // xgw dies after the push and before the mail was marked seen; meanwhile anne answers, in the thread.
    await system.must('xgw', ['stop']);
    await mail.markUnseen('agent', first);
    const answerId = answer.header('message-id')!;
    const second = await mail.send('anne', {
      to: mail.address('agent'),
      subject: 'Re: Re: Dinner',
      text: 'and when?\n\nOn Fri, 27 Nov 2026, Admin wrote:\n> reply to: Dinner\n',
      inReplyTo: answerId,
      references: [first, answerId],
    });
    await system.must('xgw', ['start']);
    const next = await until(async () => (await answersToAnne()).find((stored) => stored.header('in-reply-to') === second), 'the second answer', 60_000);
    expect(next.header('subject')).toBe('Re: Dinner');
    expect(next.header('references')).toBe(`${first} ${answerId} ${second}`);

    await settle(system);
    expect((await answersToAnne()).map((stored) => stored.header('in-reply-to'))).toEqual([first, second]);
    const conversation = formatAddress({ kind: 'external', channelType: 'email', instance: 'main', conversationType: 'dm', conversationId: first, peerId: mail.address('anne') });
    expect(anneMessages().map((event) => [event.source, parseMessageContent(event.content).text])).toEqual([
      [conversation, 'Dinner\n\nwhere shall we go'],
      [conversation, 'and when?'],
    ]);
    expect((await mail.inbox('agent')).map((stored) => stored.flags.includes('\\Seen'))).toEqual([true, true]);
  });

  it('sends nothing to a stranger under an allowlist, and logs the mail', async () => {
    const asked = await mail.send('stranger', { to: mail.address('agent'), subject: 'hello', text: 'let me in' });
    await until(async () => (await mail.inbox('agent')).find((stored) => stored.header('message-id') === asked)?.flags.includes('\\Seen'), 'the stranger’s mail taken', 30_000);
    expect(readFileSync(join(system.home, 'logs', 'xgw.log'), 'utf8')).toContain(`ignored a message from "${mail.address('stranger')}", who is not on the allowlist`);
    // A notice would have been handed to Postfix before the mail was marked seen: a mail sent now arrives after it.
    const canary = await mail.send('anne', { to: mail.address('stranger'), subject: 'canary', text: 'after' });
    await until(async () => (await mail.inbox('stranger')).some((stored) => stored.header('message-id') === canary), 'the canary', 30_000);
    expect((await mail.inbox('stranger')).map((stored) => stored.header('subject'))).toEqual(['canary']);
  });

  it('gives the agent an HTML mail as Markdown, without the quoted history', async () => {
    const sent = await mail.send('anne', {
      to: mail.address('agent'),
      subject: 'Fares',
      html: '<div><h2>Fares</h2><p>See <a href="https://x.test/f">the list</a>.</p><ul><li>day</li><li>week</li></ul></div><div class="gmail_quote">On Mon, Bob wrote:<blockquote>old fares</blockquote></div>',
    });
    const event = await until(
      () =>
        anneMessages().find((message) => {
          const context = parseMessageContent(message.content).reply_context;
          return context?.kind === 'external' && context.message_id === sent;
        }),
      'the HTML mail in the thread',
      30_000,
    );
    expect(parseMessageContent(event.content).text).toBe('Fares\n\n## Fares\n\nSee [the list](https://x.test/f).\n\n* day\n* week');
  });
});
