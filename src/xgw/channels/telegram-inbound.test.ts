import { describe, expect, it } from 'vitest';
import { toInboundMessage } from './telegram-inbound.js';

describe('toInboundMessage', () => {
  const me = { id: 7_000_001, username: 'claw_bot' };
  const config = { id: 'telegram:main', groups: { require_mention: true } };
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

  it('says whether a group message addressed the bot, also where the config takes every message', () => {
    const every = { ...config, groups: { require_mention: false } };
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
    expect(toInboundMessage(message({ text: 'hi @claw_bot2' }), config, me)).toBeNull();
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
});
