import { join } from 'node:path';
import { loadYamlConfig } from '../core/config.js';
import { ClawError } from '../core/errors.js';
import { XgwConfigSchema, type XgwConfig } from './types.js';

export function xgwConfigPath(home: string): string {
  return join(home, 'xgw', 'config.yaml');
}

/**
 * Loads and checks the gateway config: the schema (field by field), then what a schema cannot
 * say — unique channel ids, an id whose prefix is its type, routes that name existing channels,
 * no two web chats on one port. Every problem is listed in one error.
 */
export function loadXgwConfig(home: string): XgwConfig {
  const file = xgwConfigPath(home);
  const config = loadYamlConfig(file, XgwConfigSchema);
  const problems = checkConfig(config);
  if (problems.length > 0) {
    throw new ClawError('invalid', `invalid ${file}: ${problems.join('; ')}`, { suggestion: 'fix the listed entries; xgw config check shows them without starting' });
  }
  return config;
}

export function checkConfig(config: XgwConfig): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const ports = new Map<number, string>();
  config.channels.forEach((channel, index) => {
    if (ids.has(channel.id)) problems.push(`channels.${index}.id: ${channel.id} is used twice`);
    ids.add(channel.id);
    if (!channel.id.startsWith(`${channel.type}:`)) problems.push(`channels.${index}.id: ${channel.id} must start with "${channel.type}:"`);
    if (channel.type === 'webchat' && channel.port !== 0) {
      const other = ports.get(channel.port);
      if (other) problems.push(`channels.${index}.port: ${channel.port} is used by ${other} too`);
      ports.set(channel.port, channel.id);
    }
  });
  config.routes.forEach((route, index) => {
    if (route.channel !== '*' && !ids.has(route.channel)) problems.push(`routes.${index}.channel: no channel ${route.channel} is configured`);
  });
  return problems;
}
