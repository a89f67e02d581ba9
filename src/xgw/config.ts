import * as z from 'zod/mini';
import { loadYamlConfig } from '../core/config.js';
import { ClawError } from '../core/errors.js';
import { xgwConfigPath } from '../core/layout.js';
import { describeIssue } from '../core/validate.js';
import { ChannelConfigSchema, RouteSchema, XgwConfigSchema, type ChannelConfig, type Route, type XgwConfig } from './types.js';

/** What `inspectXgwConfig` found. */
export interface XgwConfigReport {
  file: string;
  /** The config, when it has no problem. */
  config?: XgwConfig;
  /** False when the schema refused the file: the checks across entries then saw only the entries that passed. */
  schemaValid: boolean;
  /** Every problem found, as `path: message`. */
  problems: string[];
}

/**
 * Checks the gateway config as far as it can: the schema (field by field), then what a schema
 * cannot say — unique channel ids, an id whose prefix is its type, routes that name existing
 * channels, no two web chats on one port. When the schema fails, the checks across entries still
 * run over the entries that pass it on their own, so one look lists (nearly) everything. A file
 * that is not YAML is an `invalid` error.
 */
export function inspectXgwConfig(home: string): XgwConfigReport {
  const file = xgwConfigPath(home);
  const raw = loadYamlConfig(file, z.unknown()); // a file that is not YAML is thrown as it is
  const parsed = XgwConfigSchema.safeParse(raw, { reportInput: true });
  if (parsed.success) {
    const problems = checkConfig(parsed.data);
    return { file, schemaValid: true, problems, ...(problems.length === 0 && { config: parsed.data }) };
  }
  const schemaProblems = parsed.error.issues.map(describeIssue);
  const entries = (key: string): unknown[] => {
    const value = (raw as Record<string, unknown> | null)?.[key];
    return Array.isArray(value) ? value : [];
  };
  const channels = entries('channels').map((entry) => ChannelConfigSchema.safeParse(entry).data);
  const routes = entries('routes').map((entry) => RouteSchema.safeParse(entry).data);
  // A channel refused by the schema still counts as configured for the routes that name it.
  const namedIds = entries('channels').flatMap((entry) => {
    const id = (entry as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? [id] : [];
  });
  return { file, schemaValid: false, problems: [...schemaProblems, ...crossChecks(channels, routes, namedIds)] };
}

/** Loads the gateway config, or throws one `invalid` error that lists every problem found. */
export function loadXgwConfig(home: string): XgwConfig {
  const report = inspectXgwConfig(home);
  if (report.config) return report.config;
  throw configError(report);
}

/** The error for a config with problems: each of them, and whether the schema check failed. */
export function configError(report: XgwConfigReport): ClawError {
  const note = report.schemaValid ? '' : ' (the schema check failed, so the checks across entries covered only the valid entries)';
  return new ClawError('invalid', `invalid ${report.file}: ${report.problems.join('; ')}${note}`, {
    suggestion: 'fix the listed entries; xgw config check shows them without starting',
  });
}

/** The problems of a config that passed the schema. */
export function checkConfig(config: XgwConfig): string[] {
  return crossChecks(
    config.channels,
    config.routes,
    config.channels.map((channel) => channel.id),
  );
}

/** Checks across entries; `undefined` stands for an entry the schema refused (skipped, keeping indexes). */
function crossChecks(channels: (ChannelConfig | undefined)[], routes: (Route | undefined)[], channelIds: string[]): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const ports = new Map<number, string>();
  channels.forEach((channel, index) => {
    if (!channel) return;
    if (ids.has(channel.id)) problems.push(`channels.${index}.id: ${channel.id} is used twice`);
    ids.add(channel.id);
    if (!channel.id.startsWith(`${channel.type}:`)) problems.push(`channels.${index}.id: ${channel.id} must start with "${channel.type}:"`);
    if (channel.type === 'webchat' && channel.port !== 0) {
      const other = ports.get(channel.port);
      if (other) problems.push(`channels.${index}.port: ${channel.port} is used by ${other} too`);
      ports.set(channel.port, channel.id);
    }
  });
  const known = new Set(channelIds);
  routes.forEach((route, index) => {
    if (route && route.channel !== '*' && !known.has(route.channel)) problems.push(`routes.${index}.channel: no channel ${route.channel} is configured`);
  });
  return problems;
}
