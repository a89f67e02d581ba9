import { posix } from 'node:path';
import * as z from 'zod/mini';
import { parseAddress, type SourceAddress } from '../../core/address.js';
import { programName } from './command-wrappers.js';
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
 * where a pattern is a program's name and, optionally, its first arguments (`git status`; a last
 * word `*` adds nothing: `web *` is `web`); the
 * longest pattern a command starts with decides it. A command line gets the strictest decision
 * among the commands it runs (shell-commands.ts), what wrappers run included (`sudo rm`, `sh -c
 * 'curl x'`: command-wrappers.ts); one that cannot be read (a name computed at run time) is
 * asked about, or denied where `otherwise` is `deny`. A program that runs what it is given in
 * other ways (`bash script.sh`, `make`, `python -c`) still runs anything.
 */
export const TOOL_DECISIONS = ['allow', 'ask', 'deny'] as const;
export type ToolDecision = (typeof TOOL_DECISIONS)[number];

const STRICTNESS: Record<ToolDecision, number> = { allow: 0, ask: 1, deny: 2 };

const Patterns = z.optional(z.array(z.string().check(z.regex(/\S/, 'a pattern names a program'))));

const CommandRuleSchema = z.union([z.enum(TOOL_DECISIONS), z.strictObject({ allow: Patterns, ask: Patterns, deny: Patterns, otherwise: z._default(z.enum(TOOL_DECISIONS), 'ask') })]);
export type CommandRule = z.output<typeof CommandRuleSchema>;

/** The `peer` keywords of a rule: no agent may have these ids (`agent init` refuses them). */
export const PEER_KEYWORDS = ['owner', 'other'] as const;

const PolicyRuleSchema = z.strictObject({
  /** A channel type (`telegram`), one channel (`telegram:main`), or `agent` for other agents. */
  channel: z.optional(z.string()),
  /** `dm`, `group`, or another conversation type. */
  conversation: z.optional(z.string()),
  /** `owner`, `other` (PEER_KEYWORDS), or one sender's id (a peer id, or an agent id). */
  peer: z.optional(z.string()),
  bash: CommandRuleSchema,
});
export type PolicyRule = z.output<typeof PolicyRuleSchema>;

export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 300;

export const PolicySchema = z._default(
  z.strictObject({
    /**
     * The owner's peers besides the terminal and their own web chat (see isOwner), e.g. their
     * Telegram id or a guest web chat's peer: `<channel type>:<instance>:<peer id>`.
     */
    owners: z._default(z.array(z.string().check(z.regex(/^[^:]+:[^:]+:.+$/, 'write <channel type>:<instance>:<peer id>, e.g. telegram:main:123456'))), []),
    rules: z._default(z.array(PolicyRuleSchema), []),
    /** How long an `ask` waits for the owner before the command counts as denied. */
    approval_timeout_seconds: z._default(z.number().check(z.positive(), z.maximum(3600)), DEFAULT_APPROVAL_TIMEOUT_SECONDS),
  }),
  { owners: [], rules: [], approval_timeout_seconds: DEFAULT_APPROVAL_TIMEOUT_SECONDS },
);
/**
 * The policy as the runtime holds it: the agent's config, and the web chats that are the owner's
 * own (`webchat:<instance>`), which loadAgentConfig reads from xgw's config (ownerWebchats) —
 * never from the agent's config or a message, so no one chatting can make themselves the owner.
 */
export type Policy = z.output<typeof PolicySchema> & {
  readonly ownerWebchats?: readonly string[];
  /** The addresses the agent's `identities` link to an address in `owners` (identities.ts): the same person. */
  readonly linkedOwners?: readonly string[];
};

/** After the configured rules: the owner's direct chats run commands, nobody else's do. */
export const DEFAULT_RULES: readonly PolicyRule[] = [{ conversation: 'dm', peer: 'owner', bash: 'allow' }, { bash: 'deny' }];

/**
 * Whether a source address is one of the owner's: the terminal (the owner's shell, through xgw's
 * socket), the owner's own web chat (`policy.ownerWebchats`), or a peer listed in `policy.owners`
 * or linked to one of those (`policy.linkedOwners`). A web chat is a channel type, not a person: a
 * guest web chat's peers are not the owner.
 */
