import type { Logger } from '../../core/logger.js';
import { resolveModel, type PaiConfig, type ResolvedModel } from '../../pai/index.js';
import { classifyFailure } from './failure.js';

/**
 * Model failover: the agent's model, then its `pai.fallbacks` in order. A call that fails with
 * an outage (the model unreachable after its own retries: 5xx, 429, network, timeout) goes on
 * with the next model, continuing the turn from its session, so commands already run are not run
 * again; a refusal (credentials, a bad request) is the answer, and no other model is asked. When
 * every model is out, the last outage stands (failure.ts: the message waits).
 */
export async function resolveFallbacks(config: PaiConfig, fallbacks: readonly string[], env: NodeJS.ProcessEnv, logger: Logger): Promise<ResolvedModel[]> {
  const models: ResolvedModel[] = [];
  for (const name of fallbacks) {
    try {
      models.push(await resolveModel(config, { model: name }, env));
    } catch (error) {
      logger.warn(`run: fallback model ${name} cannot be used (${error instanceof Error ? error.message : String(error)}); left out`);
    }
  }
  return models;
}

/**
 * Calls `call` with each model in turn until one answers or fails otherwise than by an outage;
 * `resume` is true after the first (the session holds the turn so far).
 */
export async function withFailover<T>(models: readonly ResolvedModel[], resume: boolean, logger: Logger, call: (model: ResolvedModel, resume: boolean) => Promise<T>): Promise<T> {
  for (let index = 0; ; index++) {
    const model = models[index]!;
    try {
      return await call(model, resume || index > 0);
    } catch (error) {
      const next = models[index + 1];
      const failure = classifyFailure(error);
      // A stopped turn (`/stop`, the turn limit) is no outage of this model.
      if (!next || failure.class !== 'outage' || failure.kind === 'aborted') throw error;
      logger.warn(`run: failed over from ${model.provider}/${model.model} to ${next.provider}/${next.model} (${failure.reason})`);
    }
  }
}
