import { ClawError } from '../core/errors.js';
import { sleep } from '../core/retry.js';
import { connectChatApp, OWNER_GREETING, type ChatAppSetupResult } from './setup-chat-app.js';

/**
 * `theclaw setup`'s Telegram step: the BotFather token checked with getMe, then the owner and
 * the route as for every chat app (setup-chat-app.ts), the owner taken from the first private
 * message the bot gets ("/start"). The token is in the request's path only, never in an error
 * (the URL would carry it), a log or the config.
 */
export const TELEGRAM_CHANNEL = 'telegram:main';
const TOKEN_ENV = 'TELEGRAM_BOT_TOKEN';
const DEFAULT_API_ROOT = 'https://api.telegram.org';
/** Each long poll for the owner's message; the whole wait is `waitSeconds`. */
const POLL_SECONDS = 25;

export interface TelegramSetupOptions {
  /** The Bot API's root; tests point it at a fake. Default: https://api.telegram.org. */
  apiRoot?: string;
  /** How long to wait for the owner's first message. Default: 300 (5 minutes). */
  waitSeconds?: number;
  /** Told the bot's name once the token is good, before the wait: "now send /start to @…". */
  onWaiting?: (username: string) => void;
  signal?: AbortSignal;
}

export async function setupTelegram(home: string, token: string, options: TelegramSetupOptions = {}): Promise<ChatAppSetupResult> {
  const api = new BotApi(options.apiRoot ?? DEFAULT_API_ROOT, token);
  const me = (await api.call('getMe', {}, options.signal)) as { username: string };
  let ownerId: string | undefined;
  const result = await connectChatApp(home, { channel: TELEGRAM_CHANNEL, tokenEnv: TOKEN_ENV, token, bot: me.username, apiRoot: options.apiRoot }, async () => {
    options.onWaiting?.(me.username);
    ownerId = await firstSender(api, (options.waitSeconds ?? 300) * 1000, options.signal);
    return ownerId;
  });
  if (ownerId) {
    await api.call('sendMessage', { chat_id: Number(ownerId), text: OWNER_GREETING }, options.signal).catch(() => {}); // a courtesy: the set-up is done without it
  }
  return result;
}

/** The sender of the first private message, which is then acknowledged (xgw will not see it again). */
async function firstSender(api: BotApi, waitMs: number, signal?: AbortSignal): Promise<string> {
  const deadline = Date.now() + waitMs;
  let offset: number | undefined;
  while (Date.now() < deadline) {
    const timeout = Math.max(0, Math.min(POLL_SECONDS, Math.floor((deadline - Date.now()) / 1000)));
    const updates = (await api.call('getUpdates', { timeout, allowed_updates: ['message'], ...(offset === undefined ? {} : { offset }) }, signal)) as {
      update_id: number;
      message?: { chat?: { type?: string }; from?: { id: number; is_bot?: boolean } };
    }[];
    for (const update of updates) {
      offset = update.update_id + 1;
      const from = update.message?.from;
      if (update.message?.chat?.type === 'private' && from && !from.is_bot) {
        await api.call('getUpdates', { offset, timeout: 0 }, signal);
        return String(from.id);
      }
    }
    if (updates.length === 0 && timeout === 0) await sleep(1000, signal);
  }
  throw new ClawError('timeout', `no message reached the bot within ${Math.round(waitMs / 1000)} s`, {
    suggestion: 'run theclaw setup --telegram-token-stdin again and send /start to the bot in Telegram while it waits',
  });
}

class BotApi {
  constructor(
    private readonly root: string,
    private readonly token: string,
  ) {}

  async call(method: string, params: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.root}/bot${this.token}/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(params),
        signal: AbortSignal.any([AbortSignal.timeout((POLL_SECONDS + 10) * 1000), ...(signal ? [signal] : [])]),
      });
    } catch (error) {
      // Not the error's message: it may quote the URL, which holds the token.
      throw new ClawError('upstream', `cannot reach Telegram (${this.root}) for ${method}`, { suggestion: 'check the network (and --telegram-api-root)', cause: error });
    }
    const body = (await response.json().catch(() => null)) as { ok?: boolean; result?: unknown; description?: string } | null;
    if (response.ok && body?.ok) return body.result;
    if (response.status === 401 || response.status === 404) {
      throw new ClawError('invalid', `Telegram refused the token (${method}: HTTP ${response.status})`, {
        status: response.status,
        suggestion: 'copy the token BotFather gave again (/mybots → API Token), and paste it whole',
      });
    }
    throw new ClawError('upstream', `Telegram answered ${method} with HTTP ${response.status}${body?.description ? `: ${body.description}` : ''}`, {
      status: response.status,
      suggestion: response.status === 409 ? 'another program polls this bot (a running xgw with it?): stop it, then try again' : 'try again in a moment',
    });
  }
}
