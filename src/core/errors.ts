/**
 * The one error class every tool throws. A `kind` says what sort of failure it is, so callers and
 * the CLI entry decide by structure, never by message text (DESIGN §9: retries that never fired
 * because errors were matched by message text).
 */
export type ErrorKind =
  /** Bad arguments or input: exit 2. */
  | 'usage'
  /** Something named does not exist. */
  | 'not_found'
  /** The thing exists already or is held by someone else (a lock, a running daemon). */
  | 'conflict'
  /** Stored data or configuration is invalid. */
  | 'invalid'
  /** A database file is damaged (not SQLite any more, or corrupt): only moving it away helps. */
  | 'damaged'
  /** The file system or another local resource failed. */
  | 'io'
  /** The disk holding the data is full (see storage-error.ts). */
  | 'disk_full'
  /** The data directory cannot be written: a read-only file system, or no permission. */
  | 'read_only'
  /** A remote service failed (LLM provider, chat platform). */
  | 'upstream'
  | 'timeout'
  | 'aborted';

export interface ClawErrorOptions {
  /** How the user can fix it; printed after " - ". */
  suggestion?: string;
  /** HTTP status or process exit status, where one applies. */
  status?: number;
  /** Exit code of the CLI instead of the kind's (1, or 2 for `usage`): 130 after SIGINT. */
  exitCode?: number;
  cause?: unknown;
}

export class ClawError extends Error {
  override name = 'ClawError';
  readonly kind: ErrorKind;
  readonly suggestion: string | undefined;
  readonly status: number | undefined;
  readonly exitCode: number | undefined;

  constructor(kind: ErrorKind, message: string, options: ClawErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.suggestion = options.suggestion;
    this.status = options.status;
    this.exitCode = options.exitCode;
  }
}

export function usageError(message: string, suggestion?: string): ClawError {
  return new ClawError('usage', message, { suggestion });
}

export function isClawError(error: unknown, kind?: ErrorKind): error is ClawError {
  return error instanceof ClawError && (kind === undefined || error.kind === kind);
}

/**
 * Exit codes of every CLI: 0 success, 1 logic/runtime error, 2 usage error; an error may name
 * its own (128 + signal number when a signal interrupted the command).
 */
export function exitCodeOf(error: unknown): number {
  if (isClawError(error) && error.exitCode !== undefined) return error.exitCode;
  return isClawError(error, 'usage') ? 2 : 1;
}

/** Node's errno errors carry a `code`; this reads it without trusting the shape. */
export function errnoCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The `Error: <what went wrong> - <how to fix>` line: one line, whatever the message quotes (an id
 * with a newline in it, a multi-line upstream message), so that scripts can read it as one.
 */
export function formatError(error: unknown): string {
  const { error: what, suggestion } = errorToJson(error);
  return oneLine(suggestion ? `Error: ${what} - ${suggestion}` : `Error: ${what}`);
}

/** Control characters as JSON writes them (`\n`, `\u0000`). */
function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes.
  return text.replace(/[\u0000-\u001f\u007f]/g, (char) => JSON.stringify(char).slice(1, -1));
}

/** The `--json` form of an error. */
export function errorToJson(error: unknown): { error: string; suggestion?: string } {
  if (isClawError(error)) {
    return error.suggestion ? { error: error.message, suggestion: error.suggestion } : { error: error.message };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { error: message, suggestion: 'this is unexpected; see the log and report it if it persists' };
}
