import { isIPv4 } from 'node:net';
import * as z from 'zod/mini';
import type { AttachmentKind, NoticeKind } from '../core/message.js';

/**
 * xgw is the gateway between chat channels and agents. Channels normalise what a person writes
 * into an `InboundMessage` and hand it to the gateway (`ChannelContext.receive`); the gateway
 * checks access, routes it, and pushes it into the agent's inbox. Replies come back through
 * `xgw send` (the daemon's socket) and leave through the channel's `send`.
 */

const ACCESS = ['pairing', 'allowlist', 'open'] as const;

/** 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIPv4(host) && host.startsWith('127.'));
}
export type AccessPolicy = (typeof ACCESS)[number];

/** A channel id's two parts: `telegram:main` is type `telegram`, instance `main`. */
export function splitChannelId(id: string): { type: string; instance: string } {
  const at = id.indexOf(':');
  return { type: id.slice(0, at), instance: id.slice(at + 1) };
}

const channelBase = {
  /** `<type>:<instance>`, e.g. `telegram:main`; the instance becomes the address's instance segment. */
  id: z.string().check(z.regex(/^[a-z]+:[a-z0-9][a-z0-9_-]{0,31}$/, 'must be <type>:<instance>, e.g. telegram:main')),
  /** Who may talk to agents: `pairing` (default; unknown peers get a one-time code), `allowlist` or `open`. */
  access: z._default(z.enum(ACCESS), 'pairing'),
  /** Peer ids admitted without pairing. */
  allow: z._default(z.array(z.string().check(z.minLength(1))), []),
  /** Messages one peer may send in a window; more are refused, with one notice. */
  rate_limit: z._default(
    z.strictObject({
      messages: z._default(z.int().check(z.positive()), 60),
      per_seconds: z._default(z.number().check(z.positive()), 60),
    }),
    { messages: 60, per_seconds: 60 },
  ),
  /** Files people send (photos, documents): stored in the agent's `files/`, up to these sizes. */
  media: z._default(
    z.strictObject({
      /** Largest file taken (Telegram lets bots download up to 20 MB). */
      max_bytes: z._default(z.int().check(z.positive()), 20 * 1024 * 1024),
      /** What one peer may send in a day, in bytes. */
      peer_daily_bytes: z._default(z.int().check(z.positive()), 100 * 1024 * 1024),
    }),
    { max_bytes: 20 * 1024 * 1024, peer_daily_bytes: 100 * 1024 * 1024 },
  ),
};

export const WebchatChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('webchat'),
  port: z._default(z.int().check(z.minimum(0), z.maximum(65535)), 18790),
  /** A loopback address: the page has no TLS and is for this machine only. */
  host: z._default(
    z.string().check(z.refine(isLoopbackHost, 'must be a loopback address (127.0.0.1, another 127.x.x.x, ::1 or localhost): the web chat has no TLS and serves this machine only')),
    '127.0.0.1',
  ),
  /** Messages kept per peer for a page that reconnects. */
  history_limit: z._default(z.int().check(z.positive(), z.maximum(10_000)), 200),
  /** Show the answer as the model writes it (a draft the answer replaces). */
  stream: z._default(z.boolean(), true),
  /**
   * Show the commands a turn runs ("running: ls -la") under the typing dots until the answer
   * comes. Default: on where access is `open` (the owner's own web chat), off otherwise.
   */
  show_tool_progress: z.optional(z.boolean()),
});

/** Whether a channel shows the commands a turn runs (only the web chat can). */
export function showsToolProgress(config: ChannelConfig): boolean {
  return config.type === 'webchat' && (config.show_tool_progress ?? config.access === 'open');
}

/** Environment variable that holds the bot token (the token never goes into the file). */
const tokenEnv = (fallback: string) => z._default(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/)), fallback);
/** A group's pending context by default: its last 20 unaddressed messages of the last two hours. */
const DEFAULT_GROUP_CONTEXT = { messages: 20, minutes: 120 };

/**
 * In groups (Discord: server channels; Slack: channels), answer only when mentioned or replied to. What is said
 * there without addressing the bot is kept as the group's pending context (group-context.ts):
 * at most `context.messages` of the last `context.minutes`, handed to the agent with the next
 * message that addresses it; `messages: 0` keeps none.
 */
