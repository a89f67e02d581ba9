import { Client, Events, GatewayDispatchEvents, GatewayIntentBits, type GatewayDispatchPayload } from 'discord.js';
import { ClawError } from '../core/errors.js';
import { connectChatApp, OWNER_GREETING, type ChatAppSetupResult } from './setup-chat-app.js';

/**
 * `theclaw setup`'s Discord step: the bot token checked with `GET /users/@me`, then the owner and
 * the route as for every chat app (setup-chat-app.ts), the owner taken from the first direct
 * message the bot gets. Discord has no polling for messages: the wait is a gateway connection
 * (discord.js, as xgw's channel), asking for the intents xgw's channel asks for, so that a bot
 * whose Message Content intent is off is found now rather than when xgw starts. The token goes in
 * a header only, never in an error, a log or the config.
 */
export const DISCORD_CHANNEL = 'discord:main';
const TOKEN_ENV = 'DISCORD_BOT_TOKEN';
const DEFAULT_API_ROOT = 'https://discord.com/api';
/** The permissions the invite asks for: View Channels, Send Messages, Attach Files, Read Message History. */
const INVITE_PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 15) | (1 << 16);
/** The gateway's close code for intents the bot may not ask for (Message Content not enabled). */
const DISALLOWED_INTENTS = 4014;

export interface DiscordSetupOptions {
  /** The REST API's root (without `/v10`); tests point it at a fake. Default: https://discord.com/api. */
  apiRoot?: string;
  /** How long to wait for the owner's first direct message. Default: 300 (5 minutes). */
  waitSeconds?: number;
  /**
   * Told once the token is good, before the wait: the bot's name, and the URL that invites it to
   * a server (a person can write to a bot only when they share one).
   */
  onWaiting?: (username: string, inviteUrl: string) => void;
  signal?: AbortSignal;
}

export async function setupDiscord(home: string, token: string, options: DiscordSetupOptions = {}): Promise<ChatAppSetupResult> {
  const apiRoot = (options.apiRoot ?? DEFAULT_API_ROOT).replace(/\/+$/, '');
  const me = (await callDiscord(apiRoot, token, 'GET', '/users/@me', undefined, options.signal)) as { id: string; username: string };
  let dm: DirectMessage | undefined;
  const result = await connectChatApp(home, { channel: DISCORD_CHANNEL, tokenEnv: TOKEN_ENV, token, bot: me.username, apiRoot: options.apiRoot }, async () => {
    options.onWaiting?.(me.username, `https://discord.com/oauth2/authorize?client_id=${me.id}&scope=bot&permissions=${INVITE_PERMISSIONS}`);
    dm = await firstDirectMessage(apiRoot, token, (options.waitSeconds ?? 300) * 1000, options.signal);
    return dm.userId;
  });
  if (dm) {
    await callDiscord(apiRoot, token, 'POST', `/channels/${dm.channelId}/messages`, { content: OWNER_GREETING }, options.signal).catch(() => {}); // a courtesy: the set-up is done without it
  }
  return result;
}

interface DirectMessage {
  userId: string;
  /** The DM channel, where the greeting goes. */
  channelId: string;
}

/** The author of the first direct message a person (not a bot) sends the bot while it waits. */
async function firstDirectMessage(apiRoot: string, token: string, waitMs: number, signal?: AbortSignal): Promise<DirectMessage> {
  // The intents of xgw's Discord channel (channels/discord.ts).
  const client = new Client({
    intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
    rest: { api: apiRoot, retries: 0 },
  });
  const stop = new AbortController();
  try {
    return await new Promise<DirectMessage>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new ClawError('timeout', `no direct message reached the bot within ${Math.round(waitMs / 1000)} s`, {
              suggestion:
                'run theclaw setup --discord-token-stdin again and, while it waits, send the bot a direct message in Discord (invite it to a server you are in first, with the URL setup prints)',
            }),
          ),
        waitMs,
      );
      stop.signal.addEventListener('abort', () => clearTimeout(timer));
      signal?.addEventListener('abort', () => reject(new ClawError('aborted', 'setup stopped while waiting for a direct message')), { signal: stop.signal });
      client.on(Events.Raw, (packet: GatewayDispatchPayload) => {
        if (packet.t !== GatewayDispatchEvents.MessageCreate) return;
        const message = packet.d;
        if (message.guild_id === undefined && !message.author.bot && message.webhook_id === undefined) resolve({ userId: message.author.id, channelId: message.channel_id });
      });
      client.on(Events.ShardDisconnect, ({ code }) => reject(gatewayRefusal(code)));
      client
        .login(token)
        .catch((error: unknown) => reject(new ClawError('upstream', 'cannot connect to the Discord gateway', { suggestion: 'check the network (and --discord-api-root)', cause: error })));
    });
  } finally {
    stop.abort();
    await client.destroy();
  }
}

function gatewayRefusal(code: number): ClawError {
  if (code === DISALLOWED_INTENTS) {
    return new ClawError('invalid', `Discord refused the gateway intents (close ${code}): the bot may not read message content`, {
      suggestion: 'enable "Message Content Intent" under Bot > Privileged Gateway Intents in the Discord developer portal, then run theclaw setup again',
    });
  }
  return new ClawError('upstream', `the Discord gateway closed the connection (close ${code})`, { suggestion: 'try again in a moment' });
}

/** One REST call; its errors never quote the token (it is in a header, but so is the request). */
async function callDiscord(apiRoot: string, token: string, method: 'GET' | 'POST', route: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(`${apiRoot}/v10${route}`, {
      method,
      headers: { authorization: `Bot ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.any([AbortSignal.timeout(30_000), ...(signal ? [signal] : [])]),
    });
  } catch (error) {
    throw new ClawError('upstream', `cannot reach Discord (${apiRoot}) for ${method} ${route}`, { suggestion: 'check the network (and --discord-api-root)', cause: error });
  }
  const answer = (await response.json().catch(() => null)) as { message?: string } | null;
  if (response.ok) return answer;
  if (response.status === 401) {
    throw new ClawError('invalid', `Discord refused the token (${method} ${route}: HTTP 401)`, {
      status: 401,
      suggestion: 'copy the token from the Discord developer portal again (your application > Bot > Reset Token), and paste it whole',
    });
  }
  throw new ClawError('upstream', `Discord answered ${method} ${route} with HTTP ${response.status}${answer?.message ? `: ${answer.message}` : ''}`, {
    status: response.status,
    suggestion: 'try again in a moment',
  });
}
