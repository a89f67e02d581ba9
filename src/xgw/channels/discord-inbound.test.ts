import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toDiscordInbound } from './discord-inbound.js';

describe('toDiscordInbound', () => {
  const me = { id: '900' };
  const config = { id: 'discord:main' };
  const author = { id: '5', username: 'ann', global_name: 'Ann Lee', discriminator: '0', avatar: null };
  const message = (fields: Record<string, unknown>) => ({ id: '77', channel_id: '3000', guild_id: '1000', author, content: '', mentions: [], attachments: [], type: 0, ...fields }) as never;

  it.each([
    ['<@900> hello', 'hello'],
    ['hello <@!900>, how are you', 'hello , how are you'],
    ['hello <@900> how are you', 'hello how are you'],
    ['<@900>', '<@900>'],
    ['hi <@901> and <@900>', 'hi <@901> and'],
  ])('strips the mention from %j', (content, expected) => {
    expect(toDiscordInbound(message({ content, mentions: [{ id: '900' }] }), config, me)?.message.text).toBe(expected);
  });

  it('takes every server message and says which mentioned or replied to the bot (the gateway keeps the others as context)', () => {
    expect(toDiscordInbound(message({ content: 'hello all' }), config, me)?.message).toMatchObject({ text: 'hello all', addressed: false });
    expect(toDiscordInbound(message({ content: 'hi <@901>', mentions: [{ id: '901' }] }), config, me)?.message).toMatchObject({ addressed: false });
    const reply = toDiscordInbound(message({ content: 'thanks', type: 19, referenced_message: { author: { id: '900' } } }), config, me);
    expect(reply?.message).toMatchObject({ conversationType: 'group', conversationId: '3000', peerId: '5', peerName: 'Ann Lee', text: 'thanks', addressed: true });
    expect(toDiscordInbound(message({ content: '/stop' }), config, me)?.message.addressed).toBe(false);
    expect(toDiscordInbound(message({ content: '<@900> /stop', mentions: [{ id: '900' }] }), config, me)?.message).toMatchObject({ text: '/stop', addressed: true });
  });

  it('addresses a direct message to the peer, answers in its DM channel, and leaves the text as it is', () => {
    const dm = toDiscordInbound(message({ guild_id: undefined, content: '<@900>  spaced  text ' }), config, me);
    expect(dm).toEqual({
      message: { channelId: 'discord:main', conversationType: 'dm', conversationId: '5', peerId: '5', peerName: 'Ann Lee', messageId: '77', text: '<@900>  spaced  text ' },
      channelId: '3000',
    });
  });

  it("leaves out bots, webhooks, the platform's own messages and empty ones, but not files without text", () => {
    const dm = { guild_id: undefined };
    expect(toDiscordInbound(message({ ...dm, content: 'hi', author: { ...author, bot: true } }), config, me)).toBeNull();
    expect(toDiscordInbound(message({ ...dm, content: 'hi', webhook_id: '8' }), config, me)).toBeNull();
    expect(toDiscordInbound(message({ ...dm, content: '', type: 7 }), config, me)).toBeNull(); // a member joined
    expect(toDiscordInbound(message({ ...dm, content: '  ' }), config, me)).toBeNull();
    expect(toDiscordInbound(message({ ...dm, attachments: [{ id: '1', filename: 'a.png', size: 9, url: 'https://cdn/a.png', content_type: 'image/png' }] }), config, me)).toMatchObject({
      message: { text: '', files: [{ kind: 'image', ref: 'https://cdn/a.png', name: 'a.png', bytes: 9, mime_type: 'image/png' }] },
    });
    // A voice message is a file for the agent's runtime to transcribe; a sticker, which no agent takes, is said so rather than dropped.
    const voice = toDiscordInbound(
      message({ ...dm, flags: 1 << 13, attachments: [{ id: '2', filename: 'voice-message.ogg', size: 4, url: 'https://cdn/v.ogg', content_type: 'audio/ogg' }] }),
      config,
      me,
    )?.message;
    expect(voice).toMatchObject({ text: '', files: [{ kind: 'voice', ref: 'https://cdn/v.ogg', name: 'voice-message.ogg', bytes: 4, mime_type: 'audio/ogg' }] });
    expect(voice?.unsupported).toBeUndefined();
    expect(toDiscordInbound(message({ ...dm, sticker_items: [{ id: '3', name: 'wave', format_type: 1 }] }), config, me)?.message).toMatchObject({ unsupported: 'stickers' });
  });

  it('never leaves a mention of the bot in the text of a server message that has other words', () => {
    const word = fc.stringMatching(/^[a-z<@!>0-9]{1,6}$/);
    const part = fc.oneof(word, fc.constantFrom('<@900>', '<@!900>'));
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 8 }), fc.constantFrom(' ', '  ', '\n'), (parts, separator) => {
        const content = parts.join(separator);
        const text = toDiscordInbound(message({ content, mentions: [{ id: '900' }] }), config, me)!.message.text;
        const onlyMentions = content.replace(/<@!?900>/g, '').trim() === '';
        if (onlyMentions)
          expect(text).toBe(content); // nothing else to pass on: kept as written
        else expect(text).not.toMatch(/<@!?900>/);
      }),
    );
  });
});
