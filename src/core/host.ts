import { hostname } from 'node:os';
import * as z from 'zod/mini';
import { loadYamlConfig } from './config.js';
import { usageError } from './errors.js';
import { homeConfigPath } from './layout.js';

/**
 * The name of the host a daemon runs on, as the other hosts sharing one PostgreSQL store know it:
 * it names lease holders, agent placements and channel owners. `THECLAW_HOST`, else `host:` in
 * `$THECLAW_HOME/config.yaml`, else the machine's hostname. Two homes on one machine (the tests'
 * "hosts") set it apart; a lone host never needs to.
 */
export const HOST_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const HostConfigSchema = z.looseObject({ host: z.optional(z.string()) });

export function hostName(home: string, env: NodeJS.ProcessEnv = process.env): string {
  if (env.THECLAW_HOST) return checkedHostName(env.THECLAW_HOST, 'THECLAW_HOST');
  const file = homeConfigPath(home);
  const { host } = loadYamlConfig(file, HostConfigSchema);
  if (host !== undefined) return checkedHostName(host, `host in ${file}`);
  return (
    hostname()
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .slice(0, 63) || 'localhost'
  );
}

export function checkedHostName(name: string, where = 'the host name'): string {
  if (HOST_NAME.test(name)) return name;
  throw usageError(`${where} "${name}" is not a host name`, 'use lower-case letters, digits, ".", "_" and "-", at most 63, starting with a letter or digit');
}
