import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentInboxPath, agentRoot } from '../../core/layout.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent } from '../../core/message.js';
import { createTestHome, rejection, startedInbox, threadEvents, waitFor, type TestHome } from '../../testing/index.js';
import { mailSystemUnavailable, startMailSystem, type MailSystem } from '../../testing/mail-system.js';
import { Gateway } from '../gateway.js';
import { GatewayState } from '../state.js';
import { XgwConfigSchema, type EmailChannelConfig } from '../types.js';
import { createEmailChannel } from './email.js';

/**
 * The e-mail channel in-process, with a real Gateway, GatewayState and agent inbox, against real
 * Dovecot and Postfix on loopback (src/testing/mail-system.ts): one mail system for the file.
 */

const unavailable = mailSystemUnavailable();
let mail: MailSystem;
let testHome: TestHome;
let state: GatewayState;
let gateway: Gateway;
let config: EmailChannelConfig;
const logPath = () => join(testHome.home, 'logs', 'xgw.log');

beforeAll(async () => {
  if (unavailable) return;
  mail = await startMailSystem(['agent', 'anne']);
  testHome = createTestHome();
  startedInbox(testHome.home);
  mkdirSync(join(testHome.home, 'logs'));
  const server = { host: '127.0.0.1', tls: 'none' };
  const parsed = XgwConfigSchema.parse({
    channels: [
      {
        id: 'email:main',
        type: 'email',
        address: mail.address('agent'),
        imap: { ...server, port: mail.imapPort },
        smtp: { ...server, port: mail.smtpPort },
        password_env: 'TEST_MAIL_PASSWORD',
        access: 'open',
        poll_interval_seconds: 0.2,
      },
    ],
    routes: [{ channel: '*', peer: '*', agent: 'admin' }],
  });
  config = parsed.channels[0] as EmailChannelConfig;
  state = new GatewayState(testHome.home);
  gateway = new Gateway({ home: testHome.home, config: parsed, state, logger: createLogger(logPath(), { level: 'debug', env: {} }) });
}, 60_000);

afterAll(async () => {
  state?.close();
  testHome?.cleanup();
  await mail?.stop();
});

describe.skipIf(unavailable)(`the email channel${unavailable ? ` (skipped: the mail system ${unavailable})` : ''}`, { timeout: 60_000 }, () => {
  it('reads mail by polling where IDLE is off, stores its attachment, and sends a file back in the thread', async () => {
    const channel = createEmailChannel(config, { TEST_MAIL_PASSWORD: mail.password('agent') }, { idle: false });
    await gateway.startChannel(channel);
    try {
      const sent = await mail.send('anne', { to: mail.address('agent'), subject: 'Report', text: 'see attached', attachments: [{ filename: 'notes.txt', content: 'the notes' }] });
      const event = await waitFor(() => threadEvents(testHome.home, agentInboxPath(testHome.home, 'admin'))[0], 'the mail in the inbox', 20_000);
      const content = parseMessageContent(event.content);
      expect(content.text).toBe('Report\n\nsee attached');
      expect(content.attachments).toMatchObject([{ type: 'document', name: 'notes.txt', mime_type: 'text/plain', bytes: 9 }]);
      expect(readFileSync(join(agentRoot(testHome.home, 'admin'), content.attachments[0]!.path!), 'utf8')).toBe('the notes');

      const file = join(testHome.home, 'answer.txt');
      writeFileSync(file, 'the answer file');
      await channel.send({
        peerId: mail.address('anne'),
        conversationType: 'dm',
        conversationId: sent,
        replyTo: sent,
        text: 'here it is',
        files: [{ kind: 'document', path: file, name: 'answer.txt' }],
      });
      const answer = await waitFor(async () => (await mail.inbox('anne')).find((stored) => stored.header('in-reply-to') === sent), 'the answer', 20_000);
      const parsed = await simpleParser(answer.source);
      expect(parsed.subject).toBe('Re: Report');
      expect(parsed.text?.trim()).toBe('here it is');
      expect(parsed.attachments.map((part) => [part.filename, part.content.toString()])).toEqual([['answer.txt', 'the answer file']]);
    } finally {
      await channel.stop();
    }
  });

  it('refuses to start with a password the server refuses, as invalid, without the password in the log or status', async () => {
    const wrong = 'not-the-password-4711';
    const channel = createEmailChannel(config, { TEST_MAIL_PASSWORD: wrong });
    const error = await rejection(gateway.startChannel(channel));
    expect(error.kind).toBe('invalid');
    expect(error.message).toMatch(/refused the login of agent@example\.test/);
    expect(error.suggestion).toContain('TEST_MAIL_PASSWORD');
    expect(channel.status()).toMatchObject({ state: 'error' });
    expect(JSON.stringify(channel.status())).not.toContain(wrong);
    expect(existsSync(logPath()) ? readFileSync(logPath(), 'utf8') : '').not.toContain(wrong);
    await channel.stop();
  });
});
