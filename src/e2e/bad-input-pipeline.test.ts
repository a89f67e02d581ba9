import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { formatAddress } from '../core/address.js';
import { messageText } from '../agent/context.js';
import { parseMessageContent } from '../core/message.js';
import { expectRefused, webchatCredential, type LooseJson } from '../testing/index.js';
import { textUpdate } from '../testing/fake-telegram.js';
import type { ThreadEvent } from '../thread/types.js';
import { MAX_TEXT_BYTES } from '../xgw/channels/webchat-protocol.js';
import { webchatProtocols } from '../xgw/channels/webchat-http.js';
import { cliPath } from '../core/package.js';
import { runArgv, startSystem, threadSnapshot, until, untilAnswered, type System } from './support.js';

/**
 * Bad input at the running system's boundaries: web chat frames, Telegram updates, `agent send`,
 * what else lands in an agent's inbox, and peer or channel ids that would make paths. One system
 * for the file (its model answers `ok` to everything). Each input is either taken intact — the
 * inbox event holds exactly what was sent — or refused with a clear answer while the inbox stays
 * as it was; either way the gateway keeps running and the next message is answered.
 */

let s: System;
let inbox: string;

beforeAll(async () => {
  s = await startSystem({ llm: { defaultStep: { kind: 'text', text: 'ok' } } });
  inbox = join(s.home, 'agents', 'admin', 'inbox');
});

afterAll(async () => {
  await s?.stop();
});

/** The inbox events pushed after `before` (a threadSnapshot). */
function newInboxEvents(before: { rows: unknown[] }): ThreadEvent[] {
  return s.events(inbox).slice(before.rows.length);
}

const textOf = (event: ThreadEvent) => parseMessageContent(event.content).text;

