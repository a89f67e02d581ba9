// Over 400 lines: the Web API methods and the Socket Mode WebSocket TheClaw uses, faked in one server whose state (messages, uploads, envelopes, scripted errors) they share.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { LooseJson } from './fake-llm.js';

/**
 * A fake Slack on loopback, Web API and Socket Mode on one port, enough for @slack/bolt in Socket
 * Mode to connect, receive messages and answer, so tests run the real client without a network:
 *
 *   const slack = await startFakeSlack();
 *   new App({ token: slack.botToken, appToken: slack.appToken, socketMode: true, clientOptions: { slackApiUrl: slack.apiRoot } });
 *   slack.queueMessage({ from: 'U111', text: 'hi' });
 *   await waitFor(() => slack.posted.length > 0, 'a reply');
 *   await slack.close();
 *
 * The Web API (`POST /api/<method>`, form-encoded or JSON, the token as `Authorization: Bearer`):
 * auth.test, apps.connections.open (the app-level token; answers a one-time `ws://…/link/?ticket=`
 * URL here), chat.postMessage, chat.update, chat.delete, conversations.open,
 * assistant.threads.setStatus, files.getUploadURLExternal and files.completeUploadExternal, with
 * the upload itself at the URL the first gives. A wrong token gets `{ ok: false, error:
 * 'invalid_auth' }` (HTTP 200, as from Slack); a file is downloaded from its `url_private_download`
 * with the bot token, and without it gets Slack's sign-in page. Socket Mode: a connection gets a
 * `hello`, then each queued message as an `events_api` envelope, which the client must
 * acknowledge (`{ envelope_id }`); one not acknowledged when its connection ends is sent again on
 * the next, with `retry_attempt` counted up, as Slack retries.
 */

export interface FakeSlackOptions {
  /** Port on 127.0.0.1, e.g. that of a fake that was closed. Default: a free one. */
  port?: number;
  /** Default: `theclaw-test`. */
  botName?: string;
}

/** One Web API call with a valid token: the method and its arguments (form values as sent: objects arrive as JSON text). */
export interface FakeSlackCall {
  method: string;
  args: LooseJson;
  at: number;
}

/** A message the bot posted (chat.postMessage), with what happened to it since. */
export interface FakeSlackPosted {
  channel: string;
  ts: string;
  /** The thread it was posted in, if any. */
  thread_ts?: string;
  /** The text as posted; `edits` hold later ones. */
  text: string;
  at: number;
  /** Each chat.update of it, oldest first. */
  edits: { text: string; at: number }[];
  /** Deleted by chat.delete. */
  deleted?: boolean;
}

/** A file the bot uploaded (files.uploadV2: getUploadURLExternal, the upload, completeUploadExternal). */
export interface FakeSlackUpload {
  id: string;
  name: string;
  title?: string;
  bytes: Buffer;
  channel_id?: string;
  thread_ts?: string;
  at: number;
}

/** An error the next call of a method gets: Slack's `error` string, or a 429 with Retry-After. */
export type FakeSlackError = { error: string } | { status: 429; retryAfterSeconds: number };

export interface SlackMessageOptions {
  /** The author's user id (`U…`). */
  from: string;
  /** Slack markup, e.g. `hi <@${slack.bot.userId}>`. Default: ''. */
  text?: string;
  /** A channel id: the message is in that channel (`channel_type` `channel`). Default: the author's DM with the bot. */
  channel?: string;
  /** The thread it replies in (its first message's `ts`); `parentUserId` is that message's author. */
  threadTs?: string;
  parentUserId?: string;
  /** Files the person shares with it; `voice`: a voice clip. */
  files?: { name: string; bytes: Buffer; mimetype?: string; voice?: boolean }[];
  /** Another app's bot wrote it. */
  bot?: boolean;
  /** e.g. `message_changed`: a notice of Slack's rather than a message. */
  subtype?: string;
}

