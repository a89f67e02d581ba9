import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as z from 'zod/mini';
import { ensureDir } from '../../core/home.js';
import { isContainedPathError, readTextContained, writeContained } from '../../core/contained-fs.js';
import { yaml } from '../../core/config.js';
import { errnoCode } from '../../core/errors.js';
import { lineDiff } from '../../core/line-diff.js';
import { withStoragePath } from '../../core/storage-error.js';
import { agentDir, listAgentIds, type AgentDir } from '../agent-dir.js';
import { newCode, writeFirst } from './approvals.js';
import { FeedWriter } from '../accounting/index.js';

/**
 * Proposed changes to an agent's own files (the evolver's daily reflection makes them), which
 * change nothing until the owner approves. A proposal is one file, `agents/<id>/proposals/<code>.md`,
 * for people and for the code alike: YAML front matter (what it changes, the file's hash when it
 * was made), why, the diff, and after a marker line the whole new text. The sandbox can read
 * the agent's directory but not write `proposals/`.
 *
 * The owner decides with `/approve <code>` or `/deny <code>` (owner-approval.ts), or `agent
 * approve|deny <agent> <code>`; the first decision counts, as for approvals (approvals.ts).
 * Applying keeps the file as it was in `<code>.before.md`, writes the new text, and records the
 * change in the `proposals` feed; a file that changed since the proposal was made is not
 * overwritten (the proposal is `stale`).
 */
export const PROPOSAL_FILES = ['IDENTITY.md', 'memory/agent.md'] as const;
export type ProposalFile = (typeof PROPOSAL_FILES)[number];

const FrontMatterSchema = z.strictObject({
  code: z.string(),
  agent: z.string(),
  file: z.enum(PROPOSAL_FILES),
  summary: z.string(),
  created_at: z.string(),
  /** The file's SHA-256 when the proposal was made ('' for a file that did not exist). */
  base_sha256: z.string(),
  added: z.number(),
  removed: z.number(),
});

export type Proposal = z.output<typeof FrontMatterSchema> & {
  /** The whole new text of the file. */
  text: string;
};

const DecisionSchema = z.strictObject({ outcome: z.enum(['applied', 'rejected', 'stale']), by: z.string(), at: z.string() });
export type ProposalDecision = z.output<typeof DecisionSchema>;

const TEXT_MARKER = '<!-- the proposed file: everything below this line -->\n';

export function proposalsDir(dir: AgentDir): string {
  return join(dir.root, 'proposals');
}

/**
 * The file's path in the agent directory, and its text ('' when it does not exist, and when it is
 * a link: memory/ is writable in the agent's sandbox, and the evolver's model reads this text).
 */
export function proposedFile(dir: AgentDir, file: ProposalFile): { path: string; text: string } {
  const path = join(dir.root, file);
  try {
    return { path, text: readTextContained(dir.root, path) };
  } catch (error) {
    if (isContainedPathError(error)) return { path, text: '' };
    throw error;
  }
}

