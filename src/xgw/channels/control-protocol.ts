/**
 * What the owner's control page (src/xgw/page/control.ts) and the web chat's server say to each
 * other, and what the server asks of `theclaw`'s control runner (src/theclaw/control-runner.ts),
 * which reads and acts with the other tools' libraries. The page is type-checked against these
 * types in the browser's world, so this module imports nothing: the zod schema that checks an
 * action at the server's edge is control-source.ts's.
 *
 * - GET CONTROL_DATA_PATH, `Authorization: Bearer <token>` → ControlView
 * - GET CONTROL_CONVERSATION_PATH?agent=&thread=, the token likewise → ConversationView
 * - POST CONTROL_ACTION_PATH, the token likewise, the page's Origin, a JSON ControlAction →
 *   ControlOutcome (200), or `{error, suggestion}` with 400/404/409/500 as the failure's kind says
 */

export const CONTROL_PAGE_PATH = '/control';
export const CONTROL_DATA_PATH = '/control.json';
export const CONTROL_ACTION_PATH = '/control/action';
/** GET with `?agent=<id>&thread=<its path in the agent's directory>` → ConversationView. */
export const CONTROL_CONVERSATION_PATH = '/control/conversation';

/** Something the owner does on the page; each does what its command does (named on each). */
export type ControlAction =
  /** `agent start <agent>` */
  | { action: 'agent_start'; agent: string }
  /** `agent stop <agent>` */
  | { action: 'agent_stop'; agent: string }
  /** `agent init <agent>`, then `agent identity set <agent>` with an identity saying its purpose. */
  | { action: 'agent_create'; agent: string; purpose: string }
  /** `agent approve|deny <agent> <code>`: a command waiting under a policy `ask`, or a proposed change. */
  | { action: 'decide'; agent: string; code: string; approve: boolean }
  /** `xgw pair approve <code>`; denied, the request is dropped as `xgw peer revoke` drops it. */
  | { action: 'pairing_decide'; code: string; approve: boolean };

/** What an action did, said in a sentence for the page, and the page's data after it (one process for both). */
export interface ControlOutcome {
  text: string;
  view: ControlView;
}

export interface ControlAgent {
  id: string;
  /** `running`: a turn of it runs now; `started`: it takes messages; `broken`: its status cannot be read (error says why). */
  state: 'running' | 'started' | 'stopped' | 'broken';
  kind?: string;
  model?: string;
  last_activity?: string | null;
  /** Inbox messages not handled yet. */
  pending?: number;
  error?: string;
}

/** Something that waits for the owner's decision. */
export type WaitingItem =
  | { kind: 'command'; agent: string; code: string; command: string; conversation: string; expires_at: string }
  | { kind: 'proposal'; agent: string; code: string; file: string; summary: string; added: number; removed: number }
  | { kind: 'pairing'; code: string; channel: string; peer: string; peer_name?: string; expires_at: string };

/** One agent's model calls on one UTC day. */
export interface SpendDay {
  agent: string;
  /** YYYY-MM-DD (UTC). */
  day: string;
  calls: number;
  input_tokens: number;
  output_tokens: number;
  /** In the pai config's currency units (USD where prices are given per million tokens in USD). */
  cost: number;
}

/** An agent's cap on tokens a day (its config's `budget.daily_tokens`), and what it used of it today (UTC). */
export interface BudgetLeft {
  agent: string;
  daily_tokens: number;
  used_today: number;
}

export interface Spend {
  /** The days shown, today (UTC) last. */
  days: string[];
  /** Days with usage among them, newest first. */
  usage: SpendDay[];
  budgets: BudgetLeft[];
}

/** A message of a conversation: a person's (or another agent's), or the agent's answer. */
export interface ConversationMessage {
  id: number;
  at: string;
  from: 'person' | 'agent';
  /** Who wrote it (a source address: `telegram:main:777`, `self`). */
  source: string;
  text: string;
}

export interface ConversationSummary {
  agent: string;
  /** The conversation's thread, relative to the agent's directory (`threads/peers/telegram.main.777`). */
  thread: string;
  /** Its newest messages, oldest first. */
  last: ConversationMessage[];
}

/** One conversation, read-only: its newest messages, oldest first. */
export interface ConversationView {
  agent: string;
  thread: string;
  messages: ConversationMessage[];
}

/** Something wrong, and what fixes it. */
export interface Problem {
  /** Who says so: the maintainer's or the warden's report to the owner (an incident), or the system (a channel, a daemon not running). */
  from: 'maintainer' | 'warden' | 'system';
  /** When it was reported (incidents). */
  at?: string;
  /** What is wrong; a report says how to fix it too. */
  text: string;
  /** What fixes it, where `text` does not say. */
  fix?: string;
}

export interface ControlView {
  checked_at: string;
  agents: ControlAgent[];
  /** Oldest first, by kind: commands, proposals, pairings. */
  waiting: WaitingItem[];
  spend: Spend;
  /** Every agent's conversations, the most recent first. */
  conversations: ConversationSummary[];
  /** Channels and daemons not running, then the incidents of the last days, newest first. */
  problems: Problem[];
}
