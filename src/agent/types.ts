import * as z from 'zod/mini';
import { parseDuration } from '../core/duration.js';
import { HOST_NAME } from '../core/host.js';
import { BrowserLimitsSchema, DEFAULT_BROWSER_LIMITS } from '../browser/index.js';
import { DM_SCOPES, IdentitiesSchema } from './identities.js';
import { ManageConfigSchema } from './policy/manage-policy.js';
import { PolicySchema, type Policy } from './policy/tool-policy.js';

/**
 * An agent is a directory (`$THECLAW_HOME/agents/<id>/`): IDENTITY.md (who it is, its system
 * prompt), USAGE.md (how others use it), config.yaml, an inbox thread, conversation threads,
 * sessions, three layers of memory, a workdir and logs. It is not a process: notifier starts
 * `agent run <id>` when its inbox has messages, and `agent deliver` when a thread has replies.
 */

export const SANDBOX_PROFILES = ['sandbox', 'workspace-only', 'none'] as const;
export type SandboxProfile = (typeof SANDBOX_PROFILES)[number];

export const ROUTING_MODES = ['per-peer', 'per-channel', 'per-agent'] as const;
export type RoutingMode = (typeof ROUTING_MODES)[number];

/**
 * How a conversation takes messages that come close together or while a turn runs
 * (conversation/queue-mode.ts): `collect` makes the messages that come within the debounce one
 * turn; `steer` gives a running turn the messages that come before its next model call;
 * `followup` answers each in its own turn, in order; `interrupt` stops the running turn for the
 * newest message.
 */
export const QUEUE_MODES = ['collect', 'steer', 'followup', 'interrupt'] as const;
export type QueueMode = (typeof QUEUE_MODES)[number];

/** Milliseconds `collect` waits after a person's message for the next one. */
export const DEFAULT_QUEUE_DEBOUNCE_MS = 1_500;

/** The three memory layers: memory/agent.md, memory/user-<peer>.md, memory/thread-<tid>.md. */
export type MemoryLayer = 'agent' | 'person' | 'conversation';

export const DEFAULT_MEMORY_CAPS: Record<MemoryLayer, number> = { agent: 2_000, person: 1_000, conversation: 1_500 };

// Room for the truncation marker at least.
const memoryCap = z.int().check(z.minimum(100));

/** What the person is told when a message gets no answer; `{reason}` says why in a few words. */
export const DEFAULT_ERROR_NOTICE = 'I could not answer: {reason}. The owner has been told.';
/** What the person is told once while the model is unreachable; the answer follows when it is back. */
export const DEFAULT_DELAYED_NOTICE = 'The model is not answering right now; I will answer as soon as it is back.';

const providerModel = z.string().check(z.regex(/^[^/\s]+\/\S+$/, 'must be provider/model, e.g. openai/gpt-4o-mini'));

/** `deliver.max_attempts`: its default, and the most it may be. */
export const DEFAULT_DELIVER_ATTEMPTS = 3;
export const MAX_DELIVER_ATTEMPTS = 100;

export const DEFAULT_MEMORY_SEARCH = { vector_weight: 0.7, half_life_days: 30 };

/** What a heartbeat checks when its config gives no prompt of its own. */
export const DEFAULT_HEARTBEAT_PROMPT = 'Check whether anything needs my owner now: what I was asked to watch, what is due. If nothing does, answer HEARTBEAT_OK.';

/** Heartbeats more often than this would cost more than they can be worth. */
export const MIN_HEARTBEAT_MS = 60_000;

function isHeartbeatInterval(text: string): boolean {
  try {
    return parseDuration(text) >= MIN_HEARTBEAT_MS;
  } catch {
    return false;
  }
}

/** `HH:MM-HH:MM`, local time, the end not included; an end before the start runs past midnight (`22:00-06:00`, `08:00-00:00`). */
export const ACTIVE_HOURS_PATTERN = /^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$/;

