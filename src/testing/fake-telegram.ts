// Over 400 lines: the Bot API methods TheClaw calls, faked in one server whose state (updates, sent messages, files, scripted errors) they all share.
import { randomBytes, randomInt } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LooseJson } from './fake-llm.js';

/**
 * A fake Telegram Bot API on loopback, enough for grammY's long polling and for replies, so tests
 * run the real client (and everything built on it) without a network:
 *
 *   const telegram = await startFakeTelegram();
 *   new Bot(telegram.token, { client: { apiRoot: telegram.apiRoot } });
 *   telegram.queueUpdate(textUpdate({ from: 111, text: 'hi' }));
 *   await waitFor(() => telegram.sent.length > 0, 'a reply');
 *   await telegram.close();
 *
 * `/bot<token>/<method>`: getMe, getUpdates (long polling that honours `offset`, `limit` and
 * `timeout`), sendMessage, editMessageText and deleteMessage (of the bot's messages) and
 * deleteWebhook are implemented; any other method answers `true`.
 * A wrong token gets 401 as from Telegram.
 */

export interface FakeTelegramOptions {
  /** Default: a random token shaped like a real one (`<digits>:<letters>`). */
  token?: string;
  /** Default: `theclaw_test_bot`. */
  botUsername?: string;
  /** Default: 7000001. */
  botId?: number;
  /** Port on 127.0.0.1, e.g. that of a fake that was closed, to bring "Telegram" back. Default: a free one. */
  port?: number;
}

/** One API call as received: the method and its parameters (JSON body merged over the query). */
export interface FakeTelegramCall {
  method: string;
  params: LooseJson;
  /** When it came in (`Date.now()`). */
  at: number;
}

export interface FakeSentMessage {
  chat_id: number | string;
  text: string;
  reply_parameters?: { message_id?: number; allow_sending_without_reply?: boolean; [key: string]: unknown };
  /** The Message the fake answered with. */
  message: LooseJson;
  /** When the fake carried it out (`Date.now()`). */
  at: number;
  /** Each editMessageText of it, oldest first (`text` is then the newest). */
  edits?: { text: string; at: number }[];
  /** Deleted by deleteMessage. */
  deleted?: boolean;
  /** A file the bot sent (sendPhoto, sendDocument). */
  file?: { kind: 'photo' | 'document'; name: string; bytes: Buffer };
}

/** An error the next call of a method gets, as Telegram sends it. */
export interface FakeTelegramError {
  error_code: number;
  description: string;
  parameters?: { retry_after?: number; migrate_to_chat_id?: number };
}

/** An update to queue: `update_id` is assigned when missing, and a message gets `message_id` and `date`. */
export type FakeUpdate = { update_id?: number; message?: LooseJson } & Record<string, unknown>;

export interface FakeTelegram {
  /** Give this to grammY as `client.apiRoot`. */
  apiRoot: string;
  token: string;
  /** What getMe answers. */
  bot: { id: number; is_bot: true; first_name: string; username: string };
  /** Every sendMessage that succeeded, in order. */
  sent: FakeSentMessage[];
  /** Every API call with a valid token, in order. */
  calls: FakeTelegramCall[];
  /** Queues an update for getUpdates and returns it as it will be delivered. */
  queueUpdate(update: FakeUpdate): LooseJson;
  /**
   * Queues an update that is delivered once more after the client confirmed it (asked for a
   * later offset), as Telegram can after an offset glitch: the same `update_id` arrives twice.
   */
  deliverTwice(update: FakeUpdate): LooseJson;
  /** True once the client asked for updates again after its last delivery of this one (it handled it). */
  consumed(updateId: number): boolean;
  /**
   * The next call of `method` fails with this error (queued; one error per call). With `after`,
   * that many calls of the method succeed first: `{ after: 1 }` fails the second.
   */
  failNext(method: string, error: FakeTelegramError, options?: { after?: number }): void;
  /** Keeps a file a person "uploaded", for getFile and its download; returns its file_id. */
  addFile(bytes: Buffer): string;
  /** Answers pending polls with no updates, then stops the server and closes every connection. */
  close(): Promise<void>;
}

interface Poll {
  offset: number | undefined;
  limit: number;
  /** Updates to deliver, or null when a newer poll ends this one (409, as Telegram does). */
  answer(updates: LooseJson[] | null): void;
}

export interface TextUpdateOptions {
  /** The sender's user id. */
  from: number;
  /** Left out for a message without text (a photo, a sticker: see `with`). */
  text?: string;
  /** More of the message: `photo`, `document`, `caption`, `voice`… (files from `addFile`). */
  with?: LooseJson;
  /** Default: the sender's id (a private chat). */
  chat?: number;
  /** Default: `private` when `chat` is the sender, else `supergroup`. */
  chatType?: 'private' | 'group' | 'supergroup';
  username?: string;
  /** Default: `User<id>`. */
  firstName?: string;
  entities?: LooseJson[];
  /** The message this one replies to (e.g. one from `sent`). */
  replyTo?: LooseJson;
}