const GroupsSchema = z._default(
  z.strictObject({
    require_mention: z._default(z.boolean(), true),
    context: z._default(
      z.strictObject({
        messages: z._default(z.int().check(z.minimum(0), z.maximum(50)), DEFAULT_GROUP_CONTEXT.messages),
        minutes: z._default(z.number().check(z.positive(), z.lte(7 * 24 * 60)), DEFAULT_GROUP_CONTEXT.minutes),
      }),
      DEFAULT_GROUP_CONTEXT,
    ),
  }),
  { require_mention: true, context: DEFAULT_GROUP_CONTEXT },
);
export type GroupsConfig = z.output<typeof GroupsSchema>;

export const TelegramChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('telegram'),
  token_env: tokenEnv('TELEGRAM_BOT_TOKEN'),
  /** Bot API root; tests point it at a fake server on loopback. */
  api_root: z._default(z.url(), 'https://api.telegram.org'),
  groups: GroupsSchema,
  /**
   * Show the answer as the model writes it: one message, edited in place at most every
   * `stream_interval_seconds`, which the answer then becomes. false: the answer only.
   */
  stream: z._default(z.boolean(), true),
  stream_interval_seconds: z._default(z.number().check(z.gte(1), z.lte(60)), 1.5),
});

export const DiscordChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('discord'),
  token_env: tokenEnv('DISCORD_BOT_TOKEN'),
  /** REST API root (without `/v10`); the gateway's address comes from it. Tests point it at a fake on loopback. */
  api_root: z._default(z.url(), 'https://discord.com/api'),
  groups: GroupsSchema,
});

export const SlackChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('slack'),
  /** The bot token (`xoxb-…`): the Web API's calls. */
  token_env: tokenEnv('SLACK_BOT_TOKEN'),
  /** The app-level token (`xapp-…`, scope `connections:write`): Socket Mode's connection. */
  app_token_env: tokenEnv('SLACK_APP_TOKEN'),
  /** Web API root; Socket Mode's address comes from it (apps.connections.open). Tests point it at a fake on loopback. */
  api_root: z._default(z.url(), 'https://slack.com/api'),
  groups: GroupsSchema,
  /**
   * Show the answer as the model writes it: one message in the thread, edited in place
   * (chat.update) at most every `stream_interval_seconds`, which the answer then becomes.
   */
  stream: z._default(z.boolean(), true),
  stream_interval_seconds: z._default(z.number().check(z.gte(1), z.lte(60)), 2),
});

export const TerminalChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('terminal'),
  history_limit: z._default(z.int().check(z.positive(), z.maximum(10_000)), 200),
});

/** How a mail connection is secured: TLS from the start (IMAPS 993, SMTPS 465), STARTTLS (143, 587), or none (loopback only). */
const MAIL_TLS = ['implicit', 'starttls', 'none'] as const;

/** A mail server of the email channel; `tls: none` only on loopback, since the password would cross the network in clear. */
const mailServer = z
  .strictObject({
    host: z.string().check(z.minLength(1)),
    /** Default: by `tls` — IMAP 993 / 143, SMTP 465 / 587. */
    port: z.optional(z.int().check(z.minimum(1), z.maximum(65535))),
    tls: z._default(z.enum(MAIL_TLS), 'implicit'),
  })
  .check(
    z.refine((server) => server.tls !== 'none' || isLoopbackHost(server.host), {
      message: 'tls: none is only for a server on loopback (127.0.0.1, ::1 or localhost): use implicit or starttls',
      path: ['tls'],
    }),
  );

/**
 * E-mail (channels/email.ts): IMAP in, from one folder, SMTP out; the account's password in
 * `$<password_env>`. A mail thread is one conversation, its sender's address the peer.
 */
export const EmailChannelSchema = z.strictObject({
  ...channelBase,
  type: z.literal('email'),
  /** The channel's own address: what people write to, and the From of its answers. */
  address: z.email(),
  /** The From's display name. Default: none. */
  name: z.optional(z.string().check(z.minLength(1), z.maxLength(100))),
  imap: mailServer,
  smtp: mailServer,
  /** The login of both servers. Default: `address`. */
  user: z.optional(z.string().check(z.minLength(1))),
  /** Environment variable that holds the account's password (never in the file). */
  password_env: z._default(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/)), 'EMAIL_PASSWORD'),
  /** The IMAP folder the channel reads: one per channel (a server-side filter can file mail into it). */
  folder: z._default(z.string().check(z.minLength(1)), 'INBOX'),
  /** How often the folder is looked at besides IMAP IDLE's news: the fallback for servers without IDLE, in seconds. */
  poll_interval_seconds: z._default(z.number().check(z.gte(0.1), z.lte(3600)), 60),
});

