import type * as z from 'zod/mini';
import { ClawError, type ErrorKind } from './errors.js';

/**
 * zod at the edges. The project uses `zod/mini`: the same validation as zod's classic API, but
 * tree-shakable, which keeps a CLI's start-up ~35 ms shorter (the classic build loads all of zod).
 * Import it as `import * as z from 'zod/mini'` in each module and never re-export the namespace:
 * a re-exported namespace cannot be tree-shaken and brings back all of zod's locales.
 */

export interface ValidateOptions {
  /** What is being read, for the message: "invalid <what>: ...". */
  what: string;
  /** `usage` for flags and input, `invalid` for stored data and config. Default: `invalid`. */
  kind?: ErrorKind;
  suggestion: string;
}

const DEFAULT_MESSAGE = 'Invalid input';

/**
 * What every parse whose issues `describeIssue` words must pass. zod keeps its error map in one
 * place per process: once a library installs zod's English locale there (pi-ai and playwright-core
 * do on import), an issue would read "Unrecognized key: …" instead of ours. A parse's own `error`
 * ranks above that map (a schema's own message still ranks above both), and `reportInput` lets
 * `explain` quote what was given.
 */
export const OWN_WORDING = { reportInput: true, error: () => DEFAULT_MESSAGE } as const;

/** Parses `value` or throws a ClawError listing each problem as `path: message`. */
export function validate<S extends z.ZodMiniType>(schema: S, value: unknown, options: ValidateOptions): z.output<S> {
  const parsed = schema.safeParse(value, OWN_WORDING);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map(describeIssue).join('; ');
  throw new ClawError(options.kind ?? 'invalid', `invalid ${options.what}: ${issues}`, { suggestion: options.suggestion });
}

/**
 * One problem as `path: what is wrong`. zod/mini carries no locale (it would cost start-up), so
 * every issue without a message of its own schema reads "Invalid input"; this says instead what
 * the field must be and, for a wrong type or value, what it is (`concurrency: must be a whole
 * number, got "four"`). Values that fail a format check are not quoted: a token pasted into the
 * wrong field must not end up in an error line.
 */
export function describeIssue(issue: z.core.$ZodIssue): string {
  const path = issue.path.map(String).join('.');
  // A message that names its field already ("source is missing") is not prefixed again.
  const message = issue.message === DEFAULT_MESSAGE ? explain(issue) : issue.message;
  return path === '' || message.startsWith(`${path} `) ? message : `${path}: ${message}`;
}

function explain(issue: z.core.$ZodIssue): string {
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case 'invalid_type':
      return input === undefined ? 'is missing' : `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}, got ${quote(input)}`;
    case 'invalid_value':
      return `must be ${issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`}, got ${quote(input)}`;
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? issue.minimum : issue.maximum;
      const cmp = issue.code === 'too_small' ? (issue.inclusive ? 'at least' : 'more than') : issue.inclusive ? 'at most' : 'less than';
      const plural = Number(bound) === 1 ? '' : 's';
      const unit = issue.origin === 'string' ? ` character${plural} long` : issue.origin === 'array' ? ` entr${plural ? 'ies' : 'y'} long` : '';
      return `must be ${cmp} ${String(bound)}${unit}${issue.origin === 'number' || issue.origin === 'int' ? `, got ${quote(input)}` : ''}`;
    }
    case 'invalid_format':
      return issue.format === 'regex' ? `has the wrong form (it must match ${issue.pattern ?? 'its pattern'})` : `must be a valid ${issue.format}`;
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}`;
    case 'invalid_union': {
      // A discriminated union names the values its discriminator may take.
      const options = (issue as { options?: unknown }).options;
      return Array.isArray(options) ? `must be one of ${options.map((option) => JSON.stringify(option)).join(', ')}` : 'matches none of the allowed forms';
    }
    default:
      return 'is invalid';
  }
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
  literal: 'a fixed value',
};

/** A short, one-line picture of a value for an error message. */
function quote(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}
