// Over 400 lines: the REST calls and the gateway WebSocket TheClaw uses, faked in one server whose state (sent messages, sessions, scripted errors) they share.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { LooseJson } from './fake-llm.js';

/**
 * A fake Discord on loopback, REST API and gateway on one port, enough for discord.js to log in,
 * receive messages and reply, so tests run the real client without a network:
 *
 *   const discord = await startFakeDiscord();
 *   new Client({ intents, rest: { api: discord.apiRoot } }).login(discord.token);
 *   discord.queueMessage({ from: '111', text: 'hi' });
 *   await waitFor(() => discord.sent.length > 0, 'a reply');
 *   await discord.close();
 *
 * REST (`/api/v10`): GET /gateway/bot (which points the client at the gateway here), GET
 * /users/@me, POST /users/@me/channels (opens a DM), POST /channels/:id/messages and POST
 * /channels/:id/typing; a wrong token gets 401 as from Discord. The gateway (`/gateway`, JSON,
 * no compression) says HELLO, answers heartbeats, takes IDENTIFY (READY follows) and RESUME
 * (RESUMED follows), and dispatches the queued messages as MESSAGE_CREATE to a ready session;
 * while none is (between a drop and the resume) they wait, as Discord replays missed events.
 */

export interface FakeDiscordOptions {
  /** Default: a random token shaped like a real one. */
  token?: string;
  /** Default: `theclaw-test`. */
  botUsername?: string;
  /** Default: 900000000000001. */
  botId?: string;
  /** Port on 127.0.0.1, e.g. that of a fake that was closed. Default: a free one. */
  port?: number;
  /** HELLO's heartbeat interval. Default: 41250 (Discord's). */
  heartbeatIntervalMs?: number;
  /** Close an IDENTIFY that asks for Message Content with 4014, as for a bot whose intent is not enabled. */
  refuseMessageContent?: boolean;
}

/** One REST call with a valid token: the method, the route after `/api/v10` and the JSON body. */
export interface FakeDiscordCall {
  method: string;
  route: string;
  body: LooseJson;
}

export interface FakeDiscordSent {
  channel_id: string;
  content: string;
  message_reference?: { message_id?: string; fail_if_not_exists?: boolean };
  allowed_mentions?: LooseJson;
  /** Files uploaded with it. */
  files?: { name: string; bytes: Buffer }[];
  /** The Message the fake answered with. */
  message: LooseJson;
  /** When the fake carried it out (`Date.now()`). */
  at: number;
}

/** An error the next call of an operation gets, as Discord sends it. */
export interface FakeDiscordError {
  status: number;
  /** Discord's JSON error code (0 for a general one). */
  code: number;
  message: string;
  /** For 429: Retry-After, in seconds. */
  retryAfterSeconds?: number;
}

/** The REST operations `failNext` can fail. */
export type FakeDiscordOperation = 'gatewayBot' | 'createMessage' | 'createDM';

export interface DiscordMessageOptions {
  /** The author's user id. */
  from: string;
  /** Default: ''. */
  text?: string;
  /** A server (guild) id: the message is in a server channel. Default: none (a direct message). */
  guild?: string;
  /** The server channel. Default: `<guild>0` in a server; a DM goes to the author's DM channel. */
  channel?: string;
  /** Default: `user<id>`. */
  username?: string;
  /** Users mentioned (ids; the bot's for a mention of it). Their `<@id>` is not added to the text. */
  mentions?: string[];
  /** The message this one replies to (e.g. one from `sent`). */
  replyTo?: LooseJson;
  /** Attachments: a file name (a small text file of that name), or a file with its bytes; `voice`: a voice message. */
  attachments?: (string | { filename: string; bytes: Buffer; contentType?: string; voice?: boolean })[];
  /** The author is a bot. */
  bot?: boolean;
}

