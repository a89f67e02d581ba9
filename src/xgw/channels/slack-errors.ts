import { webApi } from '@slack/bolt';
import { ClawError, isClawError } from '../../core/errors.js';

// What the Slack channel says about the Web API's refusals.

/** Slack's errors for a token it does not take: the token is wrong, revoked, or of the other kind. */
const TOKEN_REFUSALS: ReadonlySet<string> = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type']);

/** What an error of the Slack channel names. */
export interface SlackErrorContext {
  tokenEnv: string;
  appTokenEnv: string;
  /** The Web API root, for "cannot reach". */
  apiUrl: string;
  /** An error as one line without the tokens. */
  describe(error: unknown): string;
}

/**
 * The ClawError for a failed call of a Web API `method` (@slack/web-api's coded errors); a cause
 * that may hold a token is not kept. A token Slack refuses is `invalid`, naming its variable;
 * `partly` says what was sent before the failure.
 */
export function toSlackError(error: unknown, method: string, context: SlackErrorContext, partly = ''): ClawError {
  if (isClawError(error)) return partly ? new ClawError(error.kind, error.message + partly, { status: error.status, suggestion: error.suggestion }) : error;
  const { ErrorCode } = webApi;
  const coded = error as { code?: string; data?: { error?: string; needed?: string }; retryAfter?: number; statusCode?: number; original?: Error } | undefined;
  if (coded?.code === ErrorCode.PlatformError && coded.data?.error) {
    const slackError = coded.data.error;
    if (TOKEN_REFUSALS.has(slackError)) {
      const [variable, what, where] =
        method === 'apps.connections.open'
          ? [context.appTokenEnv, 'app-level token', 'Basic Information > App-Level Tokens (scope connections:write)']
          : [context.tokenEnv, 'bot token', 'OAuth & Permissions (Bot User OAuth Token)'];
      return new ClawError('invalid', `Slack refused the ${what} in ${variable} (${method}: ${slackError})`, {
        suggestion: `check the ${what} in the Slack app's settings, ${where}, and export it again as ${variable}`,
      });
    }
    const needed = coded.data.needed ? `, needs ${coded.data.needed}` : '';
    return new ClawError('upstream', `Slack refused ${method} (${slackError}${needed})${partly}`, { suggestion: suggestionFor(slackError, coded.data.needed) });
  }
  if (coded?.code === ErrorCode.RateLimitedError) {
    const seconds = coded.retryAfter ?? 1;
    return new ClawError('upstream', `Slack rate-limits the bot: retry after ${seconds} s (${method}: 429)${partly}`, { status: 429, suggestion: suggestionFor('ratelimited', undefined, seconds) });
  }
  if (coded?.code === ErrorCode.HTTPError && coded.statusCode !== undefined) {
    return new ClawError('upstream', `Slack answered ${method} with HTTP ${coded.statusCode}${partly}`, { status: coded.statusCode, suggestion: 'retry later' });
  }
  // @slack/socket-mode rejects its start with nothing when the WebSocket closes before `hello`.
  if (error === undefined && method === 'apps.connections.open') {
    return new ClawError('upstream', `the Socket Mode connection to Slack closed before Slack said hello${partly}`, { suggestion: 'check the network and api_root; retry later' });
  }
  const cause = coded?.code === ErrorCode.RequestError && coded.original ? context.describe(coded.original) : context.describe(error);
  return new ClawError('upstream', `cannot reach Slack at ${context.apiUrl} (${method}: ${cause})${partly}`, { suggestion: 'check the network and api_root; retry later' });
}

/** How to fix a Web API call Slack refused, by its `error` (and the scope it `needed`, when it says). */
function suggestionFor(error: string, needed?: string, retryAfterSeconds?: number): string {
  switch (error) {
    case 'missing_scope':
      return `add the ${needed ?? 'missing'} scope under OAuth & Permissions in the Slack app's settings, reinstall the app, and export the new bot token`;
    case 'channel_not_found':
      return 'check the conversation id: the bot sees no such channel (invite it with /invite @<bot> in a private channel)';
    case 'not_in_channel':
      return 'invite the bot to the channel: /invite @<bot>';
    case 'is_archived':
      return 'the channel is archived: unarchive it or answer elsewhere';
    case 'msg_too_long':
      return 'send a shorter text';
    case 'ratelimited':
      return `wait ${retryAfterSeconds ?? 'a few'} seconds and retry`;
    case 'message_not_found':
    case 'cant_update_message':
      return 'the message to change is gone: send the answer as a new message';
    default:
      return 'retry later; see the xgw log';
  }
}
