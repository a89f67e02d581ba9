import * as z from 'zod/mini';
import { loadYamlConfigFile } from '../core/config.js';
import { notifierConfigPath } from '../core/layout.js';

/** `$THECLAW_HOME/notifier/config.yaml`; every field is optional. */
export const NotifierConfigSchema = z.strictObject({
  /** How often every registered thread is checked, even without a poke. */
  sweep_interval_seconds: z._default(z.number().check(z.positive(), z.maximum(3600)), 5),
  /**
   * A handler or timer command running longer is killed with its process group. The outer guard:
   * larger than an agent's turn limit (`turn.timeout_seconds`, 600), which ends a stuck turn first.
   */
  handler_timeout_seconds: z._default(z.number().check(z.positive()), 900),
  /** Failing handlers wait initial × 2^(failures−1), at most max, with ±20% jitter. */
  backoff: z._default(
    z.strictObject({
      initial_seconds: z._default(z.number().check(z.positive()), 1),
      max_seconds: z._default(z.number().check(z.positive()), 300),
    }),
    { initial_seconds: 1, max_seconds: 300 },
  ),
  /**
   * Handlers and timer commands running at once; the rest wait their turn, agent by agent.
   * Default: twice the cores, at least 4.
   */
  max_concurrent_runs: z.optional(z.int().check(z.positive(), z.maximum(1024))),
  /**
   * Warm runners: handlers that run this package's CLIs (`agent run`, `agent deliver`) run in
   * long-lived processes with their modules loaded instead of a new Node each time.
   */
  runners: z._default(
    z.strictObject({
      enabled: z._default(z.boolean(), true),
      /** Runners kept waiting for the next job. */
      idle: z._default(z.int().check(z.nonnegative(), z.maximum(64)), 1),
      /** A runner is replaced after this many jobs, or once it uses this much memory. */
      max_jobs: z._default(z.int().check(z.positive()), 200),
      max_rss_mb: z._default(z.number().check(z.positive()), 300),
    }),
    { enabled: true, idle: 1, max_jobs: 200, max_rss_mb: 300 },
  ),
  /**
   * With a PostgreSQL store shared by several hosts: a handler's lease lasts `ttl_seconds` unless
   * notifier renews it every `heartbeat_seconds` (less than half the ttl); a dead host's
   * subscriptions are taken over once its leases expired. SQLite ignores it.
   */
  leases: z._default(
    z
      .strictObject({
        ttl_seconds: z._default(z.number().check(z.positive()), 30),
        heartbeat_seconds: z._default(z.number().check(z.positive()), 10),
      })
      .check(z.refine((leases) => leases.heartbeat_seconds * 2 <= leases.ttl_seconds, 'heartbeat_seconds must be at most half of ttl_seconds')),
    { ttl_seconds: 30, heartbeat_seconds: 10 },
  ),
  /** How much of a run's output (head and tail together) is copied into the log. */
  output_limit_bytes: z._default(z.int().check(z.positive()), 16_384),
});

export type NotifierConfig = z.output<typeof NotifierConfigSchema>;

export function loadConfig(home: string): NotifierConfig {
  return loadConfigFile(home).value;
}

/** `loadConfig`, with the fingerprint of the text loaded (what the daemon reports). */
export function loadConfigFile(home: string): { value: NotifierConfig; sha256: string } {
  return loadYamlConfigFile(notifierConfigPath(home), NotifierConfigSchema);
}