export interface FakeSlack {
  /** Give this to the WebClient as `slackApiUrl`. */
  apiRoot: string;
  /** The bot token (`xoxb-…`) and the app-level token (`xapp-…`). */
  botToken: string;
  appToken: string;
  bot: { userId: string; botId: string; name: string; teamId: string };
  /** Every message the bot posted, in order. */
  posted: FakeSlackPosted[];
  /** Every file the bot uploaded and shared, in order. */
  uploads: FakeSlackUpload[];
  /** Every Web API call with a valid token, in order. */
  calls: FakeSlackCall[];
  /** Socket Mode: connection URLs handed out, connections that got `hello`, envelopes acknowledged. */
  sockets: { opened: number; connected: number; acked: string[] };
  /** The bot token's scopes that tests take away: without `files:read` a download gets the sign-in page, as from Slack. */
  scopes: { filesRead: boolean };
  /** The DM channel (`D…`) between the bot and a user. */
  dmChannel(userId: string): string;
  /** Queues a message event for Socket Mode and returns the event, with its `ts`. */
  queueMessage(options: SlackMessageOptions): LooseJson;
  /** Whether the envelope of the message with this `ts` was acknowledged. */
  acked(ts: string): boolean;
  /** The next call of `method` fails with this error; with `after`, that many succeed first. */
  failNext(method: string, error: FakeSlackError, options?: { after?: number }): void;
  /** Sends Socket Mode's `disconnect` (Slack's refresh of a connection): the client is to open a new one. */
  refresh(reason?: 'refresh_requested' | 'warning' | 'link_disabled'): void;
  /** Cuts the Socket Mode connection without a word, as a network failure does. */
  drop(): void;
  /** Closes the connections, stops the server. */
  close(): Promise<void>;
}

interface Envelope {
  id: string;
  event: LooseJson;
  retries: number;
  /** The connection it went out on, until acknowledged. */
  sentOn?: WebSocket;
}