export interface FakeDiscord {
  /** Give this to discord.js as `rest.api`. */
  apiRoot: string;
  token: string;
  /** The bot's user, as READY and GET /users/@me give it. */
  bot: { id: string; username: string; global_name: string | null; discriminator: string; avatar: null; bot: true };
  /** Every message the bot posted, in order. */
  sent: FakeDiscordSent[];
  /** The channel of every typing indicator the bot triggered, in order. */
  typing: string[];
  /** Every REST call with a valid token, in order. */
  calls: FakeDiscordCall[];
  /** How many gateway sessions began with IDENTIFY, and how many went on with RESUME. */
  sessions: { identified: number; resumed: number };
  /** The DM channel between the bot and a user (the same one POST /users/@me/channels opens). */
  dmChannel(userId: string): string;
  /** Queues a MESSAGE_CREATE for the gateway and returns its payload. */
  queueMessage(options: DiscordMessageOptions): LooseJson;
  /** True once the message went out on the gateway. */
  dispatched(messageId: string): boolean;
  /** The next call of `operation` fails with this error; with `after`, that many succeed first. */
  failNext(operation: FakeDiscordOperation, error: FakeDiscordError, options?: { after?: number }): void;
  /** Drops the gateway connection with a close code (default 4000: unknown error, which the client resumes after). */
  disconnect(code?: number): void;
  /** Closes the gateway connections, stops the server and closes every connection. */
  close(): Promise<void>;
}

// Gateway opcodes (discord-api-types' GatewayOpcodes), written out: the fake does not load discord.js.
const OP = { dispatch: 0, heartbeat: 1, identify: 2, resume: 6, invalidSession: 9, hello: 10, heartbeatAck: 11 } as const;
const MESSAGE_CONTENT_INTENT = 1 << 15;