describe('the web chat WebSocket', () => {
  interface Connection {
    ws: WebSocket;
    /** Messages after the history, as they came. */
    received: LooseJson[];
    closed: Promise<number>;
    /** The credential of a new peer id, where the server issued one. */
    issued?: string;
  }
  let base: string;
  let token: string;
  const peer = randomBytes(16).toString('hex');

  beforeAll(async () => {
    const url = new URL((await s.xgwStatus()).channels.find((channel) => channel.id === 'webchat:main')!.url!);
    base = `http://127.0.0.1:${url.port}`;
    token = url.searchParams.get('token')!;
  });

  /** Connects as the page does: the token and the peer's credential in the handshake. */
  async function connect(credential = webchatCredential(s.home, 'webchat:main', peer)): Promise<Connection> {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/ws`, webchatProtocols(token, credential), { origin: base });
    const received: LooseJson[] = [];
    let history = false;
    let issued: string | undefined;
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as LooseJson;
      if (message.type === 'peer') issued = message.credential;
      else if (message.type === 'history' && !history) history = true;
      else received.push(message);
    });
    ws.on('error', () => {}); // a refused frame may reset the connection under a send
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    await until(() => history, 'the history');
    return { ws, received, closed, ...(issued && { issued }) };
  }

  const exactly = 'é'.repeat(MAX_TEXT_BYTES / 2);
  const cases: { name: string; frame: string | Buffer; binary?: boolean; answer: { close: number } | { reply: LooseJson } }[] = [
    { name: 'a text frame that is not UTF-8', frame: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), answer: { close: 1007 } },
    { name: 'a 10 MB frame', frame: JSON.stringify({ type: 'message', id: 'big', text: 'x'.repeat(10 * 1024 * 1024) }), answer: { close: 1009 } },
    {
      name: 'a binary frame',
      frame: Buffer.from(JSON.stringify({ type: 'message', id: 'b1', text: 'hi' })),
      binary: true,
      answer: { reply: { type: 'error', text: expect.stringMatching(/does not understand/) } },
    },
    { name: 'JSON that is not a message', frame: '{"type":"message","id":"../../x","text":"hi"}', answer: { reply: { type: 'error', text: expect.stringMatching(/does not understand/) } } },
    { name: 'a lone UTF-16 surrogate', frame: '{"type":"message","id":"s1","text":"a\\ud800b"}', answer: { reply: { type: 'error', id: 's1', text: expect.stringMatching(/broken character/) } } },
    {
      name: 'text one byte over the limit',
      frame: JSON.stringify({ type: 'message', id: 'o1', text: `${exactly}x` }),
      answer: { reply: { type: 'error', id: 'o1', text: expect.stringMatching(/too long \(the limit is 64 KB\)/) } },
    },
  ];

  it.each(cases)('refuses $name clearly and stores nothing', async ({ frame, binary, answer }) => {
    const before = threadSnapshot(inbox);
    const connection = await connect();
    connection.ws.send(frame, { binary: binary ?? false });
    if ('close' in answer) {
      expect(await connection.closed).toBe(answer.close);
    } else {
      await until(() => connection.received.length > 0, 'an answer');
      expect(connection.received).toEqual([answer.reply]);
      connection.ws.close();
    }
    expect(threadSnapshot(inbox)).toEqual(before);
  });

  it('takes text of exactly the limit intact, and still serves after every refusal', async () => {
    const before = threadSnapshot(inbox);
    const connection = await connect();
    connection.ws.send(JSON.stringify({ type: 'message', id: 'max1', text: exactly }));
    await until(() => connection.received.some((m) => m.type === 'message' && m.message.role === 'agent'), 'the answer', 20_000);
    expect(connection.received[0]).toEqual({ type: 'ack', id: 'max1', delivery: 'answering' });
    const added = newInboxEvents(before);
    expect(added).toHaveLength(1);
    expect(textOf(added[0]!) === exactly, 'the stored text is the text sent').toBe(true);
    connection.ws.close();
    // A peer id the server did not issue (a path, say) is not taken: the socket chats under a new one.
    const stranger = await connect('..%2F..%2Fetc');
    expect(stranger.issued).toMatch(/^[0-9a-f]{32}\.[0-9a-f]{64}$/);
    stranger.ws.close();
    await untilAnswered(s);
  });
});

describe('Telegram inbound', () => {
  it('refuses a 10 MB message with a notice, takes long and odd texts intact, and polls on', async () => {
    const before = threadSnapshot(inbox);
    const huge = s.telegram.queueUpdate(textUpdate({ from: 901, text: 'x'.repeat(10 * 1024 * 1024) }));
    await until(() => s.telegram.sent.some((sent) => sent.chat_id === 901), 'the notice');
    expect(s.telegram.sent.filter((sent) => sent.chat_id === 901)).toEqual([
      expect.objectContaining({
        text: expect.stringMatching(/^That message is too long to take \(the limit is 1024 KB\)/),
        reply_parameters: expect.objectContaining({ message_id: huge.message.message_id }),
      }),
    ]);
    expect(threadSnapshot(inbox)).toEqual(before);

    const texts = ['é✓🙂'.repeat(1024), 'a\ud800b — a lone surrogate, as JSON can spell it', 'nul \u0000 and bidi \u202e inside'];
    texts.forEach((text, index) => {
      s.telegram.queueUpdate(textUpdate({ from: 902 + index, text }));
    });
    await until(() => texts.every((_, index) => s.telegram.sent.some((sent) => sent.chat_id === 902 + index && sent.text === 'ok')), 'the answers', 20_000);
    expect(newInboxEvents(before).map(textOf)).toEqual(texts);
    await untilAnswered(s);
  });
});

describe('agent send --text', () => {
  it('takes the longest text an argument can carry intact (the OS refuses a 10 MB one before the tool runs)', async () => {
    const before = threadSnapshot(inbox);
    const long = 'é✓'.repeat(24_000); // 120,000 bytes; Linux caps one argument at 128 KiB
    // A process of its own: what is tested is what the OS lets an argument carry into it.
    const send = (text: string, ...flags: string[]) => runArgv(process.execPath, [cliPath('agent'), 'send', 'admin', '--text', text, ...flags], s.env);
    const result = await send(long, '--json');
    expect(result.code, result.stderr).toBe(0);
    const added = newInboxEvents(before);
    expect(added.map((event) => event.id)).toEqual([(JSON.parse(result.stdout) as { id: number }).id]);
    expect(textOf(added[0]!) === long, 'the stored text is the text sent').toBe(true);
    await expect(send('x'.repeat(10 * 1024 * 1024))).rejects.toThrow(/E2BIG/);
    await untilAnswered(s);
  });
});

describe('the inbox', () => {
  it('skips events that are not messages and messages it cannot route, without wedging: the next message is answered', async () => {
    const push = (...args: string[]) => s.must('thread', ['push', '--thread', inbox, ...args]);
    await push('--source', 'self', '--type', 'weird', '--content', 'what is this');
    await push('--source', 'self', '--type', 'record', '--subtype', 'error', '--content', '{}');
    await push('--source', 'bogus', '--type', 'message', '--content', '{"text":"from nowhere"}');
    await push('--source', 'self', '--type', 'message', '--content', '{"text":"from myself"}');
    const plainFrom = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: 'u1', peerId: 'u1' });
    await push('--source', plainFrom, '--type', 'message', '--content', 'plain text, not JSON');
    await push('--source', plainFrom, '--type', 'message', '--content', '{"text": 42}');
    await push('--source', 'self', '--type', 'weird', '--content', 'the last event is not a message either');
    await s.must('agent', ['send', 'admin', '--text', 'after all that']);
    await untilAnswered(s);

    const peers = join(s.home, 'agents', 'admin', 'threads', 'peers');
    const replies = (peer: string) =>
      s
        .events(join(peers, peer))
        .filter((event) => event.type === 'message')
        .map((event) => [event.source === 'self' ? 'agent' : 'peer', messageText(event.content)] as const);
    const u1 = replies('terminal.local.u1');
    expect(u1).toEqual([
      ['peer', 'plain text, not JSON'],
      ['agent', 'ok'],
      ['peer', '{"text": 42}'],
      ['agent', 'ok'],
    ]);
    const me = readdirSync(peers).find((name) => name.startsWith('terminal.local.') && name !== 'terminal.local.u1')!;
    expect(replies(me).slice(-2)).toEqual([
      ['peer', 'after all that'],
      ['agent', 'ok'],
    ]);
    const log = readFileSync(join(s.home, 'agents', 'admin', 'logs', 'agent.log'), 'utf8');
    expect(log).toMatch(/inbox event \d+ cannot be routed \(invalid source address "bogus"\); skipped/);
    expect(log).toMatch(/inbox event \d+ cannot be routed \(an inbox message has the source self\); skipped/);
    expect(threadSnapshot(inbox).integrity).toBe('ok');
  });
});

describe('hostile peer and channel ids', () => {
  it('a peer id with ../ in it gets a slugged thread inside the agent, and is answered', async () => {
    const source = formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: '../../escape', peerId: '../../escape' });
    await s.must('agent', ['send', 'admin', '--source', source, '--text', 'let me out']);
    await untilAnswered(s);
    const peers = join(s.home, 'agents', 'admin', 'threads', 'peers');
    const mine = readdirSync(peers).filter((name) => name.includes('escape'));
    expect(mine).toEqual([expect.stringMatching(/^terminal\.local\.[^/]*escape--[0-9a-f]{10}$/)]);
    expect(
      s
        .events(join(peers, mine[0]!))
        .filter((e) => e.type === 'message')
        .map((e) => parseMessageContent(e.content).text),
    ).toEqual(['let me out', 'ok']);
    for (const outside of [join(s.home, 'agents', 'admin', 'threads', 'escape'), join(s.home, 'agents', 'escape'), join(s.home, 'escape')]) {
      expect(existsSync(outside), outside).toBe(false);
    }
  });

  it('xgw send refuses a channel id that is not configured', async () => {
    for (const channel of ['../x', 'telegram:main/../../x', 'webchat:main\n']) {
      const [plain, json] = await Promise.all([
        s.run('xgw', ['send', '--channel', channel, '--peer', '1', '--text', 'hi']),
        s.run('xgw', ['send', '--channel', channel, '--peer', '1', '--text', 'hi', '--json']),
      ]);
      expectRefused(plain, 2, /no channel .* is configured/);
      expectRefused(json, 2, /no channel .* is configured/s, { json: true });
    }
  });
});
