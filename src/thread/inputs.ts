import type * as z from 'zod/mini';
import { ClawError, usageError } from '../core/errors.js';
import { validate } from '../core/validate.js';
import { PushInputSchema, type PushInput } from './types.js';

/** What every store checks before it stores anything, so that both refuse the same input alike. */

/** Most events `pop` and `peek` return when no limit is given. */
export const DEFAULT_LIMIT = 100;

const CONSUMER = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export function checkConsumer(consumer: string): void {
  if (!CONSUMER.test(consumer)) {
    throw usageError(`invalid consumer name ${JSON.stringify(consumer)}`, 'use letters, digits and . _ : @ - (at most 128), starting with a letter or digit');
  }
}

/** `line` numbers the event in a batch of more than one. */
export function validatePush(input: PushInput, line: number | undefined): z.output<typeof PushInputSchema> {
  return validate(PushInputSchema, input, {
    what: line === undefined ? 'event' : `event ${line}`,
    kind: 'usage',
    suggestion: 'see thread push --help',
  });
}

/** An id to acknowledge must be a whole number (and, `missingEvent`, one that exists). */
export function checkEventId(eventId: number): void {
  if (!Number.isSafeInteger(eventId) || eventId < 0) throw usageError(`event id ${eventId} is not a whole number`, 'pass an id that pop or peek printed');
}

export function missingEvent(thread: string, eventId: number, last: number): ClawError {
  return new ClawError('not_found', `event ${eventId} does not exist in ${thread} (the newest is ${last})`, {
    suggestion: 'acknowledge only ids that pop returned',
  });
}

export function notAConsumer(thread: string, consumer: string): ClawError {
  return new ClawError('not_found', `${consumer} is not a consumer of ${thread}`, {
    suggestion: `see the consumers with: thread info --thread ${JSON.stringify(thread)}`,
  });
}