interface Session {
  id: string;
  socket: WebSocket;
  ready: boolean;
}

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const token = options.token ?? `${Buffer.from('900000000000001').toString('base64url')}.${randomBytes(4).toString('base64url')}.${randomBytes(27).toString('base64url')}`;
  const bot = { id: options.botId ?? '900000000000001', username: options.botUsername ?? 'theclaw-test', global_name: null, discriminator: '0', avatar: null, bot: true as const };
  const sent: FakeDiscordSent[] = [];
  const typing: string[] = [];
  const calls: FakeDiscordCall[] = [];
  const sessions = { identified: 0, resumed: 0 };
  const failures = new Map<FakeDiscordOperation, Array<{ error: FakeDiscordError; passes: number }>>();
  const dmChannels = new Map<string, string>();
  const sockets = new Set<Socket>();
  /** Messages not yet dispatched, oldest first, and the ids of those that were. */
  let queue: LooseJson[] = [];
  const dispatchedIds = new Set<string>();
  let lastId = 1_000_000_000_000_000;
  let sequence = 0;
  let session: Session | undefined;
  /** Ids of sessions that ended, which a RESUME may continue. */
  const resumable = new Set<string>();
  let closing: Promise<void> | undefined;
  let gatewayUrl = '';

  const nextId = () => String(++lastId);

  function dmChannel(userId: string): string {
    let id = dmChannels.get(userId);
    if (!id) {
      id = nextId();
      dmChannels.set(userId, id);
    }
    return id;
  }

  function user(id: string, username?: string, isBot = false): LooseJson {
    return { id, username: username ?? `user${id}`, global_name: null, discriminator: '0', avatar: null, ...(isBot && { bot: true }) };
  }

  function dispatch(socket: WebSocket, t: string, d: LooseJson): void {
    socket.send(JSON.stringify({ op: OP.dispatch, t, s: ++sequence, d }));
  }

  function flush(): void {
    if (!session?.ready || session.socket.readyState !== WebSocket.OPEN) return;
    for (const message of queue) {
      dispatch(session.socket, 'MESSAGE_CREATE', message);
      dispatchedIds.add(message.id);
    }
    queue = [];
  }

  function onGatewayMessage(current: Session, raw: string) {
    const payload = JSON.parse(raw) as { op: number; d: LooseJson };
    switch (payload.op) {
      case OP.heartbeat:
        current.socket.send(JSON.stringify({ op: OP.heartbeatAck }));
        return;
      case OP.identify: {
        if (payload.d?.token !== token) return current.socket.close(4004, 'Authentication failed.');
        if (options.refuseMessageContent && (Number(payload.d.intents) & MESSAGE_CONTENT_INTENT) !== 0) return current.socket.close(4014, 'Disallowed intent(s).');
        sessions.identified += 1;
        current.ready = true;
        dispatch(current.socket, 'READY', {
          v: 10,
          user: { ...bot, verified: true, mfa_enabled: false, flags: 0 },
          guilds: [],
          session_id: current.id,
          resume_gateway_url: gatewayUrl,
          shard: [0, 1],
          application: { id: bot.id, flags: 0 },
        });
        return flush();
      }
      case OP.resume: {
        if (payload.d?.token !== token) return current.socket.close(4004, 'Authentication failed.');
        if (!resumable.delete(payload.d.session_id)) {
          current.socket.send(JSON.stringify({ op: OP.invalidSession, d: false }));
          return;
        }
        sessions.resumed += 1;
        current.id = payload.d.session_id;
        current.ready = true;
        dispatch(current.socket, 'RESUMED', {});
        return flush();
      }
      default:
        return; // presence updates and the like
    }
  }

  const gateway = new WebSocketServer({ noServer: true });
  gateway.on('connection', (socket) => {
    const current: Session = { id: randomBytes(16).toString('hex'), socket, ready: false };
    session = current;
    socket.on('message', (data) => onGatewayMessage(current, String(data)));
    socket.on('close', () => {
      if (current.ready) resumable.add(current.id);
      if (session === current) session = undefined;
    });
    socket.send(JSON.stringify({ op: OP.hello, d: { heartbeat_interval: options.heartbeatIntervalMs ?? 41_250 } }));
  });

  function failure(operation: FakeDiscordOperation): FakeDiscordError | undefined {
    const queued = failures.get(operation);
    if (queued?.[0] && queued[0].passes-- <= 0) return queued.shift()!.error;
    return undefined;
  }

  function createMessage(channelId: string, body: LooseJson, res: ServerResponse, uploaded: { name: string; bytes: Buffer }[] = []) {
    const content = typeof body.content === 'string' ? body.content : '';
    if (content.trim() === '' && uploaded.length === 0) return fail(res, { status: 400, code: 50006, message: 'Cannot send an empty message' });
    if (content.length > 2000) return fail(res, { status: 400, code: 50035, message: 'Invalid Form Body\ncontent[BASE_TYPE_MAX_LENGTH]: Must be 2000 or fewer in length.' });
    const replyTo = body.message_reference?.message_id;
    const message: LooseJson = {
      id: nextId(),
      channel_id: channelId,
      author: bot,
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: [],
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: replyTo === undefined ? 0 : 19,
      ...(replyTo !== undefined && { message_reference: { message_id: replyTo, channel_id: channelId } }),
    };
    sent.push({
      channel_id: channelId,
      content,
      ...(body.message_reference && { message_reference: body.message_reference }),
      ...(body.allowed_mentions && { allowed_mentions: body.allowed_mentions }),
      ...(uploaded.length > 0 && { files: uploaded }),
      message,
      at: Date.now(),
    });
    json(res, 200, message);
  }

  /** Attachment files by their path on this server (Discord's CDN serves them without the token). */
  const files = new Map<string, Buffer>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const file = req.method === 'GET' ? files.get(url.pathname) : undefined;
    if (file) {
      calls.push({ method: 'GET', route: url.pathname, body: {} });
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.length });
      return void res.end(file);
    }
    const { body, files: uploaded } = await readBody(req);
    const route = url.pathname.replace(/^\/api\/v10/, '');
    if (route === url.pathname) return fail(res, { status: 404, code: 0, message: '404: Not Found' });
    if (req.headers.authorization !== `Bot ${token}`) return fail(res, { status: 401, code: 0, message: '401: Unauthorized' });
    const method = req.method ?? 'GET';
    calls.push({ method, route, body });
    const operation: FakeDiscordOperation | undefined =
      method === 'GET' && route === '/gateway/bot'
        ? 'gatewayBot'
        : method === 'POST' && route === '/users/@me/channels'
          ? 'createDM'
          : method === 'POST' && /^\/channels\/\d+\/messages$/.test(route)
            ? 'createMessage'
            : undefined;
    const failed = operation && failure(operation);
    if (failed) return fail(res, failed);
    if (operation === 'gatewayBot') return json(res, 200, { url: gatewayUrl, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } });
    if (operation === 'createDM') return json(res, 200, { id: dmChannel(String(body.recipient_id)), type: 1, recipients: [user(String(body.recipient_id))], last_message_id: null });
    if (operation === 'createMessage') return createMessage(route.split('/')[2]!, body, res, uploaded);
    if (method === 'GET' && route === '/users/@me') return json(res, 200, bot);
    const typingIn = method === 'POST' ? /^\/channels\/(\d+)\/typing$/.exec(route) : null;
    if (typingIn) {
      typing.push(typingIn[1]!);
      res.writeHead(204).end();
      return;
    }
    fail(res, { status: 404, code: 0, message: '404: Not Found' });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) fail(res, { status: 500, code: 0, message: `500: Internal Server Error: ${String(error)}` });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // discord.js asks for v10 JSON without compression; anything else would not be understood.
    if (url.pathname !== '/gateway' || url.searchParams.get('v') !== '10' || url.searchParams.get('encoding') !== 'json' || url.searchParams.has('compress')) {
      socket.destroy();
      return;
    }
    gateway.handleUpgrade(req, socket, head, (ws) => gateway.emit('connection', ws, req));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  gatewayUrl = `ws://127.0.0.1:${port}/gateway`;

  return {
    apiRoot: `${origin}/api`,
    token,
    bot,
    sent,
    typing,
    calls,
    sessions,
    dmChannel,
    queueMessage(input) {
      const channelId = input.guild === undefined ? dmChannel(input.from) : (input.channel ?? `${input.guild}0`);
      const reply = input.replyTo;
      const message: LooseJson = {
        id: nextId(),
        channel_id: channelId,
        ...(input.guild !== undefined && { guild_id: input.guild, member: { roles: [], joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0 } }),
        author: user(input.from, input.username, input.bot),
        content: input.text ?? '',
        timestamp: new Date().toISOString(),
        edited_timestamp: null,
        tts: false,
        mention_everyone: false,
        mentions: (input.mentions ?? []).map((id) => (id === bot.id ? bot : user(id))),
        mention_roles: [],
        attachments: (input.attachments ?? []).map((attachment) => {
          const { filename, bytes, contentType, voice } =
            typeof attachment === 'string' ? { filename: attachment, bytes: Buffer.from(`the file ${attachment}\n`), contentType: undefined, voice: false } : attachment;
          const id = nextId();
          const path = `/attachments/${channelId}/${id}/${filename}`;
          files.set(path, bytes);
          return {
            id,
            filename,
            size: bytes.length,
            url: `${origin}${path}`,
            proxy_url: `${origin}${path}`,
            ...(contentType && { content_type: contentType }),
            ...(voice && { duration_secs: 2, waveform: 'AAAA' }),
          };
        }),
        ...(input.attachments?.some((a) => typeof a !== 'string' && a.voice) && { flags: 1 << 13 }),
        embeds: [],
        pinned: false,
        type: reply ? 19 : 0,
        ...(reply && { message_reference: { message_id: reply.id, channel_id: reply.channel_id }, referenced_message: reply }),
      };
      queue.push(message);
      queueMicrotask(flush);
      return message;
    },
    dispatched: (messageId) => dispatchedIds.has(messageId),
    failNext(operation, error, failOptions = {}) {
      failures.set(operation, [...(failures.get(operation) ?? []), { error, passes: failOptions.after ?? 0 }]);
    },
    disconnect(code = 4000) {
      session?.socket.close(code, 'Disconnected by the test.');
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const client of gateway.clients) client.terminate();
        gateway.close();
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

function fail(res: ServerResponse, error: FakeDiscordError): void {
  const headers: Record<string, string> = {};
  const body: LooseJson = { message: error.message, code: error.code };
  if (error.retryAfterSeconds !== undefined) {
    headers['retry-after'] = String(error.retryAfterSeconds);
    headers['x-ratelimit-reset-after'] = String(error.retryAfterSeconds);
    headers['x-ratelimit-remaining'] = '0';
    headers['x-ratelimit-limit'] = '5';
    body.retry_after = error.retryAfterSeconds;
    body.global = false;
  }
  json(res, error.status, body, headers);
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * A request's JSON body, also from a file upload: multipart with `payload_json` and the files
 * (`files[n]`), as discord.js sends one, parsed by Node's own fetch machinery.
 */
async function readBody(req: IncomingMessage): Promise<{ body: LooseJson; files: { name: string; bytes: Buffer }[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const type = req.headers['content-type'] ?? '';
  if (!type.includes('multipart/form-data')) return { body: raw.length === 0 ? {} : JSON.parse(raw.toString('utf8')), files: [] };
  const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
  const files: { name: string; bytes: Buffer }[] = [];
  for (const [, value] of form) if (typeof value !== 'string') files.push({ name: value.name, bytes: Buffer.from(await value.arrayBuffer()) });
  return { body: JSON.parse(String(form.get('payload_json') ?? '{}')), files };
}
