import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatSlackMessageRef, parseSlackMessageRef, SlackMessageEventSchema, toSlackInbound } from './slack-inbound.js';
import { fromSlackText, toSlackText } from './slack-text.js';

describe('Slack text', () => {
  it('comes back as written from what the agent sends: no text becomes markup (a mention, a link, <!channel>)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('<', '>', '&', '|', '@', '!', '#', 'a', ' ', 'amp;', 'lt;', 'é') }), (text) => {
        const sent = toSlackText(text);
        expect(sent).not.toMatch(/[<>]/);
        expect(fromSlackText(sent)).toBe(text);
      }),
    );
    expect(toSlackText('<!channel> & <@U1>')).toBe('&lt;!channel&gt; &amp; &lt;@U1&gt;');
  });

  it.each([
    ['a &lt;b&gt; &amp;amp; c', 'a <b> &amp; c'],
    ['see <https://example.com/a?b=1&amp;c=2|the page>', 'see the page (https://example.com/a?b=1&c=2)'],
    ['<https://example.com>', 'https://example.com'],
    ['<mailto:ann@example.com|ann@example.com>', 'ann@example.com'],
    ['ask <@U222> in <#C333|general>', 'ask @U222 in #general'],
    ['<!here> and <!subteam^S1|@team>', '@here and @team'],
  ])('reads %j as %j', (slack, plain) => {
    expect(fromSlackText(slack)).toBe(plain);
  });
});

describe('Slack message refs', () => {
  const ts = fc.tuple(fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 0, max: 999_999 })).map(([s, n]) => `${s}.${String(n).padStart(6, '0')}`);

  it('parse what they format, a reply in a thread naming its thread', () => {
    fc.assert(
      fc.property(ts, ts, (message, thread) => {
        expect(parseSlackMessageRef(formatSlackMessageRef({ ts: message, threadTs: thread }))).toEqual({ ts: message, threadTs: thread });
      }),
    );
    expect(formatSlackMessageRef({ ts: '1.000002', threadTs: '1.000001' })).toBe('1.000001/1.000002');
    expect(formatSlackMessageRef({ ts: '1.000001', threadTs: '1.000001' })).toBe('1.000001');
  });

  it.each([undefined, '', '42', '1.2/3', '1.2/3.4/5.6', '../1.2', 'x1.2'])('name no thread for %j', (id) => {
    expect(parseSlackMessageRef(id)).toBeUndefined();
  });
});

describe('toSlackInbound', () => {
  const me = { userId: 'U0BOT' };
  const config = { id: 'slack:main' };
  const event = (fields: Record<string, unknown>) =>
    SlackMessageEventSchema.parse({ type: 'message', channel: 'C100', channel_type: 'channel', user: 'U5', ts: '1700000000.000100', text: '', ...fields });

  it.each([
    ['<@U0BOT> hello', 'hello'],
    ['hello <@U0BOT>, how &amp; why', 'hello , how & why'],
    ['hello <@U0BOT|theclaw> how are you', 'hello how are you'],
    ['<@U0BOT>', '@U0BOT'],
    ['hi <@U9> and <@U0BOT>', 'hi @U9 and'],
  ])('strips the mention from %j', (text, expected) => {
    expect(toSlackInbound(event({ text }), config, me)?.message.text).toBe(expected);
  });

  it('says whether a channel message mentions the bot or is in its thread (the gateway keeps the others as context), and answers in the thread of the message', () => {
    expect(toSlackInbound(event({ text: 'hello all' }), config, me)?.message).toMatchObject({ text: 'hello all', addressed: false });
    expect(toSlackInbound(event({ text: 'hi <@U9>' }), config, me)?.message).toMatchObject({ addressed: false });
    const inThread = toSlackInbound(event({ text: 'thanks', ts: '1700000000.000300', thread_ts: '1700000000.000200', parent_user_id: 'U0BOT' }), config, me);
    expect(inThread).toEqual({
      message: { channelId: 'slack:main', conversationType: 'group', conversationId: 'C100', peerId: 'U5', messageId: '1700000000.000200/1700000000.000300', text: 'thanks', addressed: true },
      channelId: 'C100',
      threadTs: '1700000000.000200',
    });
    expect(toSlackInbound(event({ text: '/stop' }), config, me)?.message.addressed).toBe(false);
    expect(toSlackInbound(event({ text: '<@U0BOT> /stop' }), config, me)?.message).toMatchObject({ text: '/stop', addressed: true, messageId: '1700000000.000100' });
  });

  it('addresses a direct message to the peer and answers in its DM channel, in the thread the message starts', () => {
    expect(toSlackInbound(event({ channel: 'D7', channel_type: 'im', text: 'a &lt;tag&gt;' }), config, me)).toEqual({
      message: { channelId: 'slack:main', conversationType: 'dm', conversationId: 'U5', peerId: 'U5', messageId: '1700000000.000100', text: 'a <tag>' },
      channelId: 'D7',
      threadTs: '1700000000.000100',
    });
  });

  it("leaves out bots (this one too), Slack's notices and empty messages, but not files without text", () => {
    const dm = { channel: 'D7', channel_type: 'im' };
    expect(toSlackInbound(event({ ...dm, text: 'hi', bot_id: 'B1' }), config, me)).toBeNull();
    expect(toSlackInbound(event({ ...dm, text: 'hi', user: 'U0BOT' }), config, me)).toBeNull();
    expect(toSlackInbound(event({ ...dm, text: 'hi', subtype: 'message_changed' }), config, me)).toBeNull();
    expect(toSlackInbound(event({ ...dm, text: '  ' }), config, me)).toBeNull();
    const file = { id: 'F1', name: 'a.png', mimetype: 'image/png', size: 3, url_private_download: 'https://files.slack.com/a.png' };
    const voice = { id: 'F2', name: 'clip.webm', mimetype: 'audio/webm', subtype: 'slack_audio', url_private_download: 'https://files.slack.com/clip.webm' };
    expect(toSlackInbound(event({ ...dm, subtype: 'file_share', files: [file, voice] }), config, me)?.message.files).toEqual([
      { kind: 'image', ref: 'https://files.slack.com/a.png', name: 'a.png', bytes: 3, mime_type: 'image/png' },
      { kind: 'voice', ref: 'https://files.slack.com/clip.webm', name: 'clip.webm', mime_type: 'audio/webm' },
    ]);
    expect(toSlackInbound(event({ ...dm, subtype: 'file_share', files: [{ id: 'F3' }] }), config, me)?.message.unsupported).toBe('files Slack does not let the bot download');
  });
});
