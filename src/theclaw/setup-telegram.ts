import { existsSync } from 'node:fs';
import { agentDir, initAgent } from '../agent/index.js';
import { configDocumentText, parseConfigDocument, readConfigText, writeFileAtomically } from '../core/config.js';
import { ClawError } from '../core/errors.js';
import { secretsEnvPath } from '../core/layout.js';
import { storeSecret } from '../core/secrets-file.js';
import { sleep } from '../core/retry.js';
import { addChannel, addRoute, loadXgwConfig } from '../xgw/index.js';

/**
 * `theclaw setup`'s Telegram step: the BotFather token checked with getMe and kept in
 * secrets.env; then the first private message the bot gets ("/start") names its owner, who
 * becomes the one peer the channel admits (`access: allowlist`) and an owner in admin's
 * `policy.owners`; then the route of the channel to admin. The token is in the request's path
 * only, never in an error (the URL would carry it), a log or the config.
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

export interface TelegramSetupResult {
  bot: string;
  channel: string;
  /** `telegram:main:<id>`, or null when the channel was configured already (only the token changed). */
  owner: string | null;
  route: { channel: string; agent: string } | null;
  secrets_file: string;
}

export async function setupTelegram(home: string, token: string, options: TelegramSetupOptions = {}): Promise<TelegramSetupResult> {
  const api = new BotApi(options.apiRoot ?? DEFAULT_API_ROOT, token);
  const me = (await api.call('getMe', {}, options.signal)) as { username: string };
  const configured = loadXgwConfig(home).channels.some((channel) => channel.id === TELEGRAM_CHANNEL);
  if (configured) {
    // The channel and its owner are there: a new token replaces the old one, nothing else changes.
    storeSecret(home, TOKEN_ENV, token);
    return { bot: me.username, channel: TELEGRAM_CHANNEL, owner: null, route: null, secrets_file: secretsEnvPath(home) };
  }
  options.onWaiting?.(me.username);
  const ownerId = await firstSender(api, (options.waitSeconds ?? 300) * 1000, options.signal);
  storeSecret(home, TOKEN_ENV, token);
  const owner = `${TELEGRAM_CHANNEL}:${ownerId}`;
  addOwner(home, 'admin', owner);
  // Written, not applied: a running xgw lacks the token until it is started again.
  await addChannel(home, TELEGRAM_CHANNEL, { access: 'allowlist', allow: [ownerId], ...(options.apiRoot ? { apiRoot: options.apiRoot } : {}) }, { noReload: true });
  const routed = loadXgwConfig(home).routes.some((route) => route.channel === TELEGRAM_CHANNEL);
  if (!routed) await addRoute(home, { channel: TELEGRAM_CHANNEL, peer: '*', agent: 'admin' }, { noReload: true });
  await api
    .call('sendMessage', { chat_id: Number(ownerId), text: 'TheClaw: you are this bot’s owner now. Once TheClaw is (re)started, what you write here goes to admin.' }, options.signal)
    .catch(() => {}); // a courtesy: the set-up is done without it
  return { bot: me.username, channel: TELEGRAM_CHANNEL, owner, route: routed ? null : { channel: TELEGRAM_CHANNEL, agent: 'admin' }, secrets_file: secretsEnvPath(home) };
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

/** Adds `owner` to the agent's `policy.owners` (creating the agent if `theclaw up` has not yet). */
function addOwner(home: string, agent: string, owner: string): void {
  const dir = agentDir(home, agent);
  if (!existsSync(dir.config)) initAgent(home, agent);
  const document = parseConfigDocument(dir.config, readConfigText(dir.config));
  const owners = ((document.getIn(['policy', 'owners']) as { toJSON(): unknown } | undefined)?.toJSON() as string[] | undefined) ?? [];
  if (owners.includes(owner)) return;
  document.setIn(['policy', 'owners'], [...owners, owner]);
  writeFileAtomically(dir.config, configDocumentText(document));
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
