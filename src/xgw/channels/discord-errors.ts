import { ClawError } from '../../core/errors.js';

// What the Discord channel says about refusals of the REST API and the gateway.

/** How to fix a refused REST call, by its HTTP status. */
export function suggestionFor(status: number, retryAfterSeconds?: number): string {
  switch (status) {
    case 400:
      return 'check the conversation id and the message replied to';
    case 401:
      return 'check the bot token in the Discord developer portal (Bot > Reset Token)';
    case 403:
      return 'the bot cannot write there: it left the server, lacks the Send Messages permission, or the person does not take direct messages';
    case 404:
      return 'check the conversation id: Discord knows no such channel';
    case 429:
      return `wait ${retryAfterSeconds ?? 'a few'} seconds and retry`;
    default:
      return 'retry later';
  }
}

/**
 * The error for a gateway close after which discord.js does not reconnect (its
 * UNRECOVERABLE_CLOSE_CODES): configuration mistakes, mostly, that a retry cannot fix.
 */
export function gatewayCloseError(code: number, tokenEnv: string): ClawError {
  switch (code) {
    case 4004:
      return new ClawError('invalid', `Discord refused the bot token in ${tokenEnv} (gateway close ${code}: authentication failed)`, {
        status: 401,
        suggestion: `check the token in the Discord developer portal (Bot > Reset Token) and export it again as ${tokenEnv}`,
      });
    case 4014:
      return new ClawError('invalid', `Discord refused the gateway intents (close ${code}: disallowed intents): the bot may not read message content`, {
        suggestion: 'enable "Message Content Intent" under Bot > Privileged Gateway Intents in the Discord developer portal, then restart xgw',
      });
    default:
      return new ClawError('upstream', `the Discord gateway closed the connection for good (close ${code})`, { suggestion: 'see the xgw log; restart xgw' });
  }
}
