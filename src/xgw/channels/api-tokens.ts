import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as z from 'zod/mini';
import { ClawError, errnoCode, usageError } from '../../core/errors.js';
import { ensureDir } from '../../core/home.js';

/**
 * The API's clients and their bearer tokens, in `$THECLAW_HOME/xgw/api-tokens.json` (0600). A
 * token is 32 random bytes shown once by `xgw token add`; only its SHA-256 is kept, so the file
 * lets nobody in. The channel reads the file on each request: a token added or revoked counts at
 * once, without a reload.
 */

const TOKEN_PREFIX = 'xgw_';
const CLIENT_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

const ClientSchema = z.strictObject({
  name: z.string(),
  /** SHA-256 of the token, hex. */
  sha256: z.string().check(z.regex(/^[0-9a-f]{64}$/)),
  created_at: z.string(),
});
const TokenFileSchema = z.strictObject({ clients: z.array(ClientSchema) });

export type ApiClient = z.output<typeof ClientSchema>;

export function apiTokensPath(home: string): string {
  return join(home, 'xgw', 'api-tokens.json');
}

/** The clients in the file; none when there is no file. */
export function listApiClients(home: string): ApiClient[] {
  const path = apiTokensPath(home);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw new ClawError('io', `cannot read ${path}`, { suggestion: 'check its permissions', cause: error });
  }
  const parsed = TokenFileSchema.safeParse(safeJson(text));
  if (!parsed.success) throw new ClawError('invalid', `${path} is damaged`, { suggestion: 'remove it and add the tokens again with: xgw token add <name>' });
  return parsed.data.clients;
}

/** Creates a client and returns its token (the only time it is seen); a name in use is refused. */
export function addApiClient(home: string, name: string, now = new Date()): string {
  if (!CLIENT_NAME.test(name)) throw usageError(`${JSON.stringify(name)} is not a client name`, 'use lower-case letters, digits, _ and - (up to 32), e.g. ci or home-assistant');
  const clients = listApiClients(home);
  if (clients.some((client) => client.name === name)) {
    throw new ClawError('conflict', `a client named ${name} exists already`, { suggestion: `revoke it first (xgw token revoke ${name}), or pick another name` });
  }
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  writeClients(home, [...clients, { name, sha256: sha256Hex(token), created_at: now.toISOString() }]);
  return token;
}

/** Removes a client: its token stops working at the next request. Whether there was one. */
export function revokeApiClient(home: string, name: string): boolean {
  const clients = listApiClients(home);
  const kept = clients.filter((client) => client.name !== name);
  if (kept.length === clients.length) return false;
  writeClients(home, kept);
  return true;
}

/** The client a bearer token belongs to, or undefined; every stored hash is compared in constant time. */
export function clientOfToken(clients: readonly ApiClient[], token: string): string | undefined {
  const presented = createHash('sha256').update(token).digest();
  let found: string | undefined;
  for (const client of clients) {
    if (timingSafeEqual(presented, Buffer.from(client.sha256, 'hex')) && found === undefined) found = client.name;
  }
  return found;
}

function sha256Hex(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function writeClients(home: string, clients: ApiClient[]): void {
  const path = apiTokensPath(home);
  ensureDir(dirname(path));
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify({ clients }, null, 2)}\n`, { mode: 0o600 });
  renameSync(temp, path);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
