import { isClawError } from '../core/errors.js';
import { loadPaiConfig, resolveModel } from '../pai/models.js';
import type { ResolvedModel } from '../pai/index.js';
import { estimateTokens } from './tokens.js';
import type { AgentConfig } from './types.js';

/**
 * The smallest window an agent can work in: its identity (IDENTITY.md, which no cap cuts), each
 * memory layer at its cap, and a reserve for the rest of a call — the runtime facts, the tool's
 * definition and the message (MESSAGE_RESERVE) and the reply (the model's max_output_tokens, which
 * providers count against the window). With less, a conversation overflows before it begins:
 * `agent init` refuses such a model and `theclaw doctor` reports it.
 */
export const MESSAGE_RESERVE = 1_000;

export interface WindowShortage {
  model: string;
  window: number;
  needed: number;
  /** How `needed` adds up, for the message. */
  parts: string;
}

export function windowShortage(identity: string, config: AgentConfig, model: ResolvedModel): WindowShortage | null {
  const identityTokens = estimateTokens(identity);
  const caps = Object.values(config.context.memory_caps).reduce((sum, cap) => sum + cap, 0);
  const reserve = MESSAGE_RESERVE + model.maxOutputTokens;
  const needed = identityTokens + caps + reserve;
  if (needed <= model.contextWindow) return null;
  return {
    model: `${model.provider}/${model.model}`,
    window: model.contextWindow,
    needed,
    parts: `identity ${identityTokens} + memory caps ${caps} + ${reserve} for the message and the reply`,
  };
}

export function describeShortage(shortage: WindowShortage): string {
  return `the model ${shortage.model} has a window of ${shortage.window} tokens, less than the ${shortage.needed} this agent needs (${shortage.parts})`;
}

/**
 * The model the agent's calls would use, or null when it cannot be resolved (an unknown provider
 * or model, a broken pai config): `agent run` records that for each message, and doctor's config
 * check reports the config.
 */
export async function agentModel(home: string, config: AgentConfig, env: NodeJS.ProcessEnv): Promise<ResolvedModel | null> {
  try {
    return await resolveModel(loadPaiConfig(home), config.pai, env);
  } catch (error) {
    if (isClawError(error)) return null;
    throw error;
  }
}
