import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { ClawError, errnoCode } from '../core/errors.js';

/** `$THECLAW_HOME/notifier/config.yaml`; every field is optional. */
export const NotifierConfigSchema = z
  .object({
    /** How often every registered thread is checked, even without a poke. */
    sweep_interval_seconds: z.number().positive().max(3600).default(5),
    /** A handler or timer command running longer is killed with its process group. */
    handler_timeout_seconds: z.number().positive().default(600),
    /** Failing handlers wait initial × 2^(failures−1), at most max, with ±20% jitter. */
    backoff: z
      .object({
        initial_seconds: z.number().positive().default(1),
        max_seconds: z.number().positive().default(300),
      })
      .strict()
      .default({ initial_seconds: 1, max_seconds: 300 }),
    /** How much of a run's output (head and tail together) is copied into the log. */
    output_limit_bytes: z.number().int().positive().default(16_384),
  })
  .strict();

export type NotifierConfig = z.output<typeof NotifierConfigSchema>;

export function configPath(home: string): string {
  return join(home, 'notifier', 'config.yaml');
}

export function loadConfig(home: string): NotifierConfig {
  const file = configPath(home);
  let raw: unknown = {};
  try {
    raw = parse(readFileSync(file, 'utf8')) ?? {};
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') {
      throw new ClawError('invalid', `cannot read ${file}: ${(error as Error).message}`, { suggestion: 'fix the YAML syntax', cause: error });
    }
  }
  const parsed = NotifierConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(top)'}: ${issue.message}`).join('; ');
    throw new ClawError('invalid', `invalid ${file}: ${issues}`, { suggestion: 'fix the listed fields or remove them to use the defaults' });
  }
  return parsed.data;
}
