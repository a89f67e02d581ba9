import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../core/message.js';
import { completionRequests, transcriptionRequests, type FakeStep, type LooseJson, type RecordedRequest } from '../testing/fake-llm.js';
import { textUpdate } from '../testing/fake-telegram.js';
import { webchatCredential } from '../testing/index.js';
import { lastUserText, openWebchatPage, startSystem, telegramThread, until, untilAnswered, type System } from './support.js';

/**
 * Files people send on Telegram, through the whole system (real xgw, notifier, agent; fake
 * Telegram and model): stored in the agent's `files/` by their SHA-256, named in the message,
 * an image given to a model that sees images as an image, a document's path given to the model,
 * and what cannot be taken answered with a notice instead of dropped.
 */
const PEER = 5151;
// The smallest valid PNG: 1×1, transparent.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');
const PDF = Buffer.from('%PDF-1.4\n% a test document\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n');

let system: System | undefined;
/** The system of the tests that need no option of their own (see up). */
let plain: System | undefined;

afterEach(async () => {
  await system?.stop();
  system = undefined;
});

afterAll(async () => {
  await plain?.stop();
});

/** The agent attaches a report to its answer. */
const attachStep = (request: RecordedRequest): FakeStep => {
  const messages: LooseJson[] = request.body?.messages ?? [];
  if (messages.at(-1)?.role === 'user') return { kind: 'tool_call', name: 'bash_exec', arguments: { command: "printf 'quarterly numbers\\n' > report.txt && agent attach report.txt" } };
  return { kind: 'text', text: 'Here is the report.' };
};

/**
 * The system of the tests that need no option of their own, started by the first and shared (a
 * start is most of a test's time); what the fakes recorded is cleared before each. Its model
 * attaches the report when asked for it, and otherwise says it has the file.
 */
async function up(): Promise<System> {
  plain ??= await startSystem({
    logLevel: 'info',
    llm: { defaultStep: (request) => (lastUserText(request) === 'send me the report' ? attachStep(request) : { kind: 'text', text: 'I cannot see images, but I have the file.' }) },
  });
  for (const recorded of [plain.telegram.sent, plain.telegram.calls, plain.llm.requests]) recorded.splice(0);
  return plain;
}

/** The parts of the last user message of a model request (OpenAI chat format). */
function lastUserParts(request: { body?: LooseJson }): LooseJson[] {
  const last = (request.body?.messages ?? []).findLast((message: LooseJson) => message?.role === 'user');
  return Array.isArray(last?.content) ? last.content : [{ type: 'text', text: last?.content }];
}

const filesOf = (s: System) => readdirSync(join(s.home, 'agents', 'admin', 'files'));