/** A text message update as a person's client would produce it. */
export function textUpdate(options: TextUpdateOptions): FakeUpdate {
  const chatId = options.chat ?? options.from;
  const chatType = options.chatType ?? (chatId === options.from ? 'private' : 'supergroup');
  const from = { id: options.from, is_bot: false, first_name: options.firstName ?? `User${options.from}`, ...(options.username && { username: options.username }) };
  const chat = chatType === 'private' ? { id: chatId, type: chatType, first_name: from.first_name } : { id: chatId, type: chatType, title: `Chat ${chatId}` };
  return {
    message: {
      chat,
      from,
      ...(options.text !== undefined && { text: options.text }),
      ...(options.entities && { entities: options.entities }),
      ...(options.replyTo && { reply_to_message: options.replyTo }),
      ...options.with,
    },
  };
}

export async function startFakeTelegram(options: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const token = options.token ?? `${randomInt(100_000_000, 999_999_999)}:AA${randomBytes(24).toString('base64url')}`;
  const bot = { id: options.botId ?? 7_000_001, is_bot: true as const, first_name: 'TheClaw Test', username: options.botUsername ?? 'theclaw_test_bot' };
  const sent: FakeSentMessage[] = [];
  const calls: FakeTelegramCall[] = [];
  const failures = new Map<string, Array<{ error: FakeTelegramError; passes: number }>>();
  const sockets = new Set<Socket>();
  const polls = new Set<Poll>();

  /** Unconfirmed updates, by ascending update_id. */
  let pending: LooseJson[] = [];
  /** Confirmed updates that are to be delivered once more. */
  let replays: LooseJson[] = [];
  const replayIds = new Set<number>();
  let lastUpdateId = 100;
  let lastMessageId = 1000;
  /** Highest offset a client asked for, and how many getUpdates calls came in. */
  let confirmedBelow = 0;
  let pollCount = 0;
  const deliveredAtPoll = new Map<number, number>();
  let closing: Promise<void> | undefined;

  function confirm(offset: number): void {
    confirmedBelow = Math.max(confirmedBelow, offset);
    const [done, open] = partition(pending, (update) => update.update_id < offset);
    pending = open;
    for (const update of done) {
      if (replayIds.delete(update.update_id)) replays.push(update);
    }
  }

  function take(poll: Pick<Poll, 'offset' | 'limit'>): LooseJson[] {
    const fresh = pending.filter((update) => poll.offset === undefined || update.update_id >= poll.offset);
    const batch = [...replays, ...fresh].slice(0, poll.limit);
    replays = replays.filter((update) => !batch.includes(update));
    for (const update of batch) deliveredAtPoll.set(update.update_id, pollCount);
    return batch;
  }

  function wake(): void {
    for (const poll of polls) {
      const batch = take(poll);
      if (batch.length > 0) poll.answer(batch);
    }
  }

  function enqueue(input: FakeUpdate): LooseJson {
    const update_id = input.update_id ?? lastUpdateId + 1;
    lastUpdateId = Math.max(lastUpdateId, update_id);
    const update: LooseJson = { ...input, update_id };
    if (input.message) update.message = { message_id: ++lastMessageId, date: nowSeconds(), ...input.message };
    pending.push(update);
    pending.sort((a, b) => a.update_id - b.update_id);
    queueMicrotask(wake);
    return update;
  }

  function getUpdates(params: LooseJson, res: ServerResponse): void {
    pollCount += 1;
    const offset = params.offset === undefined ? undefined : Number(params.offset);
    if (offset !== undefined) confirm(offset);
    const limit = clamp(Number(params.limit ?? 100), 1, 100);
    const timeoutMs = clamp(Number(params.timeout ?? 0), 0, 50) * 1000;
    // Telegram ends an older poll when a newer one arrives.
    for (const poll of polls) poll.answer(null);
    const batch = take({ offset, limit });
    if (batch.length > 0 || timeoutMs === 0 || closing) {
      ok(res, batch);
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const poll: Poll = {
      offset,
      limit,
      answer(updates) {
        if (!polls.delete(poll)) return;
        clearTimeout(timer);
        if (updates === null) fail(res, { error_code: 409, description: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running' });
        else ok(res, updates);
      },
    };
    polls.add(poll);
    timer = setTimeout(() => poll.answer([]), timeoutMs);
    res.on('close', () => {
      // The client gave up (grammY aborts its poll on stop): forget it, keep its updates.
      if (polls.delete(poll)) clearTimeout(timer);
    });
  }

  /** The message the bot sent that `params` (chat_id, message_id) names, or a 400 as from Telegram. */
  function botMessage(params: LooseJson, res: ServerResponse, description: string): FakeSentMessage | undefined {
    const found = sent.find((entry) => String(entry.chat_id) === String(params.chat_id) && entry.message.message_id === Number(params.message_id) && !entry.deleted);
    if (!found) fail(res, { error_code: 400, description: `Bad Request: ${description}` });
    return found;
  }

  function editMessageText(params: LooseJson, res: ServerResponse): void {
    const entry = botMessage(params, res, 'message to edit not found');
    if (!entry) return;
    const text = typeof params.text === 'string' ? params.text : '';
    if (text.trim() === '' || text.length > 4096) {
      fail(res, { error_code: 400, description: `Bad Request: message ${text.trim() === '' ? 'text is empty' : 'is too long'}` });
      return;
    }
    if (text === entry.text) {
      fail(res, {
        error_code: 400,
        description: 'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
      });
      return;
    }
    entry.text = text;
    entry.message.text = text;
    entry.edits = [...(entry.edits ?? []), { text, at: Date.now() }];
    ok(res, entry.message);
  }

  function deleteMessage(params: LooseJson, res: ServerResponse): void {
    const entry = botMessage(params, res, 'message to delete not found');
    if (!entry) return;
    entry.deleted = true;
    ok(res, true);
  }

  /** A file the bot sends: kept in `sent` with its `file` (name and bytes) and an empty text. */
  function sendFile(kind: 'photo' | 'document', params: LooseJson, res: ServerResponse): void {
    const file = params[kind];
    if (!file?.bytes) return void fail(res, { error_code: 400, description: `Bad Request: there is no ${kind} in the request` });
    const message: LooseJson = { message_id: ++lastMessageId, date: nowSeconds(), chat: { id: Number(params.chat_id) }, from: bot, [kind]: { file_id: `sent${lastMessageId}` } };
    sent.push({ chat_id: Number(params.chat_id), text: '', message, at: Date.now(), file: { kind, name: file.file_name, bytes: file.bytes } });
    ok(res, message);
  }

  function sendMessage(params: LooseJson, res: ServerResponse): void {
    if (params.chat_id === undefined || params.chat_id === '') {
      fail(res, { error_code: 400, description: 'Bad Request: chat_id is empty' });
      return;
    }
    const text = typeof params.text === 'string' ? params.text : '';
    if (text.trim() === '') {
      fail(res, { error_code: 400, description: 'Bad Request: message text is empty' });
      return;
    }
    if (text.length > 4096) {
      fail(res, { error_code: 400, description: 'Bad Request: message is too long' });
      return;
    }
    const chatId = typeof params.chat_id === 'string' && /^-?\d+$/.test(params.chat_id) ? Number(params.chat_id) : params.chat_id;
    const message: LooseJson = {
      message_id: ++lastMessageId,
      date: nowSeconds(),
      chat: typeof chatId === 'number' && chatId > 0 ? { id: chatId, type: 'private', first_name: `User${chatId}` } : { id: chatId, type: 'supergroup', title: `Chat ${chatId}` },
      from: bot,
      text,
    };
    const replyTo = params.reply_parameters?.message_id;
    if (replyTo !== undefined) message.reply_to_message = { message_id: replyTo, date: message.date, chat: message.chat };
    sent.push({ chat_id: params.chat_id, text, ...(params.reply_parameters && { reply_parameters: params.reply_parameters }), message, at: Date.now() });
    ok(res, message);
  }

  /** Files by file_id, and their download paths. */
  const files = new Map<string, { bytes: Buffer; path: string }>();

  function getFile(params: LooseJson, res: ServerResponse): void {
    const file = files.get(String(params.file_id));
    if (!file) return void fail(res, { error_code: 400, description: 'Bad Request: invalid file_id' });
    ok(res, { file_id: params.file_id, file_unique_id: `u${params.file_id}`, file_size: file.bytes.length, file_path: file.path });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
    if (download) {
      const file = [...files.values()].find((f) => f.path === download[2]);
      if (decodeURIComponent(download[1]!) !== token || !file) return fail(res, { error_code: 404, description: 'Not Found' });
      calls.push({ method: 'download', params: { path: file.path }, at: Date.now() });
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.bytes.length });
      return void res.end(file.bytes);
    }
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    const body = await readBody(req);
    if (!match) return fail(res, { error_code: 404, description: 'Not Found' });
    if (decodeURIComponent(match[1]!) !== token) return fail(res, { error_code: 401, description: 'Unauthorized' });
    const method = match[2]!;
    const params: LooseJson = { ...Object.fromEntries(url.searchParams), ...(await parseBody(body, req.headers['content-type'])) };
    calls.push({ method, params, at: Date.now() });
    const queued = failures.get(method);
    if (queued?.[0] && queued[0].passes-- <= 0) return fail(res, queued.shift()!.error);
    switch (method) {
      case 'getMe':
        return ok(res, { ...bot, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false, can_connect_to_business: false, has_main_web_app: false });
      case 'getUpdates':
        return getUpdates(params, res);
      case 'sendMessage':
        return sendMessage(params, res);
      case 'sendDocument':
      case 'sendPhoto':
        return sendFile(method === 'sendPhoto' ? 'photo' : 'document', params, res);
      case 'getFile':
        return getFile(params, res);
      case 'editMessageText':
        return editMessageText(params, res);
      case 'deleteMessage':
        return deleteMessage(params, res);
      default:
        return ok(res, true); // deleteWebhook and everything else
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) fail(res, { error_code: 500, description: `Internal Server Error: ${String(error)}` });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    apiRoot: `http://127.0.0.1:${port}`,
    token,
    bot,
    sent,
    calls,
    queueUpdate: enqueue,
    addFile(bytes) {
      const id = `file${files.size + 1}_${randomBytes(6).toString('hex')}`;
      files.set(id, { bytes, path: `documents/${id}.bin` });
      return id;
    },
    deliverTwice(input) {
      const update = enqueue(input);
      replayIds.add(update.update_id);
      return update;
    },
    consumed(updateId) {
      const at = deliveredAtPoll.get(updateId);
      return at !== undefined && confirmedBelow > updateId && pollCount > at && !replayIds.has(updateId) && !replays.some((u) => u.update_id === updateId);
    },
    failNext(method, error, options = {}) {
      failures.set(method, [...(failures.get(method) ?? []), { error, passes: options.after ?? 0 }]);
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const poll of polls) poll.answer([]);
        server.close(() => resolve());
        // One turn of the loop for those answers to leave, then every connection goes.
        setImmediate(() => {
          server.closeAllConnections();
          for (const socket of sockets) socket.destroy();
        });
      });
      return closing;
    },
  };
}

