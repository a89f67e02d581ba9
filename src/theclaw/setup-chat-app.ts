import { existsSync } from 'node:fs';
import { agentDir, initAgent } from '../agent/index.js';
import { configDocumentText, parseConfigDocument, readConfigText, writeFileAtomically } from '../core/config.js';
import { secretsEnvPath } from '../core/layout.js';
import { storeSecret } from '../core/secrets-file.js';
import { addChannel, addRoute, loadXgwConfig } from '../xgw/index.js';

/**
 * What `theclaw setup` does for a chat app (Telegram, Discord) once the bot's token is good, the
 * same for each: the first private message to the bot names its owner, who becomes the one peer
 * the channel admits (`access: allowlist`) and an owner in admin's `policy.owners`; then the route
 * of the channel to admin. The token goes to secrets.env only. With the channel configured
 * already, only the token is replaced and nobody is waited for.
 */

/** What connecting a chat app did. */
export interface ChatAppSetupResult {
  /** The bot's username. */
  bot: string;
  channel: string;
  /** `<channel>:<user id>`, or null when the channel was configured already (only the token changed). */
  owner: string | null;
  route: { channel: string; agent: string } | null;
  secrets_file: string;
}

export interface ChatApp {
  /** The channel's id in xgw's config, e.g. `telegram:main`. */
  channel: string;
  /** The variable the channel's config reads the token from (its default `token_env`). */
  tokenEnv: string;
  token: string;
  /** The bot's username, as the app's API gave it for the token. */
  bot: string;
  /** Written to the channel's config when given (a proxy, or a fake in tests). */
  apiRoot?: string;
}

/** Said to the owner by the bot once the set-up is written. */
export const OWNER_GREETING = 'TheClaw: you are this bot’s owner now. Once TheClaw is (re)started, what you write here goes to admin.';

/**
 * Connects `app`: `waitForOwner` resolves with the user id of the first person who writes to the
 * bot privately (it is not called when the channel is configured already).
 */
export async function connectChatApp(home: string, app: ChatApp, waitForOwner: () => Promise<string>): Promise<ChatAppSetupResult> {
  const done = (owner: string | null, route: ChatAppSetupResult['route']): ChatAppSetupResult => ({ bot: app.bot, channel: app.channel, owner, route, secrets_file: secretsEnvPath(home) });
  if (loadXgwConfig(home).channels.some((channel) => channel.id === app.channel)) {
    // The channel and its owner are there: a new token replaces the old one, nothing else changes.
    storeSecret(home, app.tokenEnv, app.token);
    return done(null, null);
  }
  const ownerId = await waitForOwner();
  storeSecret(home, app.tokenEnv, app.token);
  const owner = `${app.channel}:${ownerId}`;
  await addOwner(home, 'admin', owner);
  // Written, not applied: a running xgw lacks the token until it is started again.
  await addChannel(home, app.channel, { access: 'allowlist', allow: [ownerId], ...(app.apiRoot ? { apiRoot: app.apiRoot } : {}) }, { noReload: true });
  const routed = loadXgwConfig(home).routes.some((route) => route.channel === app.channel);
  if (!routed) await addRoute(home, { channel: app.channel, peer: '*', agent: 'admin' }, { noReload: true });
  return done(owner, routed ? null : { channel: app.channel, agent: 'admin' });
}

/** Adds `owner` to the agent's `policy.owners` (creating the agent if `theclaw up` has not yet). */
async function addOwner(home: string, agent: string, owner: string): Promise<void> {
  const dir = agentDir(home, agent);
  if (!existsSync(dir.config)) await initAgent(home, agent);
  const document = parseConfigDocument(dir.config, readConfigText(dir.config));
  const owners = ((document.getIn(['policy', 'owners']) as { toJSON(): unknown } | undefined)?.toJSON() as string[] | undefined) ?? [];
  if (owners.includes(owner)) return;
  document.setIn(['policy', 'owners'], [...owners, owner]);
  writeFileAtomically(dir.config, configDocumentText(document));
}

/** The lines `theclaw setup` prints for a connected chat app (`name` as the summary's column). */
export function chatAppLines(name: string, result: ChatAppSetupResult): string[] {
  return [
    `${name.padEnd(9)} @${result.bot}: token stored in ${result.secrets_file}`,
    ...(result.owner
      ? [`          owner ${result.owner} (the one peer ${result.channel} admits, and in admin's policy.owners)`]
      : [`          ${result.channel} was configured already: only its token changed`]),
    ...(result.route ? [`          route ${result.route.channel} → ${result.route.agent}`] : []),
  ];
}
