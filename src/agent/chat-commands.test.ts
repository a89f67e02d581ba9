import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import { useTestThread } from '../testing/index.js';
import { CHAT_COMMANDS, chatCommandHelp, chatCommandOf, parseChatCommand, withoutChatCommands, type ChatCommand } from './chat-commands.js';

const NAMES = Object.keys(CHAT_COMMANDS) as ChatCommand[];

describe('parseChatCommand', () => {
  it.each([
    ['/new', 'new'],
    ['/reset', 'reset'],
    ['/stop', 'stop'],
    ['/status', 'status'],
    ['/usage', 'usage'],
    ['/help', 'help'],
    ['  /stop  ', 'stop'],
    ['/Stop', 'stop'],
    ['/STATUS', 'status'],
    ['/stop please, now', 'stop'],
    ['/new\nand more lines', 'new'],
    ['/status@theclaw_bot', 'status'],
    ['/help@Some_Bot2 extra', 'help'],
  ])('reads %j as /%s', (text, command) => {
    expect(parseChatCommand(text)).toBe(command);
  });

  it.each([
    ['/x', 'an unknown command'],
    ['/start', "Telegram's start, not one of ours"],
    ['/stopnow', 'a longer word'],
    ['/stop-it', 'a word going on after a hyphen'],
    ['/status@', 'an empty bot name'],
    ['/status@bot!', 'a bot name going on'],
    ['please /stop', 'a command not at the start'],
    ['stop', 'no slash'],
    ['//stop', 'two slashes'],
    ['/ stop', 'a space after the slash'],
    ['', 'nothing'],
    ['/', 'a slash alone'],
  ])('takes %j as text (%s)', (text) => {
    expect(parseChatCommand(text)).toBeNull();
  });

  it('never throws, and returns only the listed commands', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme-composite', maxLength: 60 }), (text) => {
        const command = parseChatCommand(text);
        expect(command === null || NAMES.includes(command)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('parses exactly the texts that are a listed name after a slash, with or without a bot name and words after', () => {
    const word = fc.stringMatching(/^[A-Za-z]{1,8}$/);
    fc.assert(
      fc.property(
        fc.oneof(fc.constantFrom(...NAMES), word),
        fc.option(fc.stringMatching(/^@[A-Za-z0-9_]{1,12}$/), { nil: '' }),
        fc.option(fc.stringMatching(/^ [a-z ]{0,10}$/), { nil: '' }),
        (name, bot, rest) => {
          const expected = NAMES.includes(name.toLowerCase() as ChatCommand) ? name.toLowerCase() : null;
          expect(parseChatCommand(`/${name}${bot}${rest}`)).toBe(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lists every command in /help', () => {
    for (const name of NAMES) expect(chatCommandHelp()).toContain(`/${name} - ${CHAT_COMMANDS[name]}`);
  });
});

describe('chatCommandOf', () => {
  const external = (conversationType: string) => formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType, conversationId: '-100', peerId: '5' });
  const message = (source: string, fields: Record<string, unknown>) => ({ source, content: JSON.stringify({ attachments: [], ...fields }) });

  it('takes a command from a person in a direct chat', () => {
    expect(chatCommandOf(message(external('dm'), { text: '/stop' }))).toBe('stop');
  });

  it('takes a group command only when the channel says it addressed us', () => {
    expect(chatCommandOf(message(external('group'), { text: '/stop', addressed: true }))).toBe('stop');
    expect(chatCommandOf(message(external('group'), { text: '/stop', addressed: false }))).toBeNull();
    expect(chatCommandOf(message(external('group'), { text: '/stop' }))).toBeNull();
  });

  it("never takes another agent's text as a command, nor a malformed message", () => {
    expect(chatCommandOf(message(formatAddress({ kind: 'internal', conversationType: 'reply', conversationId: 'peer-x', agentId: 'other' }), { text: '/reset' }))).toBeNull();
    expect(chatCommandOf(message('self', { text: '/reset' }))).toBeNull();
    expect(chatCommandOf({ source: external('dm'), content: '/stop' })).toBeNull();
    expect(chatCommandOf({ source: 'external:broken', content: '{"text":"/stop"}' })).toBeNull();
  });

  it('never throws on arbitrary content', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (source, content) => {
        chatCommandOf({ source, content });
      }),
    );
  });
});

describe('withoutChatCommands', async () => {
  const person = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: 'ann', peerId: 'ann' });
  const test = useTestThread();
  const push = (source: string, fields: Record<string, unknown>) => test.thread.push({ source, type: 'message', content: JSON.stringify({ attachments: [], ...fields }) });

  it('drops the commands and the answers to them, also when the command lies before the events, and keeps the rest', async () => {
    const reset = push(person, { text: '/reset' });
    push('self', { text: 'Started a new conversation.', in_reply_to: reset });
    const question = push(person, { text: 'what is 6*7?' });
    push('self', { text: '42', in_reply_to: question });
    const status = push(person, { text: '/status' });
    push('self', { text: 'Model: fake/m1', in_reply_to: status });
    push(person, { text: '/x is not a command' });
    const eventsAfter = (id: number) => test.thread.peek({ afterId: id });
    expect((await withoutChatCommands(test.stored, eventsAfter(reset))).map((event) => parseMessageContent(event.content).text)).toEqual(['what is 6*7?', '42', '/x is not a command']);
    expect(await withoutChatCommands(test.stored, eventsAfter(0))).toEqual(await withoutChatCommands(test.stored, eventsAfter(reset)));
  });
});