describe('files people send', () => {
  it('gives a photo to a model that sees images as an image, and a document by its path; stores both once, by content', { timeout: 60_000 }, async () => {
    const s = await startSystem({ logLevel: 'info', modelSeesImages: true, llm: { defaultStep: (request) => ({ kind: 'text', text: `got: ${lastUserText(request).split('\n')[0]}` }) } });
    system = s;
    const photo = s.telegram.addFile(PNG);
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { caption: 'what is in this picture?', photo: [{ file_id: photo, file_unique_id: 'p', width: 1, height: 1, file_size: PNG.length }] } }));
    await until(() => s.telegram.sent.some((sent) => sent.text === 'got: what is in this picture?'), 'the answer to the photo', 30_000);

    const request = s.llm.requests.find((r) => lastUserText(r).startsWith('what is in this picture?'))!;
    const parts = lastUserParts(request);
    expect(parts.filter((part) => part.type === 'image_url').map((part) => part.image_url.url)).toEqual([`data:image/jpeg;base64,${PNG.toString('base64')}`]);
    expect(lastUserText(request)).toMatch(/\[image, shown: .*\/agents\/admin\/files\/[0-9a-f]{64}\.jpg \(image\/jpeg, 1 KB\)\]/);

    const doc = s.telegram.addFile(PDF);
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { document: { file_id: doc, file_unique_id: 'd', file_name: 'report.pdf', mime_type: 'application/pdf', file_size: PDF.length } } }));
    await until(() => s.llm.requests.some((r) => lastUserText(r).includes('report.pdf')), 'the document to reach the model', 30_000);
    const asked = lastUserText(s.llm.requests.find((r) => lastUserText(r).includes('report.pdf'))!);
    const path = /"report\.pdf" (\S+) \(application\/pdf/.exec(asked)![1]!;
    expect(readFileSync(path)).toEqual(PDF); // the model can read it there with bash_exec
    expect(asked).toContain('I can read it with bash_exec');
    expect(lastUserParts(s.llm.requests.find((r) => lastUserText(r).includes('report.pdf'))!).some((part) => part.type === 'image_url')).toBe(false);

    // The same photo again is stored once; the thread keeps each message's file by its relative path.
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { photo: [{ file_id: photo, file_unique_id: 'p', width: 1, height: 1 }] } }));
    await until(() => s.telegram.sent.length === 3, 'three answers', 30_000);
    const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
    expect(filesOf(s).sort()).toEqual([`${sha256(PDF)}.pdf`, `${sha256(PNG)}.jpg`].sort());
    const attachments = s
      .events(telegramThread(s.home, PEER))
      .filter((event) => event.type === 'message' && event.source !== 'self')
      .map((event) => parseMessageContent(event.content).attachments.map((a) => [a.type, a.path, a.bytes]));
    expect(attachments).toEqual([
      [['image', expect.stringMatching(/^files\/[0-9a-f]{64}\.jpg$/), PNG.length]],
      [['document', expect.stringMatching(/^files\/[0-9a-f]{64}\.pdf$/), PDF.length]],
      [['image', attachments[0]![0]![1], PNG.length]],
    ]);
  });

  it('tells the model it cannot see an image when its model takes text only, so the person hears so', { timeout: 60_000 }, async () => {
    const s = await up();
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { photo: [{ file_id: s.telegram.addFile(PNG), file_unique_id: 'p', width: 1, height: 1 }] } }));
    await until(() => s.telegram.sent.length === 1, 'the answer', 30_000);
    const request = s.llm.requests.at(-1)!;
    expect(lastUserParts(request).some((part) => part.type === 'image_url')).toBe(false);
    expect(lastUserText(request)).toContain('I cannot see images with the model I use');
  });

  it('answers what it cannot take with a notice, never silence: a voice message without a transcription model, a sticker, a file over the limit', { timeout: 60_000 }, async () => {
    const s = await startSystem({ logLevel: 'info', telegramMedia: '{ max_bytes: 100 }' });
    system = s;
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { voice: { file_id: s.telegram.addFile(Buffer.from('ogg')), file_unique_id: 'v', duration: 2 } } }));
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { sticker: { file_id: 'st', file_unique_id: 's', type: 'regular', width: 1, height: 1, is_animated: false, is_video: false } } }));
    const big = s.telegram.addFile(Buffer.alloc(5000));
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { caption: 'my thesis', document: { file_id: big, file_unique_id: 'big', file_name: 'thesis.pdf', file_size: 5000 } } }));
    await until(() => s.telegram.sent.length === 3, 'three notices', 30_000);
    // The sticker and the file are answered by xgw at once, the voice message by the agent's runtime.
    expect(s.telegram.sent.map((sent) => sent.text).sort()).toEqual(
      [
        'I cannot take voice messages yet: please write it as text.',
        'I cannot take stickers yet: please write it as text.',
        'That file is too large for me to take (the limit is 1 KB). Send a smaller one, or a link to it.',
      ].sort(),
    );
    expect(s.llm.requests).toHaveLength(0); // no model call, no transcription
    expect(s.telegram.calls.filter((call) => call.method === 'getFile' && call.params.file_id === big)).toHaveLength(0); // a file over the limit is not even fetched
    const records = s.events(telegramThread(s.home, PEER)).filter((event) => event.subtype === 'error');
    expect(records.map((event) => JSON.parse(event.content))).toMatchObject([{ stage: 'transcription', kind: 'not_configured' }]);
  });

  it('transcribes a voice message when pai names a transcription model: the model reads the words, the thread keeps them with the file; one that cannot be made out gets a notice', {
    timeout: 60_000,
  }, async () => {
    const WORDS = 'Remind me to water the plants at six.';
    const s = await startSystem({
      logLevel: 'info',
      transcription: true,
      llm: {
        transcribe: (audio) => (audio.bytes.toString() === 'OggS garbled' ? { status: 400, message: 'Audio file might be corrupted or unsupported' } : { text: WORDS }),
        defaultStep: (request) => ({ kind: 'text', text: `noted: ${lastUserText(request).split('\n')[0]}` }),
      },
    });
    system = s;
    const voice = Buffer.from('OggS a voice');
    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { voice: { file_id: s.telegram.addFile(voice), file_unique_id: 'v1', duration: 2, mime_type: 'audio/ogg', file_size: voice.length } } }));
    await until(() => s.telegram.sent.some((sent) => sent.text === `noted: ${WORDS}`), 'the answer to the voice message', 30_000);

    const sha = createHash('sha256').update(voice).digest('hex');
    expect(transcriptionRequests(s.llm).map((request) => request.body)).toEqual([{ model: 'whisper-1', response_format: 'json', file: { name: `${sha}.ogg`, mime_type: 'audio/ogg', bytes: voice } }]);
    const asked = lastUserText(completionRequests(s.llm).at(-1)!);
    expect(asked).toBe(`${WORDS}\n[voice message: ${join(s.home, 'agents', 'admin', 'files', `${sha}.ogg`)} (audio/ogg, 1 KB). Its words, transcribed, are the text above]`);
    const [message] = s.events(telegramThread(s.home, PEER)).filter((event) => event.type === 'message' && event.source !== 'self');
    expect(parseMessageContent(message!.content)).toMatchObject({
      text: WORDS,
      attachments: [{ type: 'voice', path: `files/${sha}.ogg`, bytes: voice.length, mime_type: 'audio/ogg', transcribed: true }],
    });

    s.telegram.queueUpdate(textUpdate({ from: PEER, with: { voice: { file_id: s.telegram.addFile(Buffer.from('OggS garbled')), file_unique_id: 'v2', duration: 1 } } }));
    await until(() => s.telegram.sent.length === 2, 'the notice', 30_000);
    expect(s.telegram.sent[1]!.text).toBe('I could not make out that voice message: please write it as text.');
    expect(completionRequests(s.llm)).toHaveLength(1); // the model was not asked about it
    expect(transcriptionRequests(s.llm)).toHaveLength(2); // a refused file is not sent again
    const records = s.events(telegramThread(s.home, PEER)).filter((event) => event.subtype === 'error');
    expect(records.map((event) => JSON.parse(event.content))).toMatchObject([{ stage: 'transcription', kind: 'invalid_request', status: 400 }]);
  });

  it('sends a file the agent attached with its answer: a document on Telegram, a download in the web chat for that person only', { timeout: 60_000 }, async () => {
    const s = await up();
    s.telegram.queueUpdate(textUpdate({ from: PEER, text: 'send me the report' }));
    await until(() => s.telegram.sent.length === 2, 'the answer and its file', 30_000);
    await untilAnswered(s); // the answer sent may still be its draft
    const [answer, file] = s.telegram.sent;
    expect(answer!.text).toBe('Here is the report.');
    expect(file!.file).toEqual({ kind: 'document', name: 'report.txt', bytes: Buffer.from('quarterly numbers\n') });

    // The web chat, as its page talks to it: the answer names the file, which that peer alone can fetch.
    const { ws, received, base, token, credential } = await openWebchatPage(s);
    try {
      ws.send(JSON.stringify({ type: 'message', id: 'ask-1', text: 'send me the report' }));
      const reply = await until(() => received.find((m) => m.type === 'message' && m.message.role === 'agent')?.message, 'the answer', 30_000);
      expect(reply.text).toBe('Here is the report.');
      expect(reply.files).toEqual([{ name: 'report.txt', bytes: 18, ref: expect.stringMatching(/^agents\/admin\/files\/[0-9a-f]{64}\.txt$/) }]);
      const fetchAs = (who: string) => fetch(`${base}/file?ref=${encodeURIComponent(reply.files[0].ref)}`, { headers: { Authorization: `Bearer ${token}`, 'x-xgw-peer': who } });
      const own = await fetchAs(credential);
      expect(own.status).toBe(200);
      expect(await own.text()).toBe('quarterly numbers\n');
      expect((await fetchAs(webchatCredential(s.home, 'webchat:main', randomBytes(16).toString('hex')))).status).toBe(404); // another browser's chat has no such file
      expect((await fetchAs(credential.split('.')[0]!)).status).toBe(404); // the id without the server's signature is no one's
    } finally {
      ws.close();
    }
  });
});
