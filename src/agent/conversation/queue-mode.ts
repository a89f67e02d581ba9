import { parseAddress } from '../../core/address.js';
import { ClawError } from '../../core/errors.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { chatCommandOf } from '../chat-commands.js';
import { QUEUE_MODES, type AgentConfig, type QueueMode, type ThreadRoute } from '../types.js';
import type { TurnPlan } from './conversation-queue.js';
import { recordSetting, sessionSettings } from './session-settings.js';

/**
 * Queue modes: how a conversation takes the messages that come close together or while a turn
 * runs, as people type them (issue 23 §3). Only a person's messages are taken together; a chat
 * command is always answered on its own, in its place, and an agent's message or the runtime's
 * own (a reminder, a task's result) is a turn of its own.
 * - `collect`: a person's messages that come within `queue.debounce_ms` of each other become one
 *   turn with all of them, and one answer (planTurn); what comes while a turn runs is collected
 *   for the next one.
 * - `steer`: what comes while a turn runs joins it before its next model call, after the current
 *   commands (run.ts gives the turn `joining`); what comes after its last call is a turn of its own.
 * - `followup`: each message its own turn, after the running one, in order.
 * - `interrupt`: a new message stops the running turn (as `/stop` does) and is answered instead.
 * The default is `collect` in a person's direct chat, where one person types in bursts;
 * `followup` in a group (several people's messages, each asking something of its own), another
 * agent's conversation, and the API (each request waits for its own answer).
 */
export const QUEUE_MODE_ENV = 'THECLAW_QUEUE_MODE';

const DESCRIPTIONS: Record<QueueMode, string> = {
  collect: 'messages that come close together are one turn with one answer',
  steer: 'a message that comes while the agent works is given to it before its next step',
  followup: 'each message is answered on its own, in order',
  interrupt: 'a new message stops what the agent is doing and is answered instead',
};

/**
 * The default mode of every agent whose config names none, from THECLAW_QUEUE_MODE, or undefined.
 * The test suite's homes set `followup` there: one message, one turn, no debounce to wait out.
 */
export function queueModeFromEnv(env: NodeJS.ProcessEnv): QueueMode | undefined {
  const value = env[QUEUE_MODE_ENV];
  if (value === undefined || value === '') return undefined;
  if (!isQueueMode(value)) throw new ClawError('usage', `${QUEUE_MODE_ENV}=${value} is not a queue mode`, { suggestion: `set it to one of ${QUEUE_MODES.join(', ')}, or unset it` });
  return value;
}

/** The agent's own mode (`queue.mode`), else THECLAW_QUEUE_MODE's, or undefined: by the kind of conversation. */
export function agentQueueMode(config: AgentConfig, env: NodeJS.ProcessEnv): QueueMode | undefined {
  return config.queue.mode ?? queueModeFromEnv(env);
}

/** A conversation's mode: its `/queue`, else the agent's (agentQueueMode), else by the kind of conversation. */
export function queueMode(chosen: QueueMode | null, agentMode: QueueMode | undefined, route: ThreadRoute, source: string): QueueMode {
  return chosen ?? agentMode ?? (isPersonsDirectChat(route, source) ? 'collect' : 'followup');
}

/** A person's message that may be taken into another's turn: no chat command, no agent's or the runtime's. */
export function mayJoin(event: Pick<ThreadEvent, 'source' | 'content'>): boolean {
  return isPerson(event.source) && chatCommandOf(event) === null;
}

/**
 * The next turn of a conversation from the messages that wait for it: in `collect`, the person's
 * messages at its head, once `debounceMs` have passed since the newest came in (a newer one
 * starts the wait again); else the first message, at once.
 */
export function planTurn(mode: QueueMode, waiting: readonly Pick<ThreadEvent, 'source' | 'content' | 'created_at'>[], debounceMs: number): TurnPlan {
  let count = 0;
  if (mode === 'collect') while (count < waiting.length && mayJoin(waiting[count]!)) count++;
  if (count === 0) return { count: 1, notBefore: 0 };
  return { count, notBefore: Date.parse(waiting[count - 1]!.created_at) + debounceMs };
}

/** `/queue`: the mode and the choices; `/queue <mode>` sets it for this conversation; `/queue default` goes back. */
export async function queueReply(thread: StoredThread, argument: string | null, agentMode: QueueMode, debounceMs: number): Promise<string> {
  const word = argument?.toLowerCase();
  if (word === undefined) {
    const chosen = (await sessionSettings(thread)).queue;
    const mode = chosen ?? agentMode;
    return [
      `Queue mode: ${describeQueueMode(mode, debounceMs)}${chosen === null ? " (the agent's)" : " (this conversation's)"}`,
      'Modes:',
      ...QUEUE_MODES.map((name) => `- ${name}: ${DESCRIPTIONS[name]}`),
      'Set it with /queue <mode>; /queue default goes back.',
    ].join('\n');
  }
  if (word === 'default') {
    await recordSetting(thread, { queue: null });
    return `This conversation takes its messages as the agent does again (${agentMode}).`;
  }
  if (!isQueueMode(word)) return `Error: ${argument} is not a queue mode - use /queue ${QUEUE_MODES.join('|')}|default`;
  await recordSetting(thread, { queue: word });
  return `Queue mode: ${word} for this conversation: ${DESCRIPTIONS[word]}.`;
}

/** The mode as `/status` says it: `collect` with its debounce. */
export function describeQueueMode(mode: QueueMode, debounceMs: number): string {
  return mode === 'collect' ? `collect, debounce ${debounceMs / 1000} s` : mode;
}

function isQueueMode(value: string): value is QueueMode {
  return (QUEUE_MODES as readonly string[]).includes(value);
}

function isPerson(source: string): boolean {
  try {
    return parseAddress(source).kind === 'external';
  } catch {
    return false;
  }
}

/** One person's direct chat on a channel where they type: not the API, whose every request waits for its own answer. */
function isPersonsDirectChat(route: ThreadRoute, source: string): boolean {
  if (route.kind !== 'peer') return false;
  try {
    const address = parseAddress(source);
    return address.kind === 'external' && address.channelType !== 'api';
  } catch {
    return false;
  }
}