/** A turn of the agent's own on a timer, that tells the owner what needs them (heartbeat.ts). */
export const HeartbeatConfigSchema = z.strictObject({
  /** How often, as notifier takes it: `30m`, `1h`, `2h30m`. */
  every: z.string().check(z.refine(isHeartbeatInterval, 'must be a duration of at least 1m, like 30m, 1h or 2h30m')),
  /** The checklist the agent goes through; default DEFAULT_HEARTBEAT_PROMPT. */
  prompt: z.optional(z.string().check(z.minLength(1), z.maxLength(4000))),
  /** A cheaper model for heartbeats (`provider/model`); default: the agent's. */
  model: z.optional(providerModel),
  /** Beats outside these hours (this machine's local time) are skipped; default: always. */
  active_hours: z.optional(
    z.string().check(
      z.regex(ACTIVE_HOURS_PATTERN, 'must be HH:MM-HH:MM, e.g. 08:00-22:00'),
      z.refine((text) => text.slice(0, 5) !== text.slice(6), 'must not start and end at the same time'),
    ),
  ),
});
export type HeartbeatConfig = z.output<typeof HeartbeatConfigSchema>;

/** What each sandboxed call may use unless the agent's config says otherwise. */
export const SANDBOX_LIMIT_DEFAULTS = { processes: 512, memory_mb: 4096, file_size_mb: 1024, tmp_mb: 512, disk_mb: 4096 };

/** Per call; each limit's mechanism is in pai/sandbox-limits.ts. */
const SandboxLimitsSchema = z._default(
  z.strictObject({
    /** Processes and threads running at once. */
    processes: z._default(z.int().check(z.minimum(16)), SANDBOX_LIMIT_DEFAULTS.processes),
    /** Data (heap and private writable memory) of each process. */
    memory_mb: z._default(z.int().check(z.minimum(64)), SANDBOX_LIMIT_DEFAULTS.memory_mb),
    /** The largest file a command may write. */
    file_size_mb: z._default(z.int().check(z.positive()), SANDBOX_LIMIT_DEFAULTS.file_size_mb),
    /** The sandbox's own /tmp (in memory). */
    tmp_mb: z._default(z.int().check(z.positive()), SANDBOX_LIMIT_DEFAULTS.tmp_mb),
    /** What the agent's writable directories hold together. */
    disk_mb: z._default(z.int().check(z.positive()), SANDBOX_LIMIT_DEFAULTS.disk_mb),
  }),
  SANDBOX_LIMIT_DEFAULTS,
);