export function isOwner(policy: Policy, source: string | SourceAddress): boolean {
  const address = typeof source === 'string' ? safeParse(source) : source;
  if (address?.kind !== 'external') return false;
  if (address.channelType === 'terminal') return true;
  if (address.channelType === 'webchat' && policy.ownerWebchats?.includes(`webchat:${address.instance}`)) return true;
  const written = `${address.channelType}:${address.instance}:${address.peerId}`;
  return policy.owners.includes(written) || (policy.linkedOwners?.includes(written) ?? false);
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

/**
 * The longest command line a rule of patterns reads, in bytes. The parser's time grows with the
 * square of a line's length (a 160 KB line took 11-14 s; one at this limit takes under half a
 * second, see bench `policy`), and the turn waits for it; a script file, or a long file written
 * in parts, stays under it.
 */
export const MAX_READ_LINE_BYTES = 8 * 1024;

/** Why `line` is refused unread under `rule`, for the model; null when it is read. */
export function overReadLimit(rule: CommandRule, line: string): string | null {
  if (typeof rule === 'string') return null;
  const bytes = Buffer.byteLength(line);
  if (bytes <= MAX_READ_LINE_BYTES) return null;
  return `the command is ${Math.ceil(bytes / 1024)} KB, over the policy's limit of ${MAX_READ_LINE_BYTES / 1024} KB for reading a command: it did not run. Split it into shorter commands (write a long file in parts, appending with >>), or run a script file.`;
}

/** The decision for one command line (a line over MAX_READ_LINE_BYTES is denied unread). */
export function decide(rule: CommandRule, line: string): ToolDecision {
  if (typeof rule === 'string') return rule;
  if (overReadLimit(rule, line) !== null) return 'deny';
  const commands = commandsOf(line);
  if (commands === null || commands.length === 0) return strictest(rule.otherwise, 'ask');
  return commands.map((words) => decideOne(rule, words)).reduce(strictest);
}

/**
 * One command's decision: that of the longest pattern it starts with (`git push` over `git`),
 * the strictest among equally long ones. A program is matched by its name however its path is
 * written (`/usr/bin/../bin/curl` is `curl`); one outside the system's bin folders (`./ls`) may
 * be anything, and gets at least the rule's `otherwise`.
 */
function decideOne(rule: Exclude<CommandRule, string>, words: string[]): ToolDecision {
  const [program = '', ...args] = words;
  const named = [programName(program), ...args];
  let best: { length: number; decision: ToolDecision } | null = null;
  for (const decision of TOOL_DECISIONS) {
    for (const pattern of rule[decision] ?? []) {
      const [name = '', ...rest] = patternWords(pattern);
      if (!startsWith(named, [programName(name), ...rest])) continue;
      const length = rest.length + 1;
      if (best === null || length > best.length || (length === best.length && STRICTNESS[decision] > STRICTNESS[best.decision])) best = { length, decision };
    }
  }
  const decision = best?.decision ?? rule.otherwise;
  return program.includes('/') && !SYSTEM_PROGRAM.test(posix.normalize(program)) ? strictest(decision, rule.otherwise) : decision;
}

/**
 * A pattern's words. A last word `*` means "with any arguments", which a pattern means anyway
 * (`web *` is `web`, `git push *` is `git push`): people write it, and it must not be taken as a
 * literal `*` argument that no command has, which would leave the command to `otherwise`.
 */
export function patternWords(pattern: string): string[] {
  const words = pattern.trim().split(/\s+/);
  return words.length > 1 && words.at(-1) === '*' ? words.slice(0, -1) : words;
}

/** A path to a program the system installed, not one a command may have written. */
const SYSTEM_PROGRAM = /^\/(usr\/(local\/)?)?s?bin\/[^/]+$/;

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
    // Another agent is never the owner, whatever its id.
    return rule.peer === undefined || rule.peer === 'other' || (rule.peer !== 'owner' && rule.peer === address.agentId);
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