/** An inbox event holds less than this anyway (thread's MAX_CONTENT_BYTES). */
const MAX_API_BODY_BYTES = 1024 * 1024;

/** The API for other programs (channels/api.ts): its clients hold bearer tokens, so access is open by default. */
export const ApiChannelSchema = z.strictObject({
  ...channelBase,
  access: z._default(z.enum(ACCESS), 'open'),
  type: z.literal('api'),
  port: z._default(z.int().check(z.minimum(0), z.maximum(65535)), 18791),
  /** Loopback by default; another address serves the network, without TLS (put a proxy in front). */
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  /** Stream answers (`stream: true`) as the model writes them; false: one chunk with the answer. */
  stream: z._default(z.boolean(), true),
  /** The largest request body taken (413 above). */
  max_body_bytes: z._default(z.int().check(z.positive(), z.maximum(MAX_API_BODY_BYTES)), 256 * 1024),
  /** How long a request waits for the agent's answer (504 after). */
  answer_timeout_seconds: z._default(z.number().check(z.positive(), z.lte(3600)), 300),
  /** Webhooks: `POST /hooks/<name>` with the secret in `$<secret_env>` puts the body into `agent`'s inbox. */
  hooks: z._default(
    z.array(
      z.strictObject({
        name: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'must be lower-case letters, digits, _ and -')),
        agent: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be an agent id')),
        secret_env: z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/)),
      }),
    ),
    [],
  ),
});

export const ChannelConfigSchema = z.discriminatedUnion('type', [
  WebchatChannelSchema,
  TelegramChannelSchema,
  DiscordChannelSchema,
  TerminalChannelSchema,
  ApiChannelSchema,
  SlackChannelSchema,
  EmailChannelSchema,
]);

export const RouteSchema = z.strictObject({
  /** A channel id or `*`. */
  channel: z._default(z.string().check(z.minLength(1)), '*'),
  /** A peer id or `*`. An exact peer wins over `*`, then an exact channel over `*`, then order. */
  peer: z._default(z.string().check(z.minLength(1)), '*'),
  agent: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be an agent id (lower-case letters, digits, _ and -)')),
});

export const XgwConfigSchema = z.strictObject({
  channels: z._default(z.array(ChannelConfigSchema), []),
  routes: z._default(z.array(RouteSchema), []),
  /**
   * Where hosts share a PostgreSQL store: how long a gateway's claim on a channel lasts unless its
   * heartbeat (every third of it) renews it; another gateway takes the channel over once it
   * lapses. Default: 30. Unused on SQLite (one host owns every channel).
   */
  channel_claim_seconds: z.optional(z.number().check(z.positive(), z.lte(3600))),
});

export type WebchatChannelConfig = z.output<typeof WebchatChannelSchema>;
export type TelegramChannelConfig = z.output<typeof TelegramChannelSchema>;
export type DiscordChannelConfig = z.output<typeof DiscordChannelSchema>;
export type SlackChannelConfig = z.output<typeof SlackChannelSchema>;
export type TerminalChannelConfig = z.output<typeof TerminalChannelSchema>;
export type ApiChannelConfig = z.output<typeof ApiChannelSchema>;
export type EmailChannelConfig = z.output<typeof EmailChannelSchema>;
export type ChannelConfig = z.output<typeof ChannelConfigSchema>;
export type Route = z.output<typeof RouteSchema>;
export type XgwConfig = z.output<typeof XgwConfigSchema>;

/** What a channel hands the gateway for each message a person sent. */
export interface InboundMessage {
  /** The channel's config id, e.g. `telegram:main`. */
  channelId: string;
  /** `dm` or `group` (or another platform kind). */
  conversationType: string;
  /** Chat id; for a DM usually the peer id. */
  conversationId: string;
  peerId: string;
  /** Display name, for logs only. */
  peerName?: string;
  /** The platform's message id: the idempotency key of the push, and what a reply quotes. */
  messageId: string;
  text: string;
  /**
   * Outside a direct chat: the message addressed the bot (a mention, a reply to it,
   * `/cmd@botname`). Chat commands in a group count only then.
   */
  addressed?: boolean;
  /** Files that came with it (a photo, a document), not yet downloaded; `text` is then their caption. */
  files?: InboundFile[];
  /** What came that the channel cannot take ("a voice message", "a sticker"): the peer is told so. */
  unsupported?: string;
}