export function createProposal(dir: AgentDir, change: { file: ProposalFile; summary: string; text: string }, now = new Date()): Proposal {
  const root = proposalsDir(dir);
  return withStoragePath(root, () => {
    ensureDir(root);
    const before = proposedFile(dir, change.file).text;
    const text = change.text.endsWith('\n') ? change.text : `${change.text}\n`;
    const diff = lineDiff(before, text);
    for (;;) {
      const proposal: Proposal = {
        code: newCode(),
        agent: dir.id,
        file: change.file,
        summary: change.summary.trim(),
        created_at: now.toISOString(),
        base_sha256: sha256(before),
        added: diff.added,
        removed: diff.removed,
        text,
      };
      const { text: _, ...front } = proposal;
      const fence = '`'.repeat(Math.max(3, ...[...diff.text.matchAll(/`+/g)].map((run) => run[0].length + 1)));
      const body = [
        `---\n${yaml().stringify(front)}---`,
        `# Proposal ${proposal.code}: ${dir.id}'s ${change.file} (+${diff.added} -${diff.removed} lines)`,
        '',
        proposal.summary,
        '',
        `Apply it: /approve ${proposal.code} in your chat with admin, or agent approve ${dir.id} ${proposal.code} (the file as it was is kept). Drop it: /deny ${proposal.code}, or agent deny ${dir.id} ${proposal.code}.`,
        '',
        '## The change',
        '',
        `${fence}diff\n${diff.text}\n${fence}`,
        '',
        `## The new ${change.file}`,
        '',
        TEXT_MARKER + text,
      ].join('\n');
      // A code taken already (by chance) is drawn again.
      if (writeFirst(join(root, `${proposal.code}.md`), body)) return proposal;
    }
  });
}

/** The proposal with this code (any case), or null. */
export function readProposal(dir: AgentDir, code: string): Proposal | null {
  if (!/^[a-z0-9]{1,32}$/i.test(code)) return null;
  let content: string;
  try {
    content = readFileSync(join(proposalsDir(dir), `${code.toLowerCase()}.md`), 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
  const front = /^---\n([\s\S]*?)\n---\n/.exec(content);
  const marker = content.indexOf(TEXT_MARKER);
  if (!front || marker < 0) return null;
  const parsed = FrontMatterSchema.safeParse(yaml().parse(front[1]!));
  return parsed.success && parsed.data.agent === dir.id ? { ...parsed.data, text: content.slice(marker + TEXT_MARKER.length) } : null;
}

export function proposalDecision(dir: AgentDir, code: string): ProposalDecision | null {
  try {
    return DecisionSchema.parse(JSON.parse(readFileSync(decisionFile(dir, code), 'utf8')));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
}

/** Proposals not yet decided, oldest first. */
export function pendingProposals(dir: AgentDir): Proposal[] {
  let names: string[];
  try {
    names = readdirSync(proposalsDir(dir));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  }
  return names
    .flatMap((name) => /^([a-z0-9]+)\.md$/.exec(name)?.[1] ?? [])
    .flatMap((code) => (proposalDecision(dir, code) === null ? (readProposal(dir, code) ?? []) : []))
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** The agent whose proposal has this code, among `agents` (default: all), and the proposal. */
export function findProposal(home: string, code: string, agents = listAgentIds(home)): { dir: AgentDir; proposal: Proposal } | null {
  for (const id of agents) {
    const dir = agentDir(home, id);
    const proposal = readProposal(dir, code);
    if (proposal) return { dir, proposal };
  }
  return null;
}

export interface ProposalOutcome {
  proposal: Proposal;
  decision: ProposalDecision;
  /** Whether this call decided it (else it was decided before). */
  mine: boolean;
  /** Where the file as it was is kept, once applied. */
  before: string;
  /** The copy in the `proposals` feed, written in passing; settles (never rejects) once stored or given up. */
  recorded: Promise<void>;
}

/**
 * Applies or rejects a proposal; the first decision counts. Applying writes the decision first,
 * then the file, so that a decider that dies in between leaves a decision the next call for the
 * same code completes (the file is written while it still is the one the proposal was made
 * from). Recorded in the `proposals` feed (once, by its idempotency key).
 */
export function decideProposal(home: string, dir: AgentDir, proposal: Proposal, approve: boolean, by: string, now = new Date()): ProposalOutcome {
  const current = proposedFile(dir, proposal.file);
  const fits = sha256(current.text) === proposal.base_sha256 || current.text === proposal.text;
  const outcome = !approve ? 'rejected' : fits ? 'applied' : 'stale';
  const mine = writeFirst(decisionFile(dir, proposal.code), JSON.stringify({ outcome, by, at: now.toISOString() } satisfies ProposalDecision));
  const decision = proposalDecision(dir, proposal.code)!;
  const before = join(proposalsDir(dir), `${proposal.code}.before.md`);
  if (decision.outcome === 'applied' && current.text !== proposal.text && sha256(current.text) === proposal.base_sha256) {
    withStoragePath(current.path, () => {
      // The text read, not the file copied: a link a command left in its place is never followed.
      writeFileSync(before, current.text, { mode: 0o600 });
      writeContained(dir.root, current.path, proposal.text);
    });
  }
  // A copy for the evolver's feed, written in passing (the thread store is async): the decision file is the record.
  const feeds = new FeedWriter(home, dir.id);
  const change = { agent: dir.id, code: proposal.code, file: proposal.file, outcome: decision.outcome, by: decision.by, ...(decision.outcome === 'applied' ? { before } : {}) };
  const recorded = feeds
    .append('proposals', 'change', change, `decided:${dir.id}:${proposal.code}`)
    .then(
      () => {},
      () => {},
    )
    .finally(() => feeds.close());
  return { proposal, decision, mine, before, recorded };
}

/** What the owner is told of a decision, in their chat or terminal. */
export function describeOutcome({ proposal, decision, mine, before }: ProposalOutcome, home: string): string {
  const what = `${proposal.agent}'s ${proposal.file}`;
  if (!mine) return `Proposal ${proposal.code} (${what}) was ${decision.outcome} before, by ${decision.by}.`;
  switch (decision.outcome) {
    case 'applied':
      return `Applied: ${what} (+${proposal.added} -${proposal.removed} lines). The file as it was is kept in ${relative(home, before)}.`;
    case 'rejected':
      return `Dropped: proposal ${proposal.code} (${what}); the file is unchanged.`;
    case 'stale':
      return `Not applied: ${what} changed since proposal ${proposal.code} was made; the file is unchanged.`;
  }
}

function decisionFile(dir: AgentDir, code: string): string {
  return join(proposalsDir(dir), `${code}.decision.json`);
}

function sha256(text: string): string {
  return text === '' ? '' : createHash('sha256').update(text).digest('hex');
}
