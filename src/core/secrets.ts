import { readFileSync } from 'node:fs';
import { ClawError } from './errors.js';
import { resolveHome } from './home.js';
import { paiConfigPath, xgwConfigPath } from './layout.js';

/**
 * Secrets are API keys and tokens held in environment variables. They must never reach logs,
 * events or the environment of a command the model runs.
 */
const SECRET_NAME = /(_API_KEY|_TOKEN|_SECRET|_PASSWORD|_ACCESS_KEY)$|^(API_KEY|TOKEN|SECRET|PASSWORD)$/i;

/** Secret values shorter than this are too likely to appear in ordinary text to be replaced. */
const MIN_SECRET_LENGTH = 8;

/** Secrets not named like one: the thread store's URL may hold the database's password. */
const SECRET_NAMES = new Set(['THECLAW_DATABASE_URL']);

export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name) || SECRET_NAMES.has(name);
}

// `token_env: NAME` and `password_env: NAME` (xgw), `api_key_env: NAME` (pai), `api_key: VALUE` (pai), in block or flow style.
const CONFIGURED_NAME = /\b(?:token_env|password_env|api_key_env)\s*:\s*["']?([A-Za-z_][A-Za-z0-9_]*)/g;
const CONFIGURED_VALUE = /\bapi_key\s*:\s*["']?([^\s"',}#]+)/g;
// `api_key_envs: [A, B]` (pai), or a block list of `- A` lines under it.
const CONFIGURED_LIST = /\bapi_key_envs\s*:\s*(?:\[([^\]]*)\]|((?:[ \t]*(?:#[^\n]*)?\n[ \t]*-[^\n]*)+))/g;
const VARIABLE = /[A-Za-z_][A-Za-z0-9_]*/g;

/**
 * What the configs of the home `env` points at say is secret: the variables they name as holding
 * a token, password or key (`token_env` and `password_env` in xgw's, `api_key_env` and `api_key_envs` in pai's), whatever those are called, and
 * the keys pai's config holds itself (`api_key`). Read as text, not YAML: every process's logger
 * asks, and the hot paths must not load a YAML parser. A name in a comment only hides one more
 * variable.
 */
export function configuredSecrets(env: NodeJS.ProcessEnv = process.env): { names: string[]; values: string[] } {
  const home = resolveHome(env);
  const names = new Set<string>();
  const values = new Set<string>();
  for (const file of [xgwConfigPath(home), paiConfigPath(home)]) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no config (or an unreadable one, which its tool reports): nothing named there
    }
    for (const match of text.matchAll(CONFIGURED_NAME)) names.add(match[1]!);
    for (const match of text.matchAll(CONFIGURED_LIST)) {
      const items = (match[1] ?? match[2] ?? '').replace(/#[^\n]*/g, '');
      for (const name of items.match(VARIABLE) ?? []) names.add(name);
    }
    for (const match of text.matchAll(CONFIGURED_VALUE)) values.add(match[1]!);
  }
  return { names: [...names], values: [...values] };
}

/**
 * A copy of `env` without the variables that hold secrets: those named like one, those the
 * configs name (see configuredSecrets), and `extraNames`.
 */
export function withoutSecrets(env: NodeJS.ProcessEnv, extraNames: readonly string[] = []): NodeJS.ProcessEnv {
  const named = new Set([...extraNames, ...configuredSecrets(env).names]);
  const clean: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (!isSecretName(name) && !named.has(name)) clean[name] = value;
  }
  return clean;
}

/**
 * What is secret in a URL-valued secret (the store's URL): its password and any query value named
 * like one, and the whole URL when it holds either. The rest (user, host, database) is what every
 * status line names, and redacting it would hide where the threads are.
 */
function secretsOfUrl(value: string): string[] {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return [value]; // not a URL: all of it, as for any secret
  }
  const parts = [...url.searchParams].filter(([name]) => /pass|secret|key|token/i.test(name)).map(([, part]) => part);
  if (url.password) parts.push(decodeURIComponent(url.password), url.password);
  return parts.length ? [value, ...parts] : [];
}

/**
 * A secret as it appears in text: as it is, URL-encoded, and inside base64 or base64url text.
 * Base64 writes 3 bytes as 4 characters, so inside an encoded blob the secret's own characters
 * depend on where it starts within a group of 3: for each of the 3 offsets, the whole groups that
 * hold only the secret's bytes (whatever surrounds it, one of them is in the blob).
 */
export function encodedForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret)]);
  const bytes = Buffer.from(secret);
  for (let skip = 0; skip < 3; skip++) {
    const inner = bytes.subarray(skip);
    const whole = inner.subarray(0, inner.length - (inner.length % 3));
    forms.add(whole.toString('base64'));
    forms.add(whole.toString('base64url'));
  }
  return [...forms];
}

