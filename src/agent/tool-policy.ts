import * as z from 'zod/mini';
import { parseAddress, type SourceAddress } from '../core/address.js';
import { commandsOf } from './shell-commands.js';

/**
 * Who may have the agent run what (config `policy`). Each message is answered under the rule of
 * the first entry of `policy.rules` that matches where it came from (channel, conversation type,
 * sender), then under the defaults: the owner's direct chats `allow`, everything else `deny`.
 *
 * - `allow`: bash_exec runs the command (in the agent's sandbox).
 * - `deny`: the command is refused with exit code 126; a rule that denies everything leaves the
 *   model without the tool, and it answers without commands.
 * - `ask`: the owner is asked in their own chat (approvals.ts); the command runs once approved.
 *
 * A rule may decide by command instead: `{ allow: [...], ask: [...], deny: [...], otherwise }`,
 * where a pattern is a program's name and, optionally, its first arguments (`git status`). A
 * command line gets the strictest decision among the commands it runs (shell-commands.ts); one
 * that cannot be read (a name computed at run time) is asked about, or denied where `otherwise`
 * is `deny`. Patterns name programs, not what they do: a program that runs others (`env`,
 * `xargs`, `find -exec`, `sh -c`) runs whatever it is given.
 */
export const TOOL_DECISIONS = ['allow', 'ask', 'deny'] as const;
export type ToolDecision = (typeof TOOL_DECISIONS)[number];

const STRICTNESS: Record<ToolDecision, number> = { allow: 0, ask: 1, deny: 2 };

const Patterns = z.optional(z.array(z.string().check(z.regex(/\S/, 'a pattern names a program'))));

const CommandRuleSchema = z.union([z.enum(TOOL_DECISIONS), z.strictObject({ allow: Patterns, ask: Patterns, deny: Patterns, otherwise: z._default(z.enum(TOOL_DECISIONS), 'ask') })]);
export type CommandRule = z.output<typeof CommandRuleSchema>;

const PolicyRuleSchema = z.strictObject({
  /** A channel type (`telegram`), one channel (`telegram:main`), or `agent` for other agents. */
  channel: z.optional(z.string()),
  /** `dm`, `group`, or another conversation type. */
  conversation: z.optional(z.string()),
  /** `owner`, `other`, or one sender's id (a peer id, or an agent id). */
  peer: z.optional(z.string()),
  bash: CommandRuleSchema,
});
export type PolicyRule = z.output<typeof PolicyRuleSchema>;

export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 300;

export const PolicySchema = z._default(
  z.strictObject({
    /**
     * The owner's peers besides the web chat and the terminal, which are the owner's alone (the
     * web chat asks for the owner's token): `<channel type>:<instance>:<peer id>`.
     */
    owners: z._default(z.array(z.string().check(z.regex(/^[^:]+:[^:]+:.+$/, 'write <channel type>:<instance>:<peer id>, e.g. telegram:main:123456'))), []),
    rules: z._default(z.array(PolicyRuleSchema), []),
    /** How long an `ask` waits for the owner before the command counts as denied. */
    approval_timeout_seconds: z._default(z.number().check(z.positive(), z.maximum(3600)), DEFAULT_APPROVAL_TIMEOUT_SECONDS),
  }),
  { owners: [], rules: [], approval_timeout_seconds: DEFAULT_APPROVAL_TIMEOUT_SECONDS },
);
export type Policy = z.output<typeof PolicySchema>;

/** After the configured rules: the owner's direct chats run commands, nobody else's do. */
export const DEFAULT_RULES: readonly PolicyRule[] = [{ conversation: 'dm', peer: 'owner', bash: 'allow' }, { bash: 'deny' }];

/** Channels whose every peer is the owner: the web chat needs the owner's token, the terminal is the owner's shell. */
const OWNER_CHANNELS = new Set(['webchat', 'terminal']);

/** Whether a source address is one of the owner's. */
export function isOwner(policy: Policy, source: string | SourceAddress): boolean {
  const address = typeof source === 'string' ? safeParse(source) : source;
  if (address?.kind !== 'external') return false;
  return OWNER_CHANNELS.has(address.channelType) || policy.owners.includes(`${address.channelType}:${address.instance}:${address.peerId}`);
}

/** The owner's direct chat, where approval requests can go. */
export function isOwnerDirectChat(policy: Policy, source: string): boolean {
  const address = safeParse(source);
  return address?.kind === 'external' && address.conversationType === 'dm' && isOwner(policy, address);
}

/** The rule a message from `source` is answered under. */
export function commandRuleFor(policy: Policy, source: string): CommandRule {
  const address = safeParse(source);
  if (!address || address.kind === 'self') return 'deny';
  for (const rule of [...policy.rules, ...DEFAULT_RULES]) if (matches(policy, rule, address)) return rule.bash;
  return 'deny';
}

/** Whether the model gets bash_exec at all under this rule. */
export function offersTools(rule: CommandRule): boolean {
  return rule !== 'deny';
}

/**
 * The runtime fact about commands, so that the model neither claims a shell it lacks nor is
 * surprised by a refusal: where they run (sandbox-profile.ts sandboxFact), and what the policy
 * makes of them here.
 */
export function commandsFact(rule: CommandRule, where: string): string {
  if (rule === 'deny') return "none in this conversation (the owner's policy): I answer without running anything";
  return rule === 'allow' ? `run ${where}` : `run ${where}; some need the owner's approval first, and a refused one exits 126`;
}

/** The decision for one command line. */
export function decide(rule: CommandRule, line: string): ToolDecision {
  if (typeof rule === 'string') return rule;
  const commands = commandsOf(line);
  if (commands === null || commands.length === 0) return strictest(rule.otherwise, 'ask');
  return commands.map((words) => decideOne(rule, words)).reduce(strictest);
}

function decideOne(rule: Exclude<CommandRule, string>, words: string[]): ToolDecision {
  const listed = (patterns: string[] | undefined) => (patterns ?? []).some((pattern) => startsWith(words, pattern.trim().split(/\s+/)));
  if (listed(rule.deny)) return 'deny';
  if (listed(rule.allow)) return 'allow';
  if (listed(rule.ask)) return 'ask';
  return rule.otherwise;
}

function startsWith(words: string[], pattern: string[]): boolean {
  return pattern.length <= words.length && pattern.every((word, i) => words[i] === word);
}

function strictest(a: ToolDecision, b: ToolDecision): ToolDecision {
  return STRICTNESS[a] >= STRICTNESS[b] ? a : b;
}

function matches(policy: Policy, rule: PolicyRule, address: Exclude<SourceAddress, { kind: 'self' }>): boolean {
  if (address.kind === 'internal') {
    if (rule.channel !== undefined && rule.channel !== 'agent') return false;
    if (rule.conversation !== undefined && rule.conversation !== address.conversationType) return false;
    return rule.peer === undefined || rule.peer === 'other' || rule.peer === address.agentId;
  }
  if (rule.channel !== undefined && rule.channel !== address.channelType && rule.channel !== `${address.channelType}:${address.instance}`) return false;
  if (rule.conversation !== undefined && rule.conversation !== address.conversationType) return false;
  if (rule.peer === undefined) return true;
  const owner = isOwner(policy, address);
  return rule.peer === 'owner' ? owner : rule.peer === 'other' ? !owner : rule.peer === address.peerId;
}

function safeParse(source: string): SourceAddress | null {
  try {
    return parseAddress(source);
  } catch {
    return null;
  }
}
