import * as z from 'zod/mini';
import type { ManageRequest } from '../../core/manage-requests.js';
import { isSystemAgentId } from '../identity.js';

/**
 * Who may manage what from a turn (issue 23 §1). A management request (core/manage-requests.ts)
 * is carried out only in the owner's direct chat — not a group, not another person's chat, not a
 * heartbeat nobody typed — and only for an agent whose config allows that kind of change. What
 * an agent may do to agents is bounded as well: never itself or a system agent (admin, warden,
 * maintainer, evolver; `theclaw up` keeps those), and only the config keys below.
 */

/** `manage:` in an agent's config. Absent: admin's defaults for admin, nothing for the others. */
export const ManageConfigSchema = z.strictObject({
  /** `agent init|start|stop|config set|identity set`, `agent status|list`, and reading the others' IDENTITY.md and USAGE.md. */
  agents: z._default(z.boolean(), false),
  /** `xgw route add|remove` and `xgw pair approve`: who reaches which agent. */
  routes: z._default(z.boolean(), false),
  /**
   * Channels, their tokens and API roots: never from a turn today (a turn that could point a
   * channel at its own server would get the bot's token); reserved, so that a config that sets it
   * says what it means.
   */
  channels: z._default(z.boolean(), false),
});
export type ManageRights = z.output<typeof ManageConfigSchema>;

export const ADMIN_RIGHTS: ManageRights = { agents: true, routes: true, channels: false };
const NO_RIGHTS: ManageRights = { agents: false, routes: false, channels: false };

/** What an agent may manage: its config's `manage:`, else admin's defaults for admin. */
export function manageRights(agent: string, configured: ManageRights | undefined): ManageRights {
  return configured ?? (agent === 'admin' ? ADMIN_RIGHTS : NO_RIGHTS);
}

/**
 * The config keys a turn may set with `agent config set`: how an agent talks and remembers.
 * Refused: `policy` (who may run what, the owner's approvals), `sandbox` (`profile: none` would
 * run every command outside the sandbox), `manage` (an agent would grant itself rights),
 * `budget` and `turn` (the owner's spending and time caps), `outbound` and `inbox` (where
 * replies go and messages come from), `browser` (its limits), `heartbeat` (`agent heartbeat`
 * sets timers), `agent_id` and `kind`. The owner sets those in the file.
 */
export const TURN_CONFIG_KEYS = [
  'pai.provider',
  'pai.model',
  'pai.fallbacks',
  'routing.default',
  'context.recent_messages',
  'context.keep_recent',
  'context.compaction_threshold',
  'context.memory_flush',
  'notices.error',
  'notices.delayed',
  'notices.delayed_after_seconds',
  'memory.embeddings.model',
  'concurrency',
  'queue.mode',
  'queue.debounce_ms',
  'max_turns',
  'retry.max_attempts',
  'deliver.max_attempts',
] as const;

/** The turn that asks: which agent, and whether it is the owner's direct chat. */
export interface AskingTurn {
  agent: string;
  ownerChat: boolean;
  rights: ManageRights;
}

/** Why a request is refused (exit 126), with how to get it done, or null when it may be carried out. */
export function refusal(request: ManageRequest, turn: AskingTurn): { reason: string; suggestion: string } | null {
  if (!turn.ownerChat) {
    return {
      reason: `${commandOf(request)} is carried out only in the owner's direct chat with ${turn.agent}, and this turn is not one`,
      suggestion: 'the owner can ask for it in their direct chat, or run it in a terminal',
    };
  }
  const right = rightOf(request);
  if (!turn.rights[right]) {
    return {
      reason: `${turn.agent} may not manage ${right} (manage.${right} is off in its config)`,
      suggestion: `the owner can set manage: { ${right}: true } in agents/${turn.agent}/config.yaml, or run it in a terminal`,
    };
  }
  const target = targetOf(request);
  if (target !== null && (target === turn.agent || isSystemAgentId(target)) && !(request.action === 'route_add' && target === turn.agent)) {
    return { reason: `${turn.agent} does not manage ${target === turn.agent ? 'itself' : `the system agent ${target}`}`, suggestion: 'the owner changes it in a terminal' };
  }
  if (request.action === 'agent_config_set' && !(TURN_CONFIG_KEYS as readonly string[]).includes(request.key)) {
    return {
      reason: `${request.key} is the owner's to set, not a turn's`,
      suggestion: `a turn may set ${TURN_CONFIG_KEYS.join(', ')}; the owner edits the rest in agents/${request.agent}/config.yaml`,
    };
  }
  return null;
}

function rightOf(request: ManageRequest): keyof ManageRights {
  switch (request.action) {
    case 'agent_init':
    case 'agent_start':
    case 'agent_stop':
    case 'agent_status':
    case 'agent_list':
    case 'agent_config_set':
    case 'agent_identity_set':
      return 'agents';
    case 'route_add':
    case 'route_remove':
    case 'pair_approve':
      return 'routes';
    default:
      return request satisfies never;
  }
}

/** The agent a request changes or routes to; null for one that reads, or changes no agent. */
function targetOf(request: ManageRequest): string | null {
  switch (request.action) {
    case 'agent_init':
    case 'agent_start':
    case 'agent_stop':
    case 'agent_config_set':
    case 'agent_identity_set':
    case 'route_add':
      return request.agent;
    default:
      return null;
  }
}

/** The command as the model typed it, for a refusal. */
export function commandOf(request: ManageRequest): string {
  return request.action.startsWith('agent_') ? `agent ${request.action.slice('agent_'.length).replace('_', ' ')}` : `xgw ${request.action.replace('_', ' ')}`;
}