function ok(res: ServerResponse, result: unknown): void {
  sendJson(res, 200, { ok: true, result });
}

function fail(res: ServerResponse, error: FakeTelegramError): void {
  sendJson(res, error.error_code, { ok: false, ...error });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * The parameters of a call: JSON, a form, or (for a file upload) multipart, where a file part
 * becomes `{ file_name, bytes }` (parsed by Node's own fetch machinery).
 */
async function parseBody(raw: Buffer, contentType: string | undefined): Promise<LooseJson> {
  if (raw.length === 0) return {};
  if (contentType?.includes('multipart/form-data')) {
    // grammY writes part headers tersely (`content-disposition:form-data;name="x";filename=y`),
    // which Node's parser refuses: spelled out here (latin1 keeps the file's bytes as they are).
    const quoted = Buffer.from(
      raw
        .toString('latin1')
        .replace(
          /^content-disposition:form-data;name=("[^"]*")(?:;filename=("?)([^"\r\n]*)\2)?/gim,
          (_all, name: string, _q, file: string | undefined) => `Content-Disposition: form-data; name=${name}${file === undefined ? '' : `; filename="${file}"`}`,
        )
        .replace(/^content-type:/gim, 'Content-Type: '),
      'latin1',
    );
    const form = await new Response(quoted, { headers: { 'content-type': contentType } }).formData();
    const params: LooseJson = {};
    for (const [key, value] of form) params[key] = typeof value === 'string' ? value : { file_name: value.name, bytes: Buffer.from(await value.arrayBuffer()) };
    // A file is named by `attach://<part>` in its parameter (the Bot API's way for uploads).
    for (const [key, value] of Object.entries(params)) if (typeof value === 'string' && value.startsWith('attach://')) params[key] = params[value.slice('attach://'.length)];
    return params;
  }
  const body = raw.toString('utf8');
  if (contentType?.includes('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(body));
  try {
    const value = JSON.parse(body) as unknown;
    return typeof value === 'object' && value !== null ? value : {};
  } catch {
    return {};
  }
}

function partition<T>(items: T[], test: (item: T) => boolean): [T[], T[]] {
  const yes: T[] = [];
  const no: T[] = [];
  for (const item of items) (test(item) ? yes : no).push(item);
  return [yes, no];
}

function clamp(value: number, min: number, max: number): number {
  return Number.isFinite(value) ? Math.min(max, Math.max(min, value)) : min;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
