import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type postgres from 'postgres';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { createLogger } from '../../core/logger.js';
import { formatMessageContent, parseMessageContent, type Attachment } from '../../core/message.js';
import { transcriptionRequests, type FakeStep, type LooseJson } from '../../testing/fake-llm.js';
import { startFakeTelegram, textUpdate, type FakeTelegram } from '../../testing/fake-telegram.js';
import { startFakeOpenAI, waitFor, writeFakePaiConfig, type FakeLlmServer, type TestHome } from '../../testing/index.js';
import { NEEDS_POSTGRES, postgresUnavailable } from '../../testing/postgres.js';
import { startTwoHosts, type HostName, type TwoHosts } from '../../testing/two-hosts.js';
import { sha256Of, type ThreadEvent, type ThreadStore } from '../../thread/index.js';
import { createChannel, Gateway, GatewayState, XgwConfigSchema, type ChannelAdapter } from '../../xgw/index.js';
import { agentDir } from '../agent-dir.js';
import { initAgent, startAgent } from '../lifecycle.js';
import { runAgent } from '../run.js';
import { closeThreadStores } from '../threads.js';
import { receiveFiles } from './shared-files.js';

/**
 * Files people send, to an agent on another host than the gateway that takes them: two "hosts"
 * (two homes, THECLAW_HOST a and b) on one PostgreSQL store. a's gateway (in-process) owns
 * Telegram (a fake); the agent's directory is on b only, where its turns run (in-process). A photo
 * sent on a's Telegram reaches the turn on b, whose command reads its bytes, and a voice message is
 * transcribed there; a message naming a file it has no right to, or one the store no longer
 * holds, gets nothing.
 */

const unavailable = postgresUnavailable();
const PEER = 4343;
// The smallest valid PNG: 1×1, transparent.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');
let two: TwoHosts | undefined;
let store: ThreadStore;
let admin: postgres.Sql;
let telegram: FakeTelegram;
let llm: FakeLlmServer;
let state: GatewayState;
let channel: ChannelAdapter;
let hosts: Record<HostName, TestHome>;
let envs: Record<HostName, NodeJS.ProcessEnv>;

/** A file named in the person's message is read with a command (base64, so its bytes show); the command's output is the answer. */
const step: FakeStep = (request) => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === 'tool') return { kind: 'text', text: `read: ${String(last.content)}` };
  const path = /\/\S+\/files\/[0-9a-f]{64}\.[a-z]+/.exec(JSON.stringify(last?.content ?? ''))?.[0];
  return path ? { kind: 'tool_call', name: 'bash_exec', arguments: { command: `base64 -w0 '${path}'` } } : { kind: 'text', text: 'no file' };
};

beforeAll(async () => {
  if (unavailable) return;
  [telegram, llm] = await Promise.all([startFakeTelegram(), startFakeOpenAI({ defaultStep: step, transcribe: (audio) => ({ text: audio.bytes.toString() }) })]);
  two = await startTwoHosts('receive_hosts', { a: { TELEGRAM_TOKEN: telegram.token } });
  ({ homes: hosts, envs, store, admin } = two);
  writeFakePaiConfig(hosts.b.home, llm);
  appendFileSync(join(hosts.b.home, 'pai', 'config.yaml'), 'transcription: { model: fake/whisper-1 }\n');
  for (const id of ['helper', 'other']) await initAgent(hosts.b.home, id, {}, envs.b);
  // The person is the owner, whose chat may run commands.
  const config = agentDir(hosts.b.home, 'helper').config;
  writeFileSync(config, stringify({ ...(parse(readFileSync(config, 'utf8')) as object), policy: { owners: [`telegram:main:${PEER}`] } }));
  await startAgent(hosts.b.home, 'helper', envs.b);

  const xgwConfig = XgwConfigSchema.parse({
    channels: [{ id: 'telegram:main', type: 'telegram', token_env: 'TELEGRAM_TOKEN', api_root: telegram.apiRoot, access: 'open' }],
    routes: [{ channel: '*', peer: '*', agent: 'helper' }],
  });
  state = new GatewayState(hosts.a.home);
  const gateway = new Gateway({ home: hosts.a.home, config: xgwConfig, state, store, logger: createLogger(join(hosts.a.home, 'logs', 'xgw.log'), { env: {} }) });
  channel = await createChannel(xgwConfig.channels[0]!, envs.a);
  await gateway.startChannel(channel);
}, 120_000);

afterAll(async () => {
  await channel?.stop();
  state?.close();
  await closeThreadStores();
  await Promise.allSettled([telegram?.close(), llm?.close()]);
  await two?.stop();
});

const helper = () => agentDir(hosts.b.home, 'helper');
const filesOf = (root: string) => (existsSync(join(root, 'files')) ? readdirSync(join(root, 'files')) : []);
const person = formatAddress({ kind: 'external', channelType: 'telegram', instance: 'main', conversationType: 'dm', conversationId: String(PEER), peerId: String(PEER) });

/** Sends a message with `what` (a photo, a voice message) on a's Telegram; returns its inbox event. */
async function sendOnA(what: LooseJson): Promise<ThreadEvent> {
  const inbox = await store.open('agents/helper/inbox');
  try {
    const before = (await inbox.info()).events;
    telegram.queueUpdate(textUpdate({ from: PEER, with: what }));
    await waitFor(async () => (await inbox.info()).events > before, 'the message in the inbox', 15_000, 20);
    return (await inbox.peek({ last: 1 }))[0]!;
  } finally {
    await inbox.close();
  }
}

