import * as z from 'zod/mini';

/**
 * A thread is a directory holding a durable, append-only stream of events (`events.db`, SQLite
 * in WAL mode), a human-readable copy (`events.jsonl`) and `logs/`. Consumers read it from their
 * own stored progress; subscribed consumers have a handler that notifier starts when events that
 * match their filter are pending.
 */

/** An event as `pop` and `peek` print it, one JSON object per line. */
export interface ThreadEvent {
  /** Monotonic, never reused. */
  id: number;
  /** ISO-8601 time of the push. */
  created_at: string;
  /** A source address (DESIGN §7), e.g. `self` or `external:telegram:main:dm:1:1`. */
  source: string;
  type: EventType;
  subtype: string | null;
  /** Opaque to the thread; JSON for messages. */
  content: string;
}

/** Known types; the set is open (`record` subtypes especially) but each must be a plain word. */
export type EventType = 'message' | 'record' | (string & {});

/** Record subtypes the tools write; others may be added. */
export type RecordSubtype = 'toolcall' | 'decision' | 'error' | 'usage' | 'compaction' | (string & {});

const WORD = /^[a-z][a-z0-9_]{0,31}$/;

export const MAX_CONTENT_BYTES = 1024 * 1024;

/** zod's message for a required string field that is absent or not a string. */
function stringField(name: string): z.core.$ZodStringParams['error'] {
  return (issue) => (issue.input === undefined ? `${name} is missing` : `${name} must be a string`);
}

/**
 * The thread stores text: SQLite TEXT holds UTF-8, events.jsonl is JSON. A JS string with a lone
 * UTF-16 surrogate (`"\ud800"` in a batch line's JSON) has no UTF-8 form; SQLite would keep the
 * bytes of the surrogate, which read back as three U+FFFD, so the event would come back changed
 * without a word. Such strings are refused instead (bytes that are not UTF-8 never get this far:
 * `push --batch` refuses them on stdin and the CLI refuses them in arguments).
 */
function wellFormed(name: string) {
  return z.refine<string>((value) => value.isWellFormed(), `${name} holds a lone UTF-16 surrogate, which is not text`);
}

/** One event to push, as the library takes it and as a line of `push --batch` carries it. */
export const PushInputSchema = z.object({
  source: z.string({ error: stringField('source') }).check(
    wellFormed('source'),
    z.minLength(1, 'source is empty'),
    z.maxLength(1024, 'source is longer than 1024 characters'),
    // biome-ignore lint/suspicious/noControlCharactersInRegex: a source must hold no control character.
    z.regex(/^[^\u0000-\u001f\u007f]*$/, 'source holds a control character'),
  ),
  type: z.string({ error: stringField('type') }).check(z.regex(WORD, 'type must be a lower-case word such as message or record')),
  subtype: z.nullish(z.string().check(z.regex(WORD, 'subtype must be a lower-case word such as toolcall'))),
  content: z.string({ error: stringField('content') }).check(
    wellFormed('content'),
    z.refine((content) => Buffer.byteLength(content) <= MAX_CONTENT_BYTES, `content is larger than ${MAX_CONTENT_BYTES / 1024 / 1024} MiB`),
  ),
  idempotency_key: z.nullish(z.string().check(wellFormed('idempotency_key'), z.minLength(1), z.maxLength(512))),
});

export type PushInput = z.input<typeof PushInputSchema>;

export interface PopOptions {
  /** Acknowledge this id first (progress only moves forward), then read after it. */
  lastEventId?: number;
  /** Most events returned. Default: 100. */
  limit?: number;
}

export interface PeekOptions {
  /** Only events after this id. Default: 0. */
  afterId?: number;
  /** Most events returned, oldest first. Default: 100. */
  limit?: number;
  /** A filter expression, e.g. `type = 'message' AND source = 'self'`. */
  filter?: string;
  /** The newest K matching events instead (still printed oldest first). */
  last?: number;
}

export interface SubscribeOptions {
  consumer: string;
  /** Command run when matching events are pending; split with shell-words rules, no shell. */
  handler: string;
  filter?: string;
  /**
   * Where the handler runs when hosts share a PostgreSQL store: a placement key (`agent:<id>`,
   * `channel:<name>`), run only by the host that key is placed on. None: any host. SQLite has one
   * host and does not store it.
   */
  runOn?: string;
}

/** The process that holds a consumer's lease (its handler, or the dispatcher starting it). */
export interface Lease {
  pid: number;
  /** Process start time in clock ticks (Linux), guarding against pid reuse. */
  start: number | null;
  since: string;
  /** The host whose notifier holds it, when hosts share a PostgreSQL store. */
  host?: string;
}

export interface ConsumerInfo {
  consumer: string;
  /** Highest acknowledged event id. */
  progress: number;
  /** Events after `progress` that match the filter. */
  pending: number;
  subscribed: boolean;
  handler: string | null;
  filter: string | null;
  /** The live lease, if a handler runs now. */
  lease: Lease | null;
  /** Consecutive failed handler runs; reset by a successful run. */
  failures: number;
  last_error: string | null;
  /** When a failing handler may run again (ISO-8601), or null. */
  retry_at: string | null;
}

export interface ThreadInfo {
  path: string;
  events: number;
  last_id: number;
  consumers: ConsumerInfo[];
}
