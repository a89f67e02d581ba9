import * as z from 'zod/mini';
import { validate } from '../core/validate.js';

/**
 * What a thin `web fetch` (fetch-client.ts) asks a warm service (fetch-door.ts) for: its flags,
 * named as on the command line; the run's browser proxy reads it too, before it passes it on
 * with its own agent's name. Apart from the fetch, so that every agent run (which serves the
 * proxy) reads it without loading the fetch's code.
 */

const positive = () => z.optional(z.number().check(z.int(), z.positive()));

/** What a thin client sends: its flags, named as on the command line. */
export const FetchRequestSchema = z.strictObject({
  op: z.literal('fetch'),
  url: z.string().check(z.minLength(1), z.maxLength(65_536)),
  max_chars: positive(),
  raw: z.optional(z.boolean()),
  fresh: z.optional(z.boolean()),
  timeout_seconds: positive(),
  max_bytes: positive(),
  json: z.optional(z.boolean()),
});
export type FetchRequest = z.output<typeof FetchRequestSchema>;

/** What the service is sent: the request and whose cache (the proxy's agent; none: the home's). */
export const ServiceFetchSchema = z.extend(FetchRequestSchema, {
  agent: z.optional(z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'an agent id'))),
});
export type ServiceFetch = z.output<typeof ServiceFetchSchema>;

const SUGGESTION = 'send {"op":"fetch","url":"https://..."} with web fetch\'s flags as max_chars, raw, fresh, timeout_seconds, max_bytes, json';

export function parseFetchRequest(raw: unknown): FetchRequest {
  return validate(FetchRequestSchema, raw, { what: 'fetch request', kind: 'usage', suggestion: SUGGESTION });
}

export function parseServiceFetch(raw: unknown): ServiceFetch {
  return validate(ServiceFetchSchema, raw, { what: 'fetch request', kind: 'usage', suggestion: SUGGESTION });
}