/** What the turn's model was told last, and what its command answered. */
function lastTurn(): { told: string; read: string | undefined } {
  const messages: LooseJson[] = llm.requests.at(-1)?.body?.messages ?? [];
  const told = messages.findLast((message) => message?.role === 'user');
  return { told: JSON.stringify(told?.content ?? ''), read: messages.findLast((message) => message?.role === 'tool')?.content };
}

describe.skipIf(unavailable !== null)(`files people send to an agent on another host${unavailable ? ` (skipped: ${NEEDS_POSTGRES})` : ''}`, () => {
  it("gives the turn on host b the photo a person sent through host a's Telegram, which its command reads", async () => {
    const event = await sendOnA({ caption: 'what is this?', photo: [{ file_id: telegram.addFile(PNG), file_unique_id: 'p', width: 1, height: 1, file_size: PNG.length }] });
    // The message names the file by its hash; its bytes are in the store, not in a's home.
    const stored = `files/${sha256Of(PNG)}.jpg`;
    expect(parseMessageContent(event!.content).attachments).toEqual([{ type: 'image', path: stored, bytes: PNG.length, mime_type: 'image/jpeg' }]);
    expect(existsSync(join(hosts.a.home, 'agents', 'helper'))).toBe(false);

    expect(await runAgent('helper', { home: hosts.b.home, env: envs.b })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(readFileSync(join(helper().root, stored))).toEqual(PNG);
    expect(lastTurn().read).toContain(PNG.toString('base64'));
  });

  it("transcribes on host b a voice message a person sent through host a's Telegram", async () => {
    const words = 'OggS water the plants at six';
    await sendOnA({ voice: { file_id: telegram.addFile(Buffer.from(words)), file_unique_id: 'v', duration: 2, mime_type: 'audio/ogg' } });
    expect(await runAgent('helper', { home: hosts.b.home, env: envs.b })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(transcriptionRequests(llm)).toHaveLength(1);
    expect(lastTurn().told).toContain(words);
  });

  it('copies no file a message has no right to, and tells the turn of one the store no longer holds', async () => {
    const logger = createLogger(join(hosts.b.home, 'logs', 'receive.log'), { env: {} });
    const receive = (source: string, attachments: Attachment[]) => receiveFiles(hosts.b.home, helper(), { source, content: formatMessageContent({ text: 'look', attachments }) }, envs.b, logger);
    const document = (path: string): Attachment => ({ type: 'document', path, name: 'notes.txt' });
    const before = filesOf(helper().root);

    // Another agent's file on b, and one its person sent it through a gateway (in the store).
    const mine = Buffer.from("other's notes\n");
    const otherFile = join(agentDir(hosts.b.home, 'other').root, 'files', `${sha256Of(mine)}.txt`);
    mkdirSync(dirname(otherFile), { recursive: true });
    writeFileSync(otherFile, mine);
    const theirs = Buffer.from("other's person's notes\n");
    const theirsHash = await store.files!.put(theirs);
    // A row whose bytes are not its name's (written by a hostile peer of the database).
    const forgedHash = sha256Of(Buffer.from('genuine'));
    await admin`INSERT INTO theclaw.files (sha256, bytes) VALUES (${forgedHash}, ${Buffer.from('forged')})`;
    const untouched: [string, Attachment[]][] = [
      // Not a person's message: no agent sends another a file.
      [formatAddress({ kind: 'internal', conversationType: 'dm', conversationId: 'x', agentId: 'other' }), [document(`files/${theirsHash}.txt`)]],
      // Not a stored file's name: left to ownFile, which takes nothing outside the agent's directory.
      [person, [document(`files/../../other/files/${sha256Of(mine)}.txt`), document(otherFile), document('/etc/passwd')]],
    ];
    for (const [source, attachments] of untouched) {
      const content = formatMessageContent({ text: 'look', attachments });
      expect(await receive(source, attachments)).toBe(content);
    }
    // A name the store holds no file of (another host's file, a forged row): the path is dropped.
    for (const hash of [sha256Of(mine), forgedHash]) {
      expect(parseMessageContent(await receive(person, [document(`files/${hash}.txt`)])).attachments).toEqual([{ type: 'document', name: 'notes.txt' }]);
    }
    expect(filesOf(helper().root)).toEqual(before);

    // A message that waited past the store's 7 days: its turn is told the file did not come.
    const old = Buffer.from('sent long ago\n');
    await admin`INSERT INTO theclaw.files (sha256, bytes, stored_at) VALUES (${sha256Of(old)}, ${old}, now() - interval '8 days')`;
    await store.files!.put(Buffer.from('a newer file'));
    const inbox = await store.open('agents/helper/inbox');
    await inbox.append([{ source: person, type: 'message', content: formatMessageContent({ text: 'my notes', attachments: [document(`files/${sha256Of(old)}.txt`)] }) }]);
    await inbox.close();
    expect(await runAgent('helper', { home: hosts.b.home, env: envs.b })).toMatchObject({ handled: 1, replied: 1, errors: 0 });
    expect(lastTurn().told).toContain('notes.txt\\" (no file). It did not reach me');
    expect(filesOf(helper().root)).toEqual(before);
  });
});