export const AgentConfigSchema = z.strictObject({
  agent_id: z.string(),
  kind: z._default(z.enum(['system', 'user']), 'user'),
  pai: z._default(
    z.strictObject({
      /** Default: pai's own default (its config, a provider key, or the offline mock). */
      provider: z.optional(z.string().check(z.minLength(1))),
      model: z.optional(z.string().check(z.minLength(1))),
      /**
       * Models tried in order (`provider/model`) when the one before is unreachable (an outage:
       * 5xx, 429, network, timeout, after its own retries); a refusal (401, 400) is not passed on.
       */
      fallbacks: z._default(z.array(providerModel), []),
    }),
    { fallbacks: [] },
  ),
  inbox: z._default(z.strictObject({ path: z.optional(z.string()) }), {}),
  /** Memory search (memory-index.ts): by words alone, or hybrid with embeddings. */
  memory: z._default(
    z.strictObject({
      /**
       * `provider/model` of an OpenAI-compatible /embeddings endpoint (pai's providers): chunks and
       * messages get vectors, and a search ranks by meaning too. None: by words only.
       */
      embeddings: z.optional(z.strictObject({ model: providerModel })),
      search: z._default(
        z.strictObject({
          /** A hit's score is this share of its vector similarity and the rest of its word match. */
          vector_weight: z._default(z.number().check(z.gte(0), z.lte(1)), DEFAULT_MEMORY_SEARCH.vector_weight),
          /** A dated note (memory/daily/YYYY-MM-DD.md) counts half as much this many days later; 0: never less. */
          half_life_days: z._default(z.number().check(z.gte(0)), DEFAULT_MEMORY_SEARCH.half_life_days),
        }),
        DEFAULT_MEMORY_SEARCH,
      ),
    }),
    { search: DEFAULT_MEMORY_SEARCH },
  ),
  /** Tokens a day (UTC) the agent may use, in all and per person or conversation (budget.ts); none: no cap. */
  budget: z._default(
    z.strictObject({
      daily_tokens: z.optional(z.int().check(z.positive())),
      per_peer_daily_tokens: z.optional(z.int().check(z.positive())),
    }),
    {},
  ),
  routing: z._default(
    z.strictObject({
      default: z._default(z.enum(ROUTING_MODES), 'per-peer'),
      /** Under per-peer: `person` gives a linked person (`identities`) one direct thread for all their addresses. */
      dm_scope: z._default(z.enum(DM_SCOPES), 'peer'),
    }),
    { default: 'per-peer', dm_scope: 'peer' },
  ),
  /** People on several channels: a name and the addresses they write from (identities.ts). */
  identities: IdentitiesSchema,
  outbound: z._default(z.array(z.strictObject({ thread_pattern: z.string(), via: z.string() })), [{ thread_pattern: '**', via: 'xgw' }]),
  /**
   * Where hosts share a PostgreSQL store: the host whose notifier runs this agent (its directory is
   * there; placement.ts). None: the host it is started on. Unused on SQLite.
   */
  placement: z.optional(z.strictObject({ host: z.string().check(z.regex(HOST_NAME, 'must be a host name (see THECLAW_HOST)')) })),
  /** Conversation threads handled at once; messages of one thread always in order. */
  concurrency: z._default(z.int().check(z.positive(), z.maximum(64)), 4),
  /**
   * How its conversations take their messages (QUEUE_MODES); a conversation's `/queue` wins.
   * `mode` absent: `collect` in a person's direct chat, `followup` in groups, other agents' and
   * the API's conversations (queue-mode.ts). `debounce_ms`: how long `collect` waits for the next message.
   */
  queue: z._default(
    z.strictObject({
      mode: z.optional(z.enum(QUEUE_MODES)),
      debounce_ms: z._default(z.int().check(z.gte(0), z.lte(60_000)), DEFAULT_QUEUE_DEBOUNCE_MS),
    }),
    { debounce_ms: DEFAULT_QUEUE_DEBOUNCE_MS },
  ),
  /** Recoverable LLM errors are retried up to this many attempts. */
  retry: z._default(z.strictObject({ max_attempts: z._default(z.int().check(z.positive(), z.maximum(10)), 3) }), { max_attempts: 3 }),
  /** A reply that cannot be delivered this many times is recorded as an error and skipped. */
  deliver: z._default(z.strictObject({ max_attempts: z._default(z.int().check(z.positive(), z.maximum(MAX_DELIVER_ATTEMPTS)), DEFAULT_DELIVER_ATTEMPTS) }), { max_attempts: DEFAULT_DELIVER_ATTEMPTS }),
  /**
   * Background tasks it starts (`agent delegate`, tasks.ts): at most `max_running` at once;
   * `max_depth` 1: a task may not start another; each given up after `timeout_seconds`.
   */
  tasks: z._default(
    z.strictObject({
      max_running: z._default(z.int().check(z.positive(), z.maximum(50)), 3),
      max_depth: z._default(z.int().check(z.positive(), z.maximum(5)), 1),
      timeout_seconds: z._default(z.number().check(z.positive()), 1800),
    }),
    { max_running: 3, max_depth: 1, timeout_seconds: 1800 },
  ),
  /**
   * What the person is told when the model fails (src/agent/failure.ts). `{reason}` (a few words
   * of ours, never the provider's text, e.g. "the model refused the request (401)") and `{status}`
   * (the HTTP status, or nothing) are filled in.
   */
  notices: z._default(
    z.strictObject({
      /** Instead of an answer, when the message cannot be answered (refused, no such model, config broken). */
      error: z._default(z.string().check(z.minLength(1)), DEFAULT_ERROR_NOTICE),
      /** Once per message, when the model has been unreachable this long; the answer follows when it is back. */
      delayed: z._default(z.string().check(z.minLength(1)), DEFAULT_DELAYED_NOTICE),
      /** Seconds a message waits for an unreachable model (from its arrival) before the delayed notice. */
      delayed_after_seconds: z._default(z.number().check(z.gte(0)), 20),
    }),
    { error: DEFAULT_ERROR_NOTICE, delayed: DEFAULT_DELAYED_NOTICE, delayed_after_seconds: 20 },
  ),
  context: z._default(
    z.strictObject({
      /** Recent messages of the thread put into each call. */
      recent_messages: z._default(z.int().check(z.positive(), z.maximum(500)), 30),
      /** Compact when the estimated context passes this share of the model's window. */
      compaction_threshold: z._default(z.number().check(z.gt(0), z.lte(1)), 0.7),
      /** Messages kept verbatim after a compaction. */
      keep_recent: z._default(z.int().check(z.positive()), 6),
      /**
       * Tokens of each memory layer put into the system prompt (estimated at 4 characters a
       * token). An agent, person or group file over its cap is condensed after the turn
       * (memory-condense.ts); until then, or when that fails, it loses its middle there, with a
       * marker, and one warning record.
       */
      /**
       * Before a compaction, one call writes the lasting facts of the turns it folds to the
       * person's (or group's) memory file and a note to its daily notes (memory-flush.ts).
       */
      memory_flush: z._default(z.boolean(), true),
      memory_caps: z._default(
        z.strictObject({
          agent: z._default(memoryCap, DEFAULT_MEMORY_CAPS.agent),
          person: z._default(memoryCap, DEFAULT_MEMORY_CAPS.person),
          conversation: z._default(memoryCap, DEFAULT_MEMORY_CAPS.conversation),
        }),
        DEFAULT_MEMORY_CAPS,
      ),
    }),
    { recent_messages: 30, compaction_threshold: 0.7, keep_recent: 6, memory_flush: true, memory_caps: DEFAULT_MEMORY_CAPS },
  ),
  /**
   * The turn of one message (turn-attempts.ts): ended by the agent after `timeout_seconds` (model
   * calls and commands killed, an error notice sent); given up with an error notice once
   * `max_attempts` turns at it were cut off (the run killed or crashed). notifier's
   * handler_timeout_seconds is the outer guard and should be larger.
   */
  turn: z._default(
    z.strictObject({
      timeout_seconds: z._default(z.number().check(z.positive()), 600),
      max_attempts: z._default(z.int().check(z.positive(), z.maximum(100)), 3),
    }),
    { timeout_seconds: 600, max_attempts: 3 },
  ),
  /**
   * Where bash_exec runs the model's commands (sandbox-profile.ts): `sandbox` (bubblewrap: the
   * system read-only, THECLAW_HOME hidden but what the turn's conversation may see, its workdir
   * and memory writable), `workspace-only` (only its workdir writable), or `none` (as the daemons' user, with
   * their files; doctor warns). `network: false` leaves the commands without any network, loopback
   * included, nor the system's Unix sockets (/run). `limits`: what each call may use
   * (pai/sandbox-limits.ts); none under `none`.
   */
  sandbox: z._default(
    z.strictObject({
      profile: z._default(z.enum(SANDBOX_PROFILES), 'sandbox'),
      network: z._default(z.boolean(), true),
      limits: SandboxLimitsSchema,
    }),
    { profile: 'sandbox', network: true, limits: SANDBOX_LIMIT_DEFAULTS },
  ),
  /** Who may have the agent run what, and the owner's approvals (tool-policy.ts). */
  policy: PolicySchema,
  /** What the agent may manage from the owner's direct chat (manage-policy.ts); absent: admin's defaults for admin, nothing for others. */
  manage: z.optional(ManageConfigSchema),
  /** The agent's browser (`browser` in its commands): idle time, pages, memory, navigation timeout. */
  browser: z._default(BrowserLimitsSchema, DEFAULT_BROWSER_LIMITS),
  /** Tool rounds per message. */
  max_turns: z._default(z.int().check(z.positive()), 20),
  /** None by default: set with `agent heartbeat <id> --every 30m`. */
  heartbeat: z.optional(HeartbeatConfigSchema),
});

