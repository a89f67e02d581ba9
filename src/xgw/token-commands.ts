import { printJson, printLines } from '../core/cli.js';
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { addApiClient, listApiClients, revokeApiClient } from './channels/api-tokens.js';

/** `xgw token add|list|revoke`: the API channel's clients (channels/api-tokens.ts). */

interface Json {
  json?: boolean;
}

export function tokenAdd(name: string, options: Json): void {
  const token = addApiClient(resolveHome(), name);
  if (options.json) printJson({ name, token });
  else printLines([token, `(the token of client ${name}: shown this once, kept only as a hash; the client sends it as Authorization: Bearer <token>)`]);
}

export function tokenList(options: Json): void {
  const clients = listApiClients(resolveHome()).map(({ name, created_at }) => ({ name, created_at }));
  if (options.json) printJson(clients);
  else printLines(clients.length === 0 ? ['no API clients (add one with: xgw token add <name>)'] : clients.map((client) => `${client.name}  created ${client.created_at}`));
}

export function tokenRevoke(name: string, options: Json): void {
  if (!revokeApiClient(resolveHome(), name)) throw new ClawError('not_found', `no API client named ${name}`, { suggestion: 'see them with: xgw token list' });
  if (options.json) printJson({ revoked: name });
  else printLines([`revoked ${name}: its token no longer works`]);
}
