import { chooseModel, type PaiConfig, type ReasoningLevel } from '../../pai/index.js';
import type { StoredThread } from '../../thread/index.js';
import type { AgentConfig, QueueMode } from '../types.js';
import { push } from '../threads.js';

/**
 * What a person set for their conversation with `/model`, `/think`, `/verbose` and `/queue`: kept as `session_setting` records in
 * the conversation's thread, so that it lives as long as the conversation and the latest wins.
 */
export const SETTING_SUBTYPE = 'session_setting';

export interface SessionSettings {
  /** `provider/model` chosen with `/model`; null: the agent's. */
  model: string | null;
  /** pi-ai's reasoning level asked with `/think`; null: off (none asked). */
  think: ReasoningLevel | null;
  /** `/verbose`: the commands a turn runs are shown in the chat while it runs (where the channel can). */
  verbose: boolean;
  /** `/queue`: how this conversation takes its messages (queue-mode.ts); null: the agent's. */
  queue: QueueMode | null;
}

const DEFAULTS: SessionSettings = { model: null, think: null, verbose: true, queue: null };
const THINK_LEVELS = ['off', 'low', 'medium', 'high'] as const;

/** The conversation's settings: each one's latest record, else the agent's default. */
export async function sessionSettings(thread: StoredThread): Promise<SessionSettings> {
  const settings = { ...DEFAULTS };
  for (const event of await thread.peek({ filter: `type = 'record' AND subtype = '${SETTING_SUBTYPE}'`, last: 1_000 })) {
    Object.assign(settings, JSON.parse(event.content) as Partial<SessionSettings>);
  }
  return settings;
}

export async function recordSetting(thread: StoredThread, setting: Partial<SessionSettings>): Promise<void> {
  await push(thread, { source: 'self', type: 'record', subtype: SETTING_SUBTYPE, content: JSON.stringify(setting) });
}

/**
 * The models a conversation may switch to: the agent's own and its fallbacks when it names a
 * model; else every model the pai config describes (an agent on pai's default may use any).
 */
export function allowedModels(config: AgentConfig, paiConfig: PaiConfig, env: NodeJS.ProcessEnv): string[] {
  if (config.pai.model !== undefined) {
    let own: string;
    try {
      const chosen = chooseModel(paiConfig, config.pai, env);
      own = `${chosen.provider}/${chosen.model ?? ''}`;
    } catch {
      own = config.pai.model;
    }
    return [...new Set([own, ...config.pai.fallbacks])];
  }
  const configured = Object.entries(paiConfig.providers).flatMap(([provider, entry]) => (entry.models ?? []).map((model) => `${provider}/${model.id}`));
  return [...new Set([...(paiConfig.default ? [paiConfig.default] : []), ...configured, ...config.pai.fallbacks])];
}

/** `/model`: the list and the current one; `/model <name>` switches; `/model default` goes back. */
export async function modelReply(thread: StoredThread, allowed: string[], current: string, argument: string | null): Promise<string> {
  const chosen = (await sessionSettings(thread)).model;
  if (argument === null) {
    return [
      `Model: ${current}${chosen === null ? " (the agent's)" : " (this conversation's)"}`,
      'Allowed:',
      ...allowed.map((name) => `- ${name}`),
      'Switch with /model <name>; /model default goes back.',
    ].join('\n');
  }
  if (argument.toLowerCase() === 'default') {
    await recordSetting(thread, { model: null });
    return "This conversation uses the agent's model again.";
  }
  // A bare model id names the allowed one with that id, when it is one.
  const matches = allowed.filter((name) => name === argument || name.endsWith(`/${argument}`));
  if (matches.length !== 1) {
    return `Error: ${matches.length === 0 ? `${argument} is not one of this agent's models` : `${argument} names more than one model`} - pick one of: ${allowed.join(', ')}`;
  }
  await recordSetting(thread, { model: matches[0]! });
  return `This conversation now uses ${matches[0]}.`;
}

/** `/think`: the level now; `/think off|low|medium|high` sets it for this conversation. */
export async function thinkReply(thread: StoredThread, argument: string | null): Promise<string> {
  const level = argument?.toLowerCase();
  if (level === undefined) return `Thinking: ${(await sessionSettings(thread)).think ?? 'off'}. Set it with /think ${THINK_LEVELS.join('|')}.`;
  if (!(THINK_LEVELS as readonly string[]).includes(level)) return `Error: ${argument} is not a thinking level - use /think ${THINK_LEVELS.join('|')}`;
  const think = level === 'off' ? null : (level as ReasoningLevel);
  await recordSetting(thread, { think });
  return think === null ? 'Thinking is off for this conversation.' : `Thinking is ${think} for this conversation (for a model that can reason).`;
}

/** `/verbose on|off`: whether this chat is shown the commands a turn runs. */
export async function verboseReply(thread: StoredThread, argument: string | null): Promise<string> {
  const word = argument?.toLowerCase();
  if (word === undefined) return `Verbose: ${(await sessionSettings(thread)).verbose ? 'on' : 'off'}. Set it with /verbose on|off.`;
  if (word !== 'on' && word !== 'off') return `Error: ${argument} is not on or off - use /verbose on|off`;
  await recordSetting(thread, { verbose: word === 'on' });
  return word === 'on' ? 'The commands the agent runs are shown in this chat.' : 'The commands the agent runs are no longer shown in this chat.';
}

/** The model this conversation's turns use: its `/model` choice, else the agent's. */
export async function conversationModel<M>(settings: SessionSettings, agentModel: M | Error, resolve: (choice: { model: string }) => Promise<M>): Promise<M | Error> {
  const chosen = settings.model;
  return chosen === null ? agentModel : await resolve({ model: chosen }).catch((error: unknown) => error as Error);
}