/** An agent's config as loaded (agent-dir.ts): its policy knows the owner's web chats too. */
export type AgentConfig = Omit<z.output<typeof AgentConfigSchema>, 'policy'> & { policy: Policy };

/**
 * The kinds of conversation thread: one person's direct messages (`peer`), those of a channel or of
 * everyone (`channel`, `main`, as the routing mode says), one group conversation (`group`), or one
 * conversation of another agent that asks this one (`agent`).
 */
export type ThreadKind = 'peer' | 'channel' | 'main' | 'group' | 'agent';

/** Where a message goes: a conversation thread of the agent. */
export interface ThreadRoute {
  /** Stable id: names the session file and the thread memory file. */
  threadId: string;
  /** Absolute directory of the thread. */
  path: string;
  kind: ThreadKind;
  /** The sender's memory file (user-<peerKey>.md); null in a group, for an agent, and where the sender is not known. */
  peerKey: string | null;
  /** A group's own memory file (group-<groupKey>.md), in place of a person's; null outside groups. */
  groupKey: string | null;
}

/** Content of the records the runtime writes (type `record`). */
export interface ToolcallRecord {
  in_reply_to: number;
  command: string;
  comment?: string;
  exit_code: number;
  output: string;
  duration_ms: number;
}

export interface UsageRecord {
  in_reply_to: number;
  provider: string;
  model: string;
  /** The variable of the key the call used (pai's auth profiles), never the key; absent for none. */
  profile?: string;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  duration_ms: number;
  /** The runtime's upkeep the call was for (accounting.ts); none: the turn's answer. */
  purpose?: UpkeepPurpose;
}

