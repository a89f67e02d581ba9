import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { evolverStatePath } from '../core/layout.js';
import * as z from 'zod/mini';
import {
  agentDir,
  classifyFailure,
  createProposal,
  FeedWriter,
  listAgentIds,
  loadAgentConfig,
  NO_USAGE,
  pendingProposals,
  plusUsage,
  PROPOSAL_FILES,
  REPORTS_AGENT,
  tellOwnerOf,
  type ErrorFeedEntry,
  type Proposal,
  type UsageTotals,
} from '../agent/index.js';
import { ensureDir } from '../core/home.js';
import { lineDiff } from '../core/line-diff.js';
import { chat, loadPaiConfig, MOCK_PROVIDER, resolveModel, type ModelChoice } from '../pai/index.js';
import { dayDigest, digestText, MAX_FILE_CHARS } from './evolver-digest.js';

/**
 * The evolver's daily reflection (`theclaw evolve`, on the notifier timer `evolver-daily` that
 * `theclaw up` registers): for each agent that had messages since the last reflection, the model
 * (the evolver agent's, else pai's default) reads a digest of its day (evolver-digest.ts) and may
 * propose a new IDENTITY.md or memory/agent.md. Each proposal is stored for the owner
 * (agent/proposals.ts), who is told in their direct chat with that agent — else with admin,
 * without the diff, so that nothing of one agent's files lands where another agent reads — with
 * a short summary and how to apply it. Nothing changes until the owner approves. An agent with a
 * proposal still waiting is left alone: one open question at a time.
 *
 * A model that fails is reported like any agent's error (the maintainer's feed), and the next
 * reflection covers only its own day: the model is not paid twice for one.
 */
export interface EvolveResult {
  since: string;
  until: string;
  agents: ReflectionOutcome[];
  usage: UsageTotals;
  /** Why there was no reflection at all. */
  skipped?: string;
}

export interface ReflectionOutcome {
  agent: string;
  outcome: 'inactive' | 'waiting' | 'nothing' | 'proposed' | 'failed';
  proposals: { code: string; file: string; summary: string; told: boolean }[];
  detail?: string;
}

const DAY_MS = 24 * 3600 * 1000;
/** The diff goes into the chat up to this length; a longer one is read in the proposal's file. */
const DIFF_IN_CHAT = 1_500;

export const EVOLVER_PROMPT = `You are evolver, the self-improvement reviewer of TheClaw, a personal agent system. You read what one agent did in a day and may propose a better version of its IDENTITY.md (who it is, how it works: its system prompt) or its memory/agent.md (what it learned about doing its job).
Propose a change only where the day shows a need: a correction from the owner, a recurring error, a rule the agent kept missing. Keep what works; change as little as you can; keep the files short (every call of the agent carries them). Never add anything about a person other than the owner, and never a secret.
Answer with JSON only, no prose: {"proposals": [{"file": "IDENTITY.md" or "memory/agent.md", "summary": "one sentence: what changes and why", "text": "the whole new file"}]}, at most one proposal per file; {"proposals": []} when nothing needs to change.`;

const AnswerSchema = z.object({
  proposals: z.array(z.object({ file: z.enum(PROPOSAL_FILES), summary: z.string().check(z.minLength(1)), text: z.string().check(z.minLength(1)) })).check(z.maxLength(PROPOSAL_FILES.length)),
});

