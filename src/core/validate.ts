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

/** Parses `value` or throws a ClawError listing each problem as `path: message`. */
export function validate<S extends z.ZodMiniType>(schema: S, value: unknown, options: ValidateOptions): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues
    .map((issue) => {
      const path = issue.path.join('.');
      // A message that names its field already ("source is missing") is not prefixed again.
      return path === '' || issue.message.startsWith(`${path} `) ? issue.message : `${path}: ${issue.message}`;
    })
    .join('; ');
  throw new ClawError(options.kind ?? 'invalid', `invalid ${options.what}: ${issues}`, { suggestion: options.suggestion });
}