/** Removes secrets from text; `aroundCut` does it for what is left of a text whose middle was dropped. */
export type Redactor = ((text: string) => string) & {
  /**
   * The head and tail of a text whose middle was cut out (bash_exec's truncation), redacted, and
   * without the piece of a secret the cut split: the head's end that begins one, the tail's start
   * that ends one. Redacting the joined text would miss them, each being only part of a secret.
   */
  aroundCut: (head: string, tail: string) => [string, string];
};

/**
 * Replaces every secret value found in `env` (named like a secret or named by a config), the
 * keys a config holds, any `extra` ones, and their encoded forms (see encodedForms), with
 * `[redacted]`. Best effort against text a command printed: a secret transformed otherwise
 * (reversed, hex) is not recognised.
 */
export function createRedactor(env: NodeJS.ProcessEnv = process.env, extra: string[] = []): Redactor {
  const configured = configuredSecrets(env);
  const values = [
    ...Object.entries(env)
      .filter(([name]) => isSecretName(name) || configured.names.includes(name))
      .flatMap(([name, value]) => (SECRET_NAMES.has(name) ? secretsOfUrl(value ?? '') : [value ?? ''])),
    ...configured.values,
    ...extra,
  ]
    .filter((value) => value.length >= MIN_SECRET_LENGTH)
    .flatMap(encodedForms)
    .filter((value) => value.length >= MIN_SECRET_LENGTH)
    // Longest first, so a secret that contains another one is replaced whole.
    .sort((a, b) => b.length - a.length);
  const redact = (text: string) => values.reduce((out, value) => out.split(value).join('[redacted]'), text);
  const aroundCut = (head: string, tail: string): [string, string] => {
    const [redactedHead, redactedTail] = [redact(head), redact(tail)];
    const headPiece = Math.max(0, ...values.map((value) => longestPiece(value.length, (k) => redactedHead.endsWith(value.slice(0, k)))));
    const tailPiece = Math.max(0, ...values.map((value) => longestPiece(value.length, (k) => redactedTail.startsWith(value.slice(value.length - k)))));
    return [headPiece ? `${redactedHead.slice(0, redactedHead.length - headPiece)}[redacted]` : redactedHead, tailPiece ? `[redacted]${redactedTail.slice(tailPiece)}` : redactedTail];
  };
  return Object.assign(redact, { aroundCut });
}

/** The longest length k (1 to `length - 1`: a whole secret is redacted already) of a piece of a secret that `fits`, or 0. */
function longestPiece(length: number, fits: (k: number) => boolean): number {
  for (let k = length - 1; k > 0; k--) if (fits(k)) return k;
  return 0;
}

/**
 * An error as a sandbox is told it by the run that serves it (the run's environment holds the
 * model keys and the store's URL): its message and suggestion without `env`'s secrets, which the
 * client in the sandbox cannot redact, never having been given them.
 */
export function redactedError(error: ClawError, env: NodeJS.ProcessEnv): ClawError {
  const redact = createRedactor(env);
  return new ClawError(error.kind, redact(error.message), { suggestion: error.suggestion && redact(error.suggestion), status: error.status, exitCode: error.exitCode, cause: error });
}
