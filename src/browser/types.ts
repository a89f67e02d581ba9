import * as z from 'zod/mini';
import { SERVICE_SOCKET_ENV } from '../web/fetch-client.js';

/**
 * The nouns of `browser`: the commands an agent's browser is driven with (one JSON request per
 * connection to the browser service), what they answer, and the limits the agent's config sets
 * (`browser:` in agents/<id>/config.yaml).
 */

const Ref = z.string().check(z.regex(/^(?:f\d+)?e\d+$/, 'a ref is written eN (or fMeN), as in [ref=e12]'));

export const BrowserCommandSchema = z.discriminatedUnion('name', [
  z.strictObject({ name: z.literal('open'), url: z.string().check(z.minLength(1)), new_tab: z.optional(z.boolean()) }),
  z.strictObject({ name: z.literal('snapshot') }),
  z.strictObject({ name: z.literal('click'), ref: Ref }),
  z.strictObject({ name: z.literal('type'), ref: Ref, text: z.string(), submit: z.optional(z.boolean()) }),
  z.strictObject({ name: z.literal('select'), ref: Ref, value: z.string() }),
  z.strictObject({ name: z.literal('press'), key: z.string().check(z.minLength(1), z.maxLength(64)) }),
  z.strictObject({ name: z.literal('wait'), text: z.optional(z.string().check(z.minLength(1))), ms: z.optional(z.number().check(z.int(), z.positive(), z.maximum(60_000))) }),
  z.strictObject({ name: z.literal('back') }),
  z.strictObject({ name: z.literal('tabs'), select: z.optional(z.number().check(z.int(), z.nonnegative())) }),
  z.strictObject({ name: z.literal('screenshot'), full: z.optional(z.boolean()) }),
  z.strictObject({ name: z.literal('pdf') }),
  z.strictObject({ name: z.literal('close') }),
]);
export type BrowserCommand = z.output<typeof BrowserCommandSchema>;
export type BrowserCommandName = BrowserCommand['name'];

/** A request to the service: the agent whose browser, and the command. */
export const ServiceRequestSchema = z.strictObject({
  op: z.literal('command'),
  agent: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'an agent id')),
  command: BrowserCommandSchema,
});
export type ServiceRequest = z.output<typeof ServiceRequestSchema>;

/** A running browser, as the service's `status` tells `theclaw status`. */
export interface RunningBrowser {
  agent: string;
  pages: number;
  /** PSS of Chromium's processes (memory.ts). */
  memory_bytes: number;
}

/** What a command answers: text for the model, and for screenshot/pdf the file's bytes (base64). */
export interface BrowserReply {
  text: string;
  file?: { base64: string; extension: 'png' | 'pdf' };
}

/** `browser:` in an agent's config.yaml; each with a default that suits a small machine. */
export const BrowserLimitsSchema = z.strictObject({
  /** Minutes without a command before the agent's browser is closed (its profile stays). */
  idle_minutes: z._default(z.number().check(z.positive(), z.maximum(24 * 60)), 10),
  /** Open pages (tabs) at most; `open --new-tab` beyond it is refused, and pages a site opens are closed. */
  max_pages: z._default(z.number().check(z.int(), z.positive(), z.maximum(50)), 5),
  /** The browser's memory (all its processes' RSS) at most; over it, the browser is restarted. */
  max_memory_mb: z._default(z.number().check(z.int(), z.minimum(64)), 1024),
  /** A navigation (open, back, a click that loads a page) gives up after this long. */
  navigation_timeout_seconds: z._default(z.number().check(z.positive(), z.maximum(300)), 30),
});
export type BrowserLimits = z.output<typeof BrowserLimitsSchema>;

export const DEFAULT_BROWSER_LIMITS: BrowserLimits = BrowserLimitsSchema.parse({});

/** In a turn's sandbox: the socket that reaches the turn's own agent's browser (proxy.ts), and its `web fetch`. */
export const BROWSER_SOCKET_ENV = SERVICE_SOCKET_ENV;
