import { parseAddress } from '../core/address.js';
import { parseMessageContent } from '../core/message.js';
import {
  isOwnerDirectChat,
  loadAgentConfig,
  NO_USAGE,
  plusUsage,
  proposedFile,
  storedConversationThreads,
  usageOfRecord,
  withAgentThread,
  type AgentDir,
  type DecisionRecord,
  type ErrorRecord,
  type ProposalFile,
  type UsageTotals,
} from '../agent/index.js';
import type { ThreadEvent } from '../thread/index.js';

/**
 * What the evolver's reflection gives the model about one agent's day (evolver.ts): its
 * IDENTITY.md and agent memory, which every conversation of the agent reads already; counts of
 * what happened, errors by kind (not their text: a provider's message may quote what it was
 * sent); and the owner's corrections, in their own words from their own direct chats. Never what anyone else said: what the model proposes may
 * end up in the agent's memory, which every conversation reads.
 */
export interface DayDigest {
  agent: string;
  since: string;
  until: string;
  /** Messages from people and from other agents, and in how many conversations. */
  messages: number;
  conversations: number;
  replies: number;
  decisions: Record<string, number>;
  commands: number;
  failedCommands: number;
  usage: UsageTotals;
  /** `stage kind (status)`, and how many. */
  errors: { what: string; count: number }[];
  corrections: string[];
  files: { file: ProposalFile; text: string; tooLong: boolean }[];
}

/** A file longer than this is shown cut, and not offered for a rewrite (the middle would be lost). */
export const MAX_FILE_CHARS = 16_000;
const MAX_CORRECTIONS = 10;
const CORRECTION_CHARS = 300;
/** What an owner's message that corrects the agent tends to say: cheap, and it errs towards including. */
const CORRECTION = /\b(no|not|don'?t|do not|never|always|stop|wrong|instead|actually|i said|i told you|remember|should(?:n'?t)?|please)\b/i;

/** The agent's day from its conversation threads in the home's store (its SQLite files, or PostgreSQL). */
export async function dayDigest(home: string, dir: AgentDir, since: string, until: string, env: NodeJS.ProcessEnv = process.env): Promise<DayDigest> {
  const { policy } = loadAgentConfig(dir);
  const digest: DayDigest = {
    agent: dir.id,
    since,
    until,
    messages: 0,
    conversations: 0,
    replies: 0,
    decisions: {},
    commands: 0,
    failedCommands: 0,
    usage: NO_USAGE,
    errors: [],
    corrections: [],
    files: (['IDENTITY.md', 'memory/agent.md'] as const).map((file) => {
      const { text } = proposedFile(dir, file);
      return { file, text, tooLong: text.length > MAX_FILE_CHARS };
    }),
  };
  const errors = new Map<string, number>();
  // Filters take only literals; since and until are ISO times made here, never a person's text.
  const filter = `created_at >= '${since}' AND created_at < '${until}'`;
  for (const path of await storedConversationThreads(home, dir, env)) {
    const events = await withAgentThread(home, path, (thread) => thread.peek({ filter, limit: 1_000_000 }), env);
    const inbound = events.filter((event) => event.type === 'message' && event.source !== 'self');
    digest.messages += inbound.length;
    if (inbound.length > 0) digest.conversations++;
    for (const event of events) {
      if (event.type === 'message' && event.source === 'self') digest.replies++;
      if (event.type !== 'record') continue;
      const record = parse(event.content);
      if (event.subtype === 'usage') digest.usage = plusUsage(digest.usage, usageOfRecord(event.content) ?? NO_USAGE);
      if (event.subtype === 'toolcall') {
        digest.commands++;
        if (record?.exit_code !== 0) digest.failedCommands++;
      }
      if (event.subtype === 'decision') {
        const { decision } = (record ?? {}) as Partial<DecisionRecord>;
        if (decision) digest.decisions[decision] = (digest.decisions[decision] ?? 0) + 1;
      }
      if (event.subtype === 'error') {
        const error = (record ?? {}) as Partial<ErrorRecord>;
        const what = [error.stage ?? 'unknown', error.kind, error.status ? `(${error.status})` : undefined].filter(Boolean).join(' ');
        errors.set(what, (errors.get(what) ?? 0) + 1);
      }
    }
    for (const event of inbound) {
      if (!isOwnerDirectChat(policy, event.source) || parseAddress(event.source).kind !== 'external') continue;
      const text = messageText(event);
      if (text && !text.startsWith('/') && CORRECTION.test(text)) digest.corrections.push(text.slice(0, CORRECTION_CHARS));
    }
  }
  digest.errors = [...errors].map(([what, count]) => ({ what, count }));
  digest.corrections = digest.corrections.slice(-MAX_CORRECTIONS);
  return digest;
}

/** The digest as the model reads it. */
export function digestText(digest: DayDigest): string {
  const decisions = Object.entries(digest.decisions).map(([decision, count]) => `${decision} ${count}`);
  const usage = digest.usage;
  return [
    `Agent: ${digest.agent}`,
    `Period: ${digest.since} to ${digest.until} (UTC)`,
    '',
    '## What happened',
    `- messages: ${digest.messages} in ${digest.conversations} conversation(s); answers: ${digest.replies}${decisions.length ? `; ${decisions.join(', ')}` : ''}`,
    `- commands run: ${digest.commands} (${digest.failedCommands} failed)`,
    `- model: ${usage.calls} call(s), ${usage.input_tokens} input and ${usage.output_tokens} output tokens`,
    ...(digest.errors.length ? digest.errors.map((e) => `- error ${e.what}: ${e.count} time(s)`) : ['- no errors']),
    '',
    "## The owner's corrections (their own words, in their direct chats)",
    ...(digest.corrections.length ? digest.corrections.map((text) => `- ${JSON.stringify(text)}`) : ['- none']),
    ...digest.files.flatMap(({ file, text, tooLong }) => [
      '',
      `## ${file}${tooLong ? ` (too long to rewrite here: shown cut, do not propose a change to it)` : ''}`,
      '<<<',
      tooLong ? `${text.slice(0, MAX_FILE_CHARS)}\n[...]` : text || '(empty)',
      '>>>',
    ]),
  ].join('\n');
}

function parse(content: string): Record<string, unknown> | null {
  try {
    return JSON.parse(content) as Record<string, unknown>;
  } catch {
    return null;
  }
}

function messageText(event: ThreadEvent): string {
  try {
    return parseMessageContent(event.content).text.trim();
  } catch {
    return '';
  }
}
