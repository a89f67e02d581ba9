import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isClawError } from '../core/errors.js';
import { startFakeOpenAI, transcriptionRequests, type FakeLlmOptions, type FakeLlmServer } from '../testing/fake-llm.js';
import { createTestHome, type TestHome } from '../testing/index.js';
import { ModelCallError } from './model-error.js';
import { transcribe, transcriptionModel } from './transcribe.js';
import { PaiConfigSchema, type PaiConfig } from './types.js';

/** pai's transcription client against the fake OpenAI server's /v1/audio/transcriptions. */
const servers: FakeLlmServer[] = [];
const homes: TestHome[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  for (const home of homes.splice(0)) home.cleanup();
});

async function setup(options: FakeLlmOptions = {}, provider: Record<string, unknown> = {}): Promise<{ server: FakeLlmServer; config: PaiConfig; voice: string }> {
  const server = await startFakeOpenAI(options);
  servers.push(server);
  const home = createTestHome();
  homes.push(home);
  const voice = join(home.home, 'voice.ogg');
  writeFileSync(voice, 'OggS a voice');
  const config = PaiConfigSchema.parse({
    providers: { fake: { api: 'openai-completions', base_url: server.url, ...provider } },
    transcription: { model: 'fake/whisper-1' },
    retry: { max_attempts: 3, initial_delay_ms: 5 },
  });
  return { server, config, voice };
}

describe('transcribe', () => {
  it('sends the audio with its name and type to the configured model, and returns its words', async () => {
    const { server, config, voice } = await setup({ transcribe: (audio) => ({ text: `  heard ${audio.bytes.toString()} \n` }) });
    expect(await transcribe({ path: voice, mime_type: 'audio/ogg' }, { config, env: {} })).toBe('heard OggS a voice');
    expect(transcriptionRequests(server).map((request) => request.body)).toEqual([
      { model: 'whisper-1', response_format: 'json', file: { name: 'voice.ogg', mime_type: 'audio/ogg', bytes: Buffer.from('OggS a voice') } },
    ]);
  });

  it("takes the key from the provider's api_key_env, and does not retry a refusal", async () => {
    const { server, config, voice } = await setup({ apiKey: 'secret' }, { api_key_env: 'FAKE_KEY' });
    expect(await transcribe({ path: voice }, { config, env: { FAKE_KEY: 'secret' } })).toBe('fake transcript of voice.ogg');
    const error = await transcribe({ path: voice }, { config, env: { FAKE_KEY: 'wrong' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect((error as ModelCallError).modelError).toMatchObject({ kind: 'auth', status: 401 });
    expect(transcriptionRequests(server)).toHaveLength(2); // one each: a refusal is not tried again
  });

  it('retries a failing server as a model call is retried, and says what failed for good', async () => {
    let failures = 1;
    const { server, config, voice } = await setup({ transcribe: () => (failures-- > 0 ? { status: 503 } : { text: 'back' }) });
    expect(await transcribe({ path: voice }, { config, env: {} })).toBe('back');
    failures = 3;
    const error = await transcribe({ path: voice }, { config, env: {} }).catch((e: unknown) => e);
    expect((error as ModelCallError).modelError).toMatchObject({ kind: 'server', status: 503 });
    expect((error as ModelCallError).message).toContain('after 3 attempts');
    expect(transcriptionRequests(server)).toHaveLength(2 + 3);
  });

  it('refuses what cannot be sent: no model configured, a provider without an endpoint, no key', async () => {
    const none = PaiConfigSchema.parse({});
    expect(transcriptionModel(none)).toBeNull();
    expect(isClawError(await transcribe({ path: '/nonexistent' }, { config: none }).catch((e: unknown) => e), 'usage')).toBe(true);
    const unknown = PaiConfigSchema.parse({ transcription: { model: 'anthropic/whisper' } });
    expect(() => transcriptionModel(unknown)).toThrow(/no transcription endpoint of provider anthropic/);
    const openai = PaiConfigSchema.parse({ transcription: { model: 'openai/whisper-1' } });
    expect(transcriptionModel(openai)).toMatchObject({ baseUrl: 'https://api.openai.com/v1', model: 'whisper-1', apiKeyEnvs: ['OPENAI_API_KEY'], keyless: false });
    const error = await transcribe({ path: '/nonexistent' }, { config: openai, env: {} }).catch((e: unknown) => e);
    expect((error as ModelCallError).message).toBe('OPENAI_API_KEY is not set'); // before any request, and before the file
    expect(() => PaiConfigSchema.parse({ transcription: { model: 'whisper-1' } })).toThrow(/provider\/model/);
  });
});
