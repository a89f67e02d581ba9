import { describe, expect, it } from 'vitest';
import { toInboundMessage } from './telegram-inbound.js';

describe('toInboundMessage', () => {
  const me = { id: 7_000_001, username: 'claw_bot' };
  const config = { id: 'telegram:main' };
  const group = { id: -1001, type: 'supergroup' as const, title: 'G' };
  const from = { id: 5, is_bot: false, first_name: 'Ann', last_name: 'Lee' };
  const message = (fields: Record<string, unknown>) => ({ message_id: 9, date: 0, chat: group, from, ...fields }) as never;

  it.each([
    ['@claw_bot hello', 'hello', undefined],
    ['hello @Claw_Bot, how are you', 'hello , how are you', undefined],
    ['hello @claw_bot how are you', 'hello how are you', [{ type: 'mention', offset: 6, length: 9 }]],
    ['/start@claw_bot now', '/start now', [{ type: 'bot_command', offset: 0, length: 15 }]],
    ['Claw, look', 'look', [{ type: 'text_mention', offset: 0, length: 5, user: { id: 7_000_001, is_bot: true, first_name: 'Claw' } }]],
    ['@claw_bot', '@claw_bot', undefined],
  ])('strips the mention from %j', (text, expected, entities) => {
    expect(toInboundMessage(message({ text, entities }), config, me)?.text).toBe(expected);
  });

  it('says whether a group message addressed the bot', () => {
    const every = config;
    const addressed = (text: string, entities?: unknown[], fields: Record<string, unknown> = {}) => toInboundMessage(message({ text, entities, ...fields }), every, me)?.addressed;
    expect(addressed('/stop')).toBe(false);
    expect(addressed('/stop@other_bot', [{ type: 'bot_command', offset: 0, length: 15 }])).toBe(false);
    expect(addressed('/stop@claw_bot', [{ type: 'bot_command', offset: 0, length: 14 }])).toBe(true);
    expect(addressed('@claw_bot /stop')).toBe(true);
    expect(addressed('/stop', undefined, { reply_to_message: { message_id: 1, date: 0, chat: group, from: { id: me.id, is_bot: true, first_name: 'Claw' } } })).toBe(true);
    expect(toInboundMessage(message({ text: '/stop@claw_bot', entities: [{ type: 'bot_command', offset: 0, length: 14 }] }), every, me)?.text).toBe('/stop');
    expect(toInboundMessage(message({ text: '/stop', chat: { id: 5, type: 'private', first_name: 'Ann' } }), every, me)).not.toHaveProperty('addressed');
  });

  it('does not take a mention of another bot whose name starts the same', () => {
    expect(toInboundMessage(message({ text: 'hi @claw_bot2' }), config, me)).toMatchObject({ text: 'hi @claw_bot2', addressed: false });
  });

  it('skips messages from bots and channels', () => {
    expect(toInboundMessage(message({ text: '@claw_bot hi', from: { ...from, is_bot: true } }), config, me)).toBeNull();
    expect(toInboundMessage(message({ text: '@claw_bot hi', chat: { id: -1002, type: 'channel', title: 'C' } }), config, me)).toBeNull();
  });

  it('names the peer by username, else by full name', () => {
    expect(toInboundMessage(message({ text: 'x', chat: { id: 5, type: 'private', first_name: 'Ann' } }), config, me)).toMatchObject({
      conversationType: 'dm',
      conversationId: '5',
      peerId: '5',
      peerName: 'Ann Lee',
      messageId: '9',
    });
  });

  it('takes a photo or document with its caption as the text, says what it cannot take, and ignores service messages', () => {
    const dm = { id: 5, type: 'private' as const, first_name: 'Ann' };
    const inDm = (fields: Record<string, unknown>) => toInboundMessage({ message_id: 9, date: 0, chat: dm, from, ...fields } as never, config, me);
    const photo = [
      { file_id: 'small', file_unique_id: 's', width: 90, height: 90, file_size: 900 },
      { file_id: 'large', file_unique_id: 'l', width: 900, height: 900, file_size: 90_000 },
    ];
    expect(inDm({ photo, caption: 'look' })).toMatchObject({ text: 'look', files: [{ kind: 'image', ref: 'large', mime_type: 'image/jpeg', bytes: 90_000 }] });
    expect(inDm({ document: { file_id: 'd', file_unique_id: 'd', file_name: 'a.pdf', mime_type: 'application/pdf', file_size: 10 } })).toMatchObject({
      text: '',
      files: [{ kind: 'document', ref: 'd', name: 'a.pdf', mime_type: 'application/pdf', bytes: 10 }],
    });
    expect(inDm({ document: { file_id: 'p', file_unique_id: 'p', file_name: 'shot.png', mime_type: 'image/png' } })?.files).toEqual([
      { kind: 'image', ref: 'p', name: 'shot.png', mime_type: 'image/png' },
    ]);
    // A voice message is a file for the agent's runtime to transcribe (OGG/Opus where Telegram does not say).
    expect(inDm({ voice: { file_id: 'v', file_unique_id: 'v', duration: 1 } })).toEqual(expect.objectContaining({ text: '', files: [{ kind: 'voice', ref: 'v', mime_type: 'audio/ogg' }] }));
    expect(inDm({ voice: { file_id: 'v', file_unique_id: 'v', duration: 1 } })?.unsupported).toBeUndefined();
    expect(inDm({ video_note: { file_id: 'n', file_unique_id: 'n', length: 1, duration: 1 } })).toMatchObject({ unsupported: 'video messages' });
    expect(inDm({ location: { latitude: 1, longitude: 2 } })).toMatchObject({ unsupported: 'locations' });
    expect(inDm({ new_chat_members: [from] })).toBeNull(); // nothing a person said to the bot
    // In a group a photo addresses the bot by a mention in its caption, like a text.
    expect(toInboundMessage(message({ photo, caption: 'nice' }), config, me)).toMatchObject({ text: 'nice', addressed: false });
    expect(toInboundMessage(message({ photo, caption: '@claw_bot what is this?' }), config, me)).toMatchObject({ text: 'what is this?', addressed: true, files: [{ ref: 'large' }] });
  });
});