/** A file of an inbound message as the platform offers it, for the channel's `download`. */
export interface InboundFile {
  kind: AttachmentKind;
  /** The platform's handle to download it by (Telegram: the file_id). */
  ref: string;
  mime_type?: string;
  name?: string;
  /** As the platform says, before the download. */
  bytes?: number;
}

/** What the gateway did with an inbound message; the channel tells the peer where it should. */
export type InboundOutcome =
  /**
   * In the agent's inbox. `agentStopped`: the agent is stopped, so the message waits until `agent
   * start`; `notify` on the first message meant for the agent (a direct chat, a mention) in its
   * conversation that found it stopped.
   */
  | { kind: 'accepted'; agent: string; eventId: number; duplicate: boolean; agentStopped: boolean; notify: boolean }
  /** Unknown peer under `pairing`: it gets this one-time code to show the owner. */
  | { kind: 'pairing'; code: string; expiresAt: string }
  /** Unknown peer, and no code can be given (allowlist, or 3 codes pending already). */
  | { kind: 'denied'; reason: string }
  | { kind: 'no_route' }
  /** The route names an agent that does not exist. */
  | { kind: 'missing_agent'; agent: string }
  /** The message cannot be stored as it is: nothing reached the agent. */
  | { kind: 'refused'; reason: 'too_long' | 'file_too_large' | 'over_quota'; limit_bytes: number }
  /** It held something the channel cannot take (`what`): nothing reached the agent. */
  | { kind: 'unsupported'; what: string }
  /** Its file could not be fetched from the platform: nothing reached the agent. */
  | { kind: 'file_failed' }
  /** A group message that did not address the bot: kept as the group's pending context (group-context.ts), never answered. */
  | { kind: 'kept' }
  /** The peer sent more than the channel's rate_limit; `notify` on the first refusal of a run. */
  | { kind: 'rate_limited'; limit: number; per_seconds: number; retry_after_seconds: number; notify: boolean };

/** A conversation of a channel, as a reply addresses it. */
export type ConversationTarget = Pick<OutboundMessage, 'peerId' | 'conversationType' | 'conversationId'>;

/** A reply to deliver, as `xgw send` asks for it. */
export interface OutboundMessage {
  peerId: string;
  conversationType: string;
  conversationId: string;
  /** Platform message id to quote. */
  replyTo?: string;
  text: string;
  /** A notice of the runtime instead of an answer: web chat and terminal mark it as one. */
  notice?: NoticeKind;
  /** Files the agent sends with it (after the text, each its own message where the platform needs). */
  files?: OutboundFile[];
  /** The agent that sends it (none: the gateway, or `xgw send`): a terminal keeps its mailbox per agent. */
  agent?: string;
}

/** A file of an answer: in the agent's `files/` (core/agent-files.ts). */
export interface OutboundFile {
  kind: AttachmentKind;
  /** Absolute, on this machine. */
  path: string;
  name: string;
  mime_type?: string;
  bytes?: number;
}

export interface ChannelStatus {
  id: string;
  type: ChannelConfig['type'];
  /** `standby`: another host's gateway owns the channel (detail names it); this one takes it over if that one goes. */
  state: 'starting' | 'running' | 'stopped' | 'error' | 'standby';
  detail?: string;
  /** In state `error`: why the last start failed, and how to fix it, apart (detail says both and more). */
  problem?: { message: string; fix?: string };
  /** For webchat: the page's URL with its token. */
  url?: string;
}

/** How the gateway asks a channel to send. */
export interface ChannelSendOptions {
  signal?: AbortSignal;
  /**
   * Platform ids of the parts an earlier attempt of this delivery sent: the text splits the same
   * way again, and those parts are not sent twice. Default: none.
   */
  sent?: readonly string[];
  /** The platform id of this answer's draft (see ChannelAdapter.draft): its first part replaces it. */
  draft?: string;
  /** Called after each part was sent with the ids of all parts sent so far, before the next part. */
  onPart?(messageIds: readonly string[]): void;
}
