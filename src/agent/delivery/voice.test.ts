import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatMessageContent, parseMessageContent, type Attachment } from '../../core/message.js';
import { PaiConfigSchema } from '../../pai/index.js';
import { startFakeOpenAI, transcriptionRequests, type FakeLlmServer } from '../../testing/fake-llm.js';
import { createTestHome, type TestHome } from '../../testing/index.js';
import { agentDir } from '../agent-dir.js';
import { hearVoice } from './voice.js';

/** The runtime's transcription of voice messages, against the fake OpenAI server. */
const servers: FakeLlmServer[] = [];
const homes: TestHome[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  for (const home of homes.splice(0)) home.cleanup();
});

async function setup(words: (bytes: string) => string) {
  const server = await startFakeOpenAI({ transcribe: (audio) => ({ text: words(audio.bytes.toString()) }) });
  servers.push(server);
  const home = createTestHome();
  homes.push(home);
  const dir = agentDir(home.home, 'admin');
  mkdirSync(join(dir.root, 'files'), { recursive: true });
  writeFileSync(join(dir.root, 'files', 'a.ogg'), 'first');
  writeFileSync(join(dir.root, 'files', 'b.ogg'), 'second');
  const paiConfig = PaiConfigSchema.parse({ providers: { fake: { base_url: server.url } }, transcription: { model: 'fake/whisper-1' }, retry: { initial_delay_ms: 5 } });
  const hear = (text: string, attachments: Attachment[]) => hearVoice(formatMessageContent({ text, attachments }), { dir, paiConfig, env: {} });
  return { server, hear, dir };
}

const voice = (path: string): Attachment => ({ type: 'voice', path, mime_type: 'audio/ogg' });

describe('hearing voice messages', () => {
  it("puts the words after the caption, each voice message's in turn, and marks them transcribed", async () => {
    const { hear } = await setup((bytes) => `words of the ${bytes}`);
    const heard = await hear('from the garden', [voice('files/a.ogg'), { type: 'image', path: 'files/p.jpg' }, voice('files/b.ogg')]);
    expect(heard.problem).toBeUndefined();
    expect(parseMessageContent(heard.content)).toMatchObject({
      text: 'from the garden\n\nwords of the first\n\nwords of the second',
      attachments: [{ type: 'voice', transcribed: true }, { type: 'image' }, { type: 'voice', transcribed: true }],
    });
  });

  it('leaves the message as it came, saying why, when a voice message has no words or is not in the agent files', async () => {
    const { hear, server } = await setup(() => '  ');
    const silent = await hear('', [voice('files/a.ogg')]);
    expect(parseMessageContent(silent.content).attachments[0]!.transcribed).toBeUndefined();
    expect(String(silent.problem)).toContain('no words');
    const elsewhere = await hear('', [voice('/etc/passwd')]);
    expect(String(elsewhere.problem)).toContain("not in the agent's files");
    expect(transcriptionRequests(server)).toHaveLength(1); // nothing from outside the agent's directory was sent
  });

  it('sends nothing for a message without a voice message', async () => {
    const { hear, server } = await setup(() => 'x');
    const plain = formatMessageContent({ text: 'hi', attachments: [{ type: 'audio', path: 'files/a.ogg' }] });
    expect((await hear('hi', [{ type: 'audio', path: 'files/a.ogg' }])).content).toBe(plain);
    expect(transcriptionRequests(server)).toHaveLength(0);
  });
});