/** What an upkeep call is for: a compaction's summary, the memory flush, an over-cap memory file's rewrite, `/new`'s summary. */
export type UpkeepPurpose = 'compaction' | 'memory_flush' | 'memory_rewrite' | 'new_conversation';

export interface ErrorRecord {
  in_reply_to?: number;
  /** `turn`: the runtime gave the turn up (over the turn limit, or cut off too often). */
  /** `transcription`: a voice message could not be transcribed (voice.ts). */
  stage: 'llm' | 'turn' | 'route' | 'deliver' | 'compaction' | 'memory' | 'internal' | 'transcription';
  /** Something went wrong but the message was still answered (a memory file over its cap). */
  severity?: 'warning';
  error: string;
  kind?: string;
  status?: number | null;
  event_id?: number;
}

/** A turn at a message began (`ended` absent), or ended without an outcome through no fault of the message. */
export interface AttemptRecord {
  in_reply_to: number;
  /** 1, 2, ...: the turns at this message. */
  attempt: number;
  /** `waits`: the model was unavailable; the message waits, and this attempt does not count. */
  ended?: 'waits';
}

/** One heartbeat begun (heartbeat.ts): what it runs on. Its usage, commands and outcome answer it. */
export interface HeartbeatRecord {
  model: string;
  /** Whether it was offered bash_exec (the policy of the owner's direct chat). */
  tools: boolean;
}

export interface CompactionRecord {
  from_id: number;
  to_id: number;
  summary_file: string;
  summary_chars: number;
}

/**
 * `record/memory`: the runtime wrote a memory file. Paths are relative to the agent's directory.
 * `flush` (memory-flush.ts): lasting facts of the turns `from_id`..`to_id`, about to be compacted,
 * appended to the conversation's person or group file, and notes to that file's daily notes.
 */
export interface MemoryFlushRecord {
  action: 'flush';
  from_id: number;
  to_id: number;
  file: string;
  /** The lines for the file (`- …`); those it already held are not added again. */
  lines: string[];
  daily_file: string;
  daily_lines: string[];
  /** When the last of the turns was said: names the daily file and dates the lines. */
  at: string;
}

/** `condense` (memory-condense.ts): a file over its cap rewritten shorter, the old version archived. */
export interface MemoryCondenseRecord {
  action: 'condense';
  file: string;
  layer: MemoryLayer;
  /** The version condensed (memory-store.ts memoryVersion). */
  version: string;
  archive: string;
  tokens_before: number;
  tokens_after: number;
  cap: number;
}

export type MemoryRecord = MemoryFlushRecord | MemoryCondenseRecord;

export type DecisionRecord =
  | { in_reply_to: number; decision: 'no_reply' }
  /** A heartbeat's finding, put into the owner's direct chat (heartbeat.ts); `in_reply_to` is the beat's record. */
  | { in_reply_to: number; decision: 'told_owner'; text: string }
  /** The turn was ended by `/stop`, or by a newer message (queue mode interrupt): that inbox event's id. */
  | { in_reply_to: number; decision: 'stopped'; stopped_by_inbox_id: number }
  /** The message joined the turn of another (queue modes collect and steer), whose outcome answers both: its thread event id. */
  | { in_reply_to: number; decision: 'joined'; turn_of: number };

/**
 * `/new` or `/reset`: a fresh conversation in the same thread. Its history starts after `to_id`
 * (the command); the old messages stay in the thread.
 */
export interface ResetRecord {
  to_id: number;
  command: 'new' | 'reset';
  /** Where `/new` saved the summary of the old conversation (relative to memory/); null when nothing was saved. */
  summary_file: string | null;
  /** `/new` without a model: only the old thread summary was saved; why the summariser failed. */
  summary_error?: string;
}
