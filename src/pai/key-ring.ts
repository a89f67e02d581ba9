import { readFileSync } from 'node:fs';
import { keyCooldownsPath } from '../core/layout.js';
import * as z from 'zod/mini';
import { writeFileWhole } from '../core/whole-file.js';
import type { ModelError, PaiConfig, ResolvedModel } from './types.js';

/**
 * Auth profiles: a provider may have several keys (`api_key_envs` in the pai config), used in
 * their order. A key that is refused (401, 403) or rate limited (429) is set aside — for the
 * server's Retry-After (a minute when it gives none), or ten minutes after a refusal — and the
 * call goes on at once with the next key: before pai's own retries, and so before an agent's
 * model failover. A profile is named by its variable; records and logs show that name, never
 * the key. The set-aside keys are kept in `$THECLAW_HOME/pai/key-cooldowns.json`, since every
 * agent run is a process of its own and should not begin with a key the last one set aside.
 */
export interface KeyProfile {
  /** The variable that holds the key; null for the config's own `api_key`, or no key at all. */
  name: string | null;
  key: string | undefined;
}

const RATE_LIMIT_COOLDOWN_MS = 60_000;
const REFUSAL_COOLDOWN_MS = 10 * 60_000;
/** A Retry-After of a day must not park a key for that long: after this the key is tried again. */
const MAX_COOLDOWN_MS = 60 * 60_000;

const CooldownsSchema = z.record(z.string(), z.object({ until: z.number(), reason: z.enum(['rate_limit', 'auth']) }));
type Cooldowns = z.output<typeof CooldownsSchema>;

/** The variables a provider's keys are in, in order: `api_key_envs`, else `api_key_env`, else the standard one. */
export function keyVariables(config: PaiConfig, provider: string, standard: string | null): string[] {
  const configured = config.providers[provider];
  return configured?.api_key_envs ?? (configured?.api_key_env ? [configured.api_key_env] : standard ? [standard] : []);
}

/** A call's keys: the profiles of a provider, which one to use now, and which to set aside. */
export class KeyRing {
  private constructor(
    private readonly provider: string,
    readonly profiles: readonly KeyProfile[],
    private readonly file: string,
    private readonly now: () => number,
    private readonly until: Map<string, number>,
    private readonly variables: readonly string[],
  ) {}

  /**
   * The keys of `model`'s provider: the config's own `api_key`, else each variable that is set;
   * with none set, one empty profile named by the first variable (the error says it is not set).
   */
  static of(config: PaiConfig, model: Pick<ResolvedModel, 'provider' | 'apiKeyEnvs'>, env: NodeJS.ProcessEnv, home: string, now: () => number = Date.now): KeyRing {
    const inline = config.providers[model.provider]?.api_key;
    const names = model.apiKeyEnvs;
    const set = names.filter((name) => env[name]).map((name) => ({ name, key: env[name] }));
    const profiles: KeyProfile[] = inline ? [{ name: null, key: inline }] : set.length ? set : [{ name: names[0] ?? null, key: undefined }];
    const file = keyCooldownsPath(home);
    const until = new Map<string, number>();
    // Only a provider with a choice of keys has any to set aside.
    if (profiles.length > 1) {
      for (const [id, entry] of Object.entries(readCooldowns(file))) if (id.startsWith(`${model.provider}/`)) until.set(id, entry.until);
    }
    return new KeyRing(model.provider, profiles, file, now, until, inline ? [] : names);
  }

  /** There is another key to go on with when one is set aside. */
  get rotates(): boolean {
    return this.profiles.length > 1;
  }

  /** The variables the keys are in, for a message; null for the config's own key, or none. */
  get names(): string | null {
    return this.variables.length ? this.variables.join(', ') : null;
  }

  /** The key to use now: the first one not set aside; when every one is, the one back soonest. */
  current(): KeyProfile {
    return this.usable() ?? [...this.profiles].sort((a, b) => this.backAt(a) - this.backAt(b))[0]!;
  }

  /**
   * Sets `profile` aside after `error` (a refusal or a rate limit; see isKeyProblem) and returns
   * the key to go on with at once, or null when every key is set aside.
   */
  setAside(profile: KeyProfile, error: ModelError): KeyProfile | null {
    const rateLimited = error.kind === 'rate_limit';
    const wait = rateLimited ? Math.min(Math.max(error.retryAfterMs ?? RATE_LIMIT_COOLDOWN_MS, 1_000), MAX_COOLDOWN_MS) : REFUSAL_COOLDOWN_MS;
    const until = this.now() + wait;
    this.until.set(this.id(profile), until);
    try {
      const stored = readCooldowns(this.file);
      const now = this.now();
      const kept = Object.fromEntries(Object.entries(stored).filter(([, entry]) => entry.until > now));
      writeFileWhole(this.file, `${JSON.stringify({ ...kept, [this.id(profile)]: { until, reason: rateLimited ? 'rate_limit' : 'auth' } })}\n`);
    } catch {
      // Not kept for the next process: it tries this key once more, and sets it aside again.
    }
    return this.usable();
  }

  private usable(): KeyProfile | null {
    return this.profiles.find((profile) => this.backAt(profile) <= this.now()) ?? null;
  }

  private backAt(profile: KeyProfile): number {
    return this.until.get(this.id(profile)) ?? 0;
  }

  private id(profile: KeyProfile): string {
    return `${this.provider}/${profile.name ?? ''}`;
  }
}

/** A failure that is the key's, not the server's: another key may be let through. */
export function isKeyProblem(error: ModelError): boolean {
  // Status null: no key at all, refused before any request.
  return error.kind === 'rate_limit' || (error.kind === 'auth' && error.status !== null);
}

function readCooldowns(file: string): Cooldowns {
  try {
    const parsed = CooldownsSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : {};
  } catch {
    return {}; // none yet, or damaged: every key is tried
  }
}