export async function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const botToken = `xoxb-1000000001-${randomBytes(12).toString('hex')}`;
  const appToken = `xapp-1-A0APP-${randomBytes(16).toString('hex')}`;
  const bot = { userId: 'U0BOT00001', botId: 'B0BOT00001', name: options.botName ?? 'theclaw-test', teamId: 'T0TEAM0001' };
  const posted: FakeSlackPosted[] = [];
  const uploads: FakeSlackUpload[] = [];
  const calls: FakeSlackCall[] = [];
  const sockets = { opened: 0, connected: 0, acked: [] as string[] };
  const scopes = { filesRead: true };
  const failures = new Map<string, Array<{ error: FakeSlackError; passes: number }>>();
  const dmChannels = new Map<string, string>();
  const tickets = new Set<string>();
  /** Files people shared (by download path) and files the bot is uploading (by upload id). */
  const shared = new Map<string, Buffer>();
  const pending = new Map<string, { name: string; length: number; bytes?: Buffer }>();
  const envelopes: Envelope[] = [];
  const connections = new Set<Socket>();
  let live: WebSocket | undefined;
  let lastSeconds = 0;
  let lastSequence = 0;
  let lastId = 0;
  let origin = '';
  let closing: Promise<void> | undefined;

  const nextId = (prefix: string) => `${prefix}${String(++lastId).padStart(9, '0')}`;
  /** Slack's message ids: epoch seconds and a sequence, rising. */
  const nextTs = () => {
    const seconds = Math.max(Math.floor(Date.now() / 1000), lastSeconds);
    lastSequence = seconds === lastSeconds ? lastSequence + 1 : 1;
    lastSeconds = seconds;
    return `${seconds}.${String(lastSequence).padStart(6, '0')}`;
  };
  const dmChannel = (userId: string) => {
    const id = dmChannels.get(userId) ?? nextId('D');
    dmChannels.set(userId, id);
    return id;
  };

  function deliver(): void {
    if (!live || live.readyState !== WebSocket.OPEN) return;
    for (const envelope of envelopes) {
      if (envelope.sentOn === live) continue;
      if (envelope.sentOn) envelope.retries += 1; // its connection ended before the acknowledgement
      envelope.sentOn = live;
      live.send(
        JSON.stringify({
          envelope_id: envelope.id,
          payload: {
            token: 'verification-token-unused-in-socket-mode',
            team_id: bot.teamId,
            context_team_id: bot.teamId,
            api_app_id: 'A0APP',
            event: envelope.event,
            type: 'event_callback',
            event_id: `Ev${envelope.id.replace(/-/g, '').slice(0, 10).toUpperCase()}`,
            event_time: Math.floor(Date.now() / 1000),
            authorizations: [{ enterprise_id: null, team_id: bot.teamId, user_id: bot.userId, is_bot: true, is_enterprise_install: false }],
            is_ext_shared_channel: false,
            event_context: `4-${randomBytes(8).toString('hex')}`,
          },
          type: 'events_api',
          accepts_response_payload: false,
          retry_attempt: envelope.retries,
          retry_reason: envelope.retries > 0 ? 'timeout' : '',
        }),
      );
    }
  }

  const socketServer = new WebSocketServer({ noServer: true });
  socketServer.on('connection', (socket) => {
    live = socket;
    sockets.connected += 1;
    socket.on('message', (data) => {
      let frame: LooseJson;
      try {
        frame = JSON.parse(String(data));
      } catch {
        return;
      }
      const index = envelopes.findIndex((envelope) => envelope.id === frame?.envelope_id);
      if (index < 0) return;
      sockets.acked.push(envelopes[index]!.event.ts);
      envelopes.splice(index, 1);
    });
    socket.on('close', () => {
      if (live === socket) live = undefined;
    });
    socket.send(
      JSON.stringify({
        type: 'hello',
        num_connections: 1,
        debug_info: { host: 'applink-fake', build_number: 1, approximate_connection_time: 18060 },
        connection_info: { app_id: 'A0APP' },
      }),
    );
    deliver();
  });

  function failure(method: string): FakeSlackError | undefined {
    const queued = failures.get(method);
    if (queued?.[0] && queued[0].passes-- <= 0) return queued.shift()!.error;
    return undefined;
  }

  function message(ts: string, text: string, threadTs?: string): LooseJson {
    return { type: 'message', user: bot.userId, bot_id: bot.botId, app_id: 'A0APP', team: bot.teamId, text, ts, ...(threadTs && { thread_ts: threadTs }) };
  }

  /** A conversation the bot may post in: a channel or DM id, or a user id (Slack opens the DM). */
  function conversation(channel: unknown): string | undefined {
    if (typeof channel !== 'string' || channel === '') return undefined;
    return channel.startsWith('U') ? dmChannel(channel) : channel;
  }

  function findPosted(channel: unknown, ts: unknown): FakeSlackPosted | undefined {
    return posted.find((entry) => entry.channel === channel && entry.ts === ts && !entry.deleted);
  }

  /** One Web API method: its answer (`ok: false` with Slack's error where it fails). */
  function answer(method: string, args: LooseJson): LooseJson {
    switch (method) {
      case 'auth.test':
        return { ok: true, url: 'https://theclaw-test.slack.com/', team: 'TheClaw Test', user: bot.name, team_id: bot.teamId, user_id: bot.userId, bot_id: bot.botId, is_enterprise_install: false };
      case 'apps.connections.open': {
        const ticket = randomUUID();
        tickets.add(ticket);
        sockets.opened += 1;
        return { ok: true, url: `${origin.replace(/^http/, 'ws')}/link/?ticket=${ticket}&app_id=A0APP` };
      }
      case 'chat.postMessage': {
        const channel = conversation(args.channel);
        const text = typeof args.text === 'string' ? args.text : '';
        if (!channel) return { ok: false, error: 'channel_not_found' };
        if (text.trim() === '') return { ok: false, error: 'no_text' };
        if (text.length > 40_000) return { ok: false, error: 'msg_too_long' };
        const ts = nextTs();
        const threadTs = typeof args.thread_ts === 'string' && args.thread_ts !== '' ? args.thread_ts : undefined;
        posted.push({ channel, ts, ...(threadTs && { thread_ts: threadTs }), text, at: Date.now(), edits: [] });
        return { ok: true, channel, ts, message: message(ts, text, threadTs) };
      }
      case 'chat.update': {
        const entry = findPosted(args.channel, args.ts);
        if (!entry) return { ok: false, error: 'message_not_found' };
        const text = typeof args.text === 'string' ? args.text : '';
        if (text.trim() === '') return { ok: false, error: 'no_text' };
        entry.edits.push({ text, at: Date.now() });
        return { ok: true, channel: entry.channel, ts: entry.ts, text, message: message(entry.ts, text, entry.thread_ts) };
      }
      case 'chat.delete': {
        const entry = findPosted(args.channel, args.ts);
        if (!entry) return { ok: false, error: 'message_not_found' };
        entry.deleted = true;
        return { ok: true, channel: entry.channel, ts: entry.ts };
      }
      case 'conversations.open': {
        const users = typeof args.users === 'string' ? args.users.split(',') : [];
        if (users.length !== 1 || !users[0]!.startsWith('U')) return { ok: false, error: 'user_not_found' };
        return { ok: true, channel: { id: dmChannel(users[0]!) } };
      }
      case 'assistant.threads.setStatus':
        if (typeof args.channel_id !== 'string' || typeof args.thread_ts !== 'string' || typeof args.status !== 'string') return { ok: false, error: 'invalid_arguments' };
        return { ok: true };
      case 'files.getUploadURLExternal': {
        const length = Number(args.length);
        if (typeof args.filename !== 'string' || !Number.isInteger(length) || length <= 0) return { ok: false, error: 'invalid_arguments' };
        const id = nextId('F');
        pending.set(id, { name: args.filename, length });
        return { ok: true, upload_url: `${origin}/upload/v1/${id}`, file_id: id };
      }
      case 'files.completeUploadExternal': {
        const files = (typeof args.files === 'string' ? JSON.parse(args.files) : args.files) as { id: string; title?: string }[];
        const done: LooseJson[] = [];
        for (const file of files) {
          const upload = pending.get(file.id);
          if (!upload?.bytes) return { ok: false, error: 'file_not_found' };
          pending.delete(file.id);
          const channel = conversation(args.channel_id);
          uploads.push({
            id: file.id,
            name: upload.name,
            ...(file.title && { title: file.title }),
            bytes: upload.bytes,
            ...(channel && { channel_id: channel }),
            ...(typeof args.thread_ts === 'string' && { thread_ts: args.thread_ts }),
            at: Date.now(),
          });
          done.push({ id: file.id, name: upload.name, title: file.title ?? upload.name, size: upload.bytes.length, user: bot.userId });
        }
        return { ok: true, files: done };
      }
      default:
        return { ok: false, error: 'unknown_method' };
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const raw = await readRaw(req);
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const download = req.method === 'GET' ? shared.get(url.pathname) : undefined;
    if (download) {
      // Slack answers a download it does not authorize with its sign-in page, not an error.
      if (bearer !== botToken || !scopes.filesRead) return void send(res, 200, 'text/html; charset=utf-8', '<!DOCTYPE html><html><body>Sign in to Slack</body></html>');
      return void send(res, 200, 'application/octet-stream', download);
    }
    const uploadTo = /^\/upload\/v1\/(F\d+)$/.exec(url.pathname);
    if (uploadTo && req.method === 'POST') {
      const upload = pending.get(uploadTo[1]!);
      if (!upload) return void send(res, 404, 'text/plain', 'Not Found');
      upload.bytes = await uploadedBytes(req, raw);
      return void send(res, 200, 'text/plain', `OK - ${upload.bytes.length}`);
    }
    const method = /^\/api\/([a-zA-Z.]+)$/.exec(url.pathname)?.[1];
    if (!method || req.method !== 'POST') return void send(res, 404, 'text/plain', 'Not Found');
    const args = parseArgs(req.headers['content-type'] ?? '', raw);
    const token = bearer ?? (typeof args.token === 'string' ? args.token : undefined);
    if (!token) return json(res, 200, { ok: false, error: 'not_authed' });
    const wanted = method === 'apps.connections.open' ? appToken : botToken;
    if (token !== wanted) return json(res, 200, { ok: false, error: token.startsWith('xapp-') || token.startsWith('xoxb-') ? 'invalid_auth' : 'not_allowed_token_type' });
    calls.push({ method, args, at: Date.now() });
    const failed = failure(method);
    if (failed && 'status' in failed) return json(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(failed.retryAfterSeconds) });
    if (failed) return json(res, 200, { ok: false, ...failed });
    json(res, 200, answer(method, args));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => send(res, 500, 'text/plain', `Internal Server Error: ${String(error)}`));
  });
  server.on('connection', (socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // A connection URL serves one connection, as Slack's do.
    if (url.pathname !== '/link/' || !tickets.delete(url.searchParams.get('ticket') ?? '')) {
      socket.destroy();
      return;
    }
    socketServer.handleUpgrade(req, socket, head, (ws) => socketServer.emit('connection', ws, req));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    apiRoot: `${origin}/api/`,
    botToken,
    appToken,
    bot,
    posted,
    uploads,
    calls,
    sockets,
    scopes,
    dmChannel,
    queueMessage(input) {
      const ts = nextTs();
      const inDm = input.channel === undefined;
      const channel = input.channel ?? dmChannel(input.from);
      const files = (input.files ?? []).map((file) => {
        const id = nextId('F');
        const path = `/files-pri/${bot.teamId}-${id}/download/${encodeURIComponent(file.name)}`;
        shared.set(path, file.bytes);
        return {
          id,
          created: Math.floor(Date.now() / 1000),
          name: file.name,
          title: file.name,
          mimetype: file.mimetype ?? 'application/octet-stream',
          filetype: file.name.split('.').pop() ?? 'binary',
          user: input.from,
          size: file.bytes.length,
          mode: 'hosted',
          is_external: false,
          ...(file.voice && { subtype: 'slack_audio', media_display_type: 'audio' }),
          url_private: `${origin}${path.replace('/download/', '/')}`,
          url_private_download: `${origin}${path}`,
        };
      });
      const event: LooseJson = {
        ...(input.bot ? { bot_id: 'B0OTHER001', subtype: 'bot_message' } : { client_msg_id: randomUUID(), user: input.from }),
        type: 'message',
        ...(input.subtype && { subtype: input.subtype }),
        ...(files.length > 0 && !input.subtype && !input.bot && { subtype: 'file_share', files, upload: false }),
        text: input.text ?? '',
        team: bot.teamId,
        ts,
        ...(input.threadTs && { thread_ts: input.threadTs, ...(input.parentUserId && { parent_user_id: input.parentUserId }) }),
        channel,
        event_ts: ts,
        channel_type: inDm ? 'im' : 'channel',
      };
      envelopes.push({ id: randomUUID(), event, retries: 0 });
      queueMicrotask(deliver);
      return event;
    },
    acked: (ts) => sockets.acked.includes(ts),
    failNext(method, error, failOptions = {}) {
      failures.set(method, [...(failures.get(method) ?? []), { error, passes: failOptions.after ?? 0 }]);
    },
    refresh(reason = 'refresh_requested') {
      live?.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'applink-fake' } }));
    },
    drop() {
      live?.terminate();
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const client of socketServer.clients) client.terminate();
        socketServer.close();
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of connections) socket.destroy();
      });
      return closing;
    },
  };
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A Web API call's arguments: form-encoded (as @slack/web-api sends them) or JSON. */
function parseArgs(contentType: string, raw: Buffer): LooseJson {
  const text = raw.toString('utf8');
  if (contentType.includes('application/json')) return text === '' ? {} : JSON.parse(text);
  return Object.fromEntries(new URLSearchParams(text));
}

/** An upload's bytes: the body as it is, or the file of a multipart form. */
async function uploadedBytes(req: IncomingMessage, raw: Buffer): Promise<Buffer> {
  const type = req.headers['content-type'] ?? '';
  if (!type.includes('multipart/form-data')) return raw;
  const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
  for (const [, value] of form) if (typeof value !== 'string') return Buffer.from(await value.arrayBuffer());
  return Buffer.alloc(0);
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(body), headers);
}

function send(res: ServerResponse, status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