export async function evolve(home: string, env: NodeJS.ProcessEnv = process.env): Promise<EvolveResult> {
  const until = new Date().toISOString();
  const since = lastReflection(home) ?? new Date(Date.parse(until) - DAY_MS).toISOString();
  const config = loadPaiConfig(home);
  const model = await resolveModel(config, evolverModel(home), env);
  const result: EvolveResult = { since, until, agents: [], usage: NO_USAGE };
  // The offline mock echoes: it has nothing to say about anyone's day.
  if (model.provider === MOCK_PROVIDER) return { ...result, skipped: 'the model is the offline mock (no provider key)' };
  const feeds = new FeedWriter(home, 'evolver', env);
  try {
    for (const id of listAgentIds(home)) {
      const dir = agentDir(home, id);
      const waiting = pendingProposals(dir);
      if (waiting.length > 0) {
        result.agents.push({ agent: id, outcome: 'waiting', proposals: [], detail: `proposal ${waiting.map((p) => p.code).join(', ')} waits for the owner` });
        continue;
      }
      const digest = await dayDigest(home, dir, since, until, env);
      if (digest.messages === 0) {
        result.agents.push({ agent: id, outcome: 'inactive', proposals: [] });
        continue;
      }
      let text: string;
      try {
        const reply = await chat({ input: digestText(digest), system: EVOLVER_PROMPT, tools: false, config, home, env, provider: model.provider, model: model.model });
        const usage = { calls: 1, input_tokens: reply.usage.input, output_tokens: reply.usage.output, cost: reply.usage.cost };
        result.usage = plusUsage(result.usage, usage);
        await feeds.append('proposals', 'usage', { agent: id, provider: model.provider, model: model.model, ...usage });
        text = reply.text;
      } catch (error) {
        const failure = classifyFailure(error);
        await feeds.append('errors', 'error', { agent: 'evolver', thread: id, stage: 'reflection', kind: failure.kind, status: failure.status, reason: failure.reason } satisfies ErrorFeedEntry);
        result.agents.push({ agent: id, outcome: 'failed', proposals: [], detail: failure.reason });
        continue;
      }
      const answer = parseAnswer(text);
      if (answer === null) {
        result.agents.push({ agent: id, outcome: 'failed', proposals: [], detail: "the model's answer was not the JSON asked for" });
        continue;
      }
      const proposals = answer.proposals.filter((change) => {
        const file = digest.files.find((f) => f.file === change.file)!;
        return !file.tooLong && change.text.length <= MAX_FILE_CHARS && change.text.trimEnd() !== file.text.trimEnd();
      });
      const made = [];
      for (const change of proposals) {
        const proposal = createProposal(dir, change);
        await feeds.append('proposals', 'proposal', { agent: id, code: proposal.code, file: proposal.file, summary: proposal.summary, added: proposal.added, removed: proposal.removed });
        made.push({ code: proposal.code, file: proposal.file, summary: proposal.summary, told: await tell(home, proposal, digest.files.find((f) => f.file === change.file)!.text) });
      }
      result.agents.push({ agent: id, outcome: made.length ? 'proposed' : 'nothing', proposals: made });
    }
  } finally {
    await feeds.close();
  }
  saveReflection(home, until);
  return result;
}

/** Tells the owner in their chat with the agent, with the diff; else in their chat with admin, without it. */
async function tell(home: string, proposal: Proposal, before: string): Promise<boolean> {
  const head = `evolver: a proposed change to ${proposal.agent}'s ${proposal.file} (+${proposal.added} -${proposal.removed} lines), from its day: ${proposal.summary}`;
  const path = `agents/${proposal.agent}/proposals/${proposal.code}.md`;
  const how = (where: string) =>
    `Reply /approve ${proposal.code} ${where}to apply it (the file as it is now is kept) or /deny ${proposal.code} to drop it; in a terminal: agent approve ${proposal.agent} ${proposal.code}. The whole proposal: ${path}.`;
  const diff = lineDiff(before, proposal.text).text;
  const own = [head, diff.length <= DIFF_IN_CHAT ? diff : `(the diff is long: read it in ${path})`, how('')].join('\n');
  const key = `evolver:${proposal.agent}:${proposal.code}`;
  return (
    (await tellOwnerOf(home, proposal.agent, own, 'approval', key)) || (proposal.agent !== REPORTS_AGENT && (await tellOwnerOf(home, REPORTS_AGENT, [head, how('here ')].join('\n'), 'approval', key)))
  );
}

/** The JSON the model was asked for, found in its answer (a model may wrap it in a code fence), or null. */
function parseAnswer(text: string): z.output<typeof AnswerSchema> | null {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end < start) return null;
  try {
    const parsed = AnswerSchema.safeParse(JSON.parse(text.slice(start, end + 1)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The evolver agent's model when it has one in its config, else pai's default. */
function evolverModel(home: string): ModelChoice {
  const dir = agentDir(home, 'evolver');
  if (!existsSync(dir.config)) return {};
  const { provider, model } = loadAgentConfig(dir).pai;
  return { ...(provider && { provider }), ...(model && { model }) };
}

function lastReflection(home: string): string | null {
  try {
    const { until } = JSON.parse(readFileSync(evolverStatePath(home), 'utf8')) as { until?: unknown };
    return typeof until === 'string' && !Number.isNaN(Date.parse(until)) ? until : null;
  } catch {
    return null;
  }
}

function saveReflection(home: string, until: string): void {
  const file = evolverStatePath(home);
  ensureDir(join(file, '..'));
  writeFileSync(`${file}.tmp`, JSON.stringify({ until }), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}
