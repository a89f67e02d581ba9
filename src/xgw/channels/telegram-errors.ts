import { GrammyError } from 'grammy';

// What the Telegram channel says about Bot API errors, and how it keeps the bot token out of it.

/** How to fix a refused call, by its error code. */
export function suggestionFor(error: GrammyError): string {
  switch (error.error_code) {
    case 400:
      return 'check the conversation id and the message replied to';
    case 401:
      return 'check the bot token with @BotFather';
    case 403:
      return 'the bot was blocked by the person or removed from the chat';
    case 429:
      return `wait ${error.parameters.retry_after ?? 'a few'} seconds and retry`;
    default:
      return 'retry later';
  }
}

export function hintFor(error: unknown): string {
  if (!(error instanceof GrammyError)) return '';
  if (error.error_code === 401) return ' (the bot token was revoked? check it with @BotFather)';
  if (error.error_code === 409) return ' (another process polls with this bot token, or a webhook is set)';
  return '';
}
