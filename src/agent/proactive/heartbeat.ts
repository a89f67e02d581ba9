import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { joinCommand } from '../../core/command.js';
import { ClawError } from '../../core/errors.js';
import { resolveHome } from '../../core/home.js';
import { tryLock } from '../../core/lock.js';
import { createLogger, type Logger } from '../../core/logger.js';
import { cliPath } from '../../core/package.js';
import { createRedactor } from '../../core/secrets.js';
import { turnOutbox } from '../../core/turn-outbox.js';
import { TurnRegistry } from '../../core/turn-processes.js';
import { loadPaiConfig, providerSecrets, resolveModel, type ChatResult, type ModelCaller } from '../../pai/index.js';
import type { StoredThread } from '../../thread/index.js';
import { HEARTBEAT_THREAD_ID, loadAgentConfig, requireAgent, type AgentDir } from '../agent-dir.js';
import { estimateTokens } from '../tokens.js';
import { SpendLedger, feedCopier, FeedWriter, type ErrorFeedEntry, type ToolcallFeedEntry } from '../accounting/index.js';
import { agentMemoryFile, identityText } from '../context.js';
import { classifyFailure, callModel, turnRecorder, withAgentSettings } from '../turn/index.js';
import { INBOX_CONSUMER } from '../lifecycle.js';
import { commandAuthorizer, ownerDirectChat, tellOwnerOf } from '../conversation/index.js';
import { setReminders } from './reminders.js';
import { takeAttachments } from '../delivery/index.js';
import { commandRuleFor, commandsFact, offersTools, sandboxFact, type TurnScope } from '../policy/index.js';
import { DEFAULT_HEARTBEAT_PROMPT, type AgentConfig, type DecisionRecord, type ErrorRecord, type HeartbeatConfig, type HeartbeatRecord } from '../types.js';
import { openAgentThread, push, recordWriter, withAgentThread } from '../threads.js';

/**
 * Heartbeats: a turn of the agent's own on a notifier timer (`agent heartbeat <id> --every 30m`
 * sets it; the timer runs `agent heartbeat <id> --now`), that looks whether anything needs the
 * owner and tells them in their direct chat with the agent — or, mostly, finds nothing and says
 * nothing. Made to cost the minimum:
 *
 * - Skipped entirely (no model call, nothing written but a log line) while the agent is stopped,
 *   over its day's budget (budget.ts), outside its active hours, or while the owner has no direct
 *   chat with it — where a finding would go, and whose policy its commands follow.
 * - A small prompt: the head of IDENTITY.md, the checklist, the time, and the last thing a
 *   heartbeat told the owner (so that it is not told again). No person's memory, no
 *   conversation's history.
 * - Optionally a cheaper model than the agent's (`heartbeat.model`); no failover: a beat the model
 *   misses is followed by the next.
 * - An answer of HEARTBEAT_OK (alone, or with a few words), NO_REPLY or nothing sends nothing: a
 *   decision record is all that is left of it.
 *
 * Privacy: a heartbeat runs in its own thread, threads/heartbeat/, never in a person's
 * conversation. Its commands run under the rule of the owner's direct chat (tool-policy.ts),
 * since a heartbeat is the agent acting for its owner, as it does in that chat; a command that
 * rule asks about waits for the owner's approval there. A finding goes into that chat like an
 * answer (owner-notice.ts), so that the owner's reply has it as context.
 */
export const HEARTBEAT_OK = 'HEARTBEAT_OK';

/** What may come with HEARTBEAT_OK and still be nothing to report (OpenClaw's ackMaxChars). */
export const ACK_MAX_CHARS = 300;
/** The head of IDENTITY.md a heartbeat gets: who the agent is, not all of how it works. */
const IDENTITY_BRIEF_CHARS = 600;
/** The last finding the next heartbeat is reminded of, at most. */
const LAST_FINDING_CHARS = 500;

/** The notifier timer of an agent's heartbeat: `hb-<agent>`, within a timer id's 63 characters. */
export function heartbeatTimerId(agent: string): string {
  const id = `hb-${agent}`;
  return id.length <= 63 ? id : `hb-${agent.slice(0, 50)}-${createHash('sha256').update(agent).digest('hex').slice(0, 8)}`;
}

/** What the timer runs: absolute paths, like the handlers `agent start` stores, so that it runs warm. */
export function heartbeatCommand(agent: string): string {
  return joinCommand([process.execPath, cliPath('agent'), 'heartbeat', agent, '--now']);
}

/**
 * What a heartbeat's answer tells the owner, or null when it is nothing to report: empty,
 * NO_REPLY, or HEARTBEAT_OK at its start or end (bold, quoted or with a full stop, as models
 * write it) with at most ACK_MAX_CHARS besides; with more, that rest is the finding.
 */
export function heartbeatFinding(answer: string): string | null {
  const text = answer.trim();
  if (text === '' || text === 'NO_REPLY') return null;
  const dress = '[\\s*_`"\'.,!:;-]*';
  const leading = new RegExp(`^${dress}${HEARTBEAT_OK}${dress}`);
  const trailing = new RegExp(`${dress}${HEARTBEAT_OK}${dress}$`);
  if (!leading.test(text) && !trailing.test(text)) return text;
  const rest = text.replace(leading, '').replace(trailing, '').trim();
  return rest.length <= ACK_MAX_CHARS ? null : rest;
}

/** Whether `now` (this machine's local time) is within `HH:MM-HH:MM`; no hours: always. */
export function withinActiveHours(hours: string | undefined, now: Date): boolean {
  if (hours === undefined) return true;
  const [start, end] = hours.split('-').map((time) => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5))) as [number, number];
  const minute = now.getHours() * 60 + now.getMinutes();
  return start < end ? minute >= start && minute < end : minute >= start || minute < end;
}

/** The part of IDENTITY.md before its first section, at most IDENTITY_BRIEF_CHARS. */
export function identityBrief(dir: AgentDir): string {
  const text = identityText(dir);
  const head = text.split(/\n## /)[0]!.trim();
  return head.length <= IDENTITY_BRIEF_CHARS ? head : `${head.slice(0, IDENTITY_BRIEF_CHARS).trimEnd()}…`;
}

export interface HeartbeatPromptInput {
  dir: AgentDir;
  heartbeat: HeartbeatConfig;
  /** What the runtime facts say of commands (tool-policy.ts commandsFact); none: no tool. */
  commands: string | null;
  lastFinding: { text: string; at: string } | null;
  now: Date;
}

/** The system prompt and the input of one heartbeat: everything it is told. */
export function heartbeatPrompt({ dir, heartbeat, commands, lastFinding, now }: HeartbeatPromptInput): { system: string; input: string } {
  const facts = [`- time: ${now.toISOString()}`, `- agent: ${dir.id} (workdir ${dir.workdir})`];
  if (commands !== null) facts.push(`- commands: ${commands}`, `- my agent memory: ${join(dir.memory, 'agent.md')}`);
  const system = `${identityBrief(dir)}

## Heartbeat
This is my heartbeat, a check I make on my own every ${heartbeat.every}: no one wrote to me. I go through the checklist I am given. If nothing needs my owner, I answer exactly ${HEARTBEAT_OK}. Otherwise I answer only with what my owner should know, briefly: that answer goes to my owner's direct chat with me. I do not tell them again what I told them before, unless it changed.
${facts.join('\n')}`;
  const last = lastFinding ? `\n\nWhat I told my owner last (${lastFinding.at.slice(0, 16).replace('T', ' ')} UTC): ${clip(lastFinding.text, LAST_FINDING_CHARS)}` : '';
  return { system, input: `${heartbeat.prompt ?? DEFAULT_HEARTBEAT_PROMPT}${last}` };
}

export type HeartbeatOutcome =
  | { outcome: 'skipped'; reason: string }
  /** Nothing to report. */
  | { outcome: 'ok'; tokens: number }
  | { outcome: 'told_owner'; text: string; tokens: number };

export interface HeartbeatOptions {
  home?: string;
  env?: NodeJS.ProcessEnv;
  /** Seam for tests: replaces the provider call. */
  caller?: ModelCaller;
  now?: Date;
}

/**
 * A heartbeat acts for the owner, under their policy, at their expense: the owner sets and runs
 * it, not an agent's turn (which could make itself run commands on a timer).
 */
export function refuseInTurn(env: NodeJS.ProcessEnv): void {
  if (turnOutbox(env) !== null) {
    throw new ClawError('usage', "an agent's turn cannot set or run heartbeats: they act for the owner, at the owner's expense", {
      suggestion: 'ask the owner to run agent heartbeat from a terminal',
    });
  }
}

/** One heartbeat of the agent (`agent heartbeat <id> --now`, what its timer runs). */
export async function runHeartbeat(id: string, options: HeartbeatOptions = {}): Promise<HeartbeatOutcome> {
  const env = options.env ?? process.env;
  refuseInTurn(env);
  const home = options.home ?? resolveHome(env);
  const now = options.now ?? new Date();
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const logger = createLogger(dir.log, { env });
  const skip = (reason: string): HeartbeatOutcome => {
    logger.info(`heartbeat: skipped: ${reason}`);
    return { outcome: 'skipped', reason };
  };
  const heartbeat = config.heartbeat;
  if (!heartbeat) return skip(`agent ${id} has no heartbeat (agent heartbeat ${id} --every 30m sets one)`);
  if (!withinActiveHours(heartbeat.active_hours, now)) return skip(`outside its active hours (${heartbeat.active_hours})`);
  const { started, owner } = await inboxState(home, dir, config, env);
  if (!started) return skip(`agent ${id} is stopped (agent start ${id})`);
  if (owner === null) return skip(`the owner has no direct chat with ${id} yet, where a finding would go`);
  const lock = tryLock(dir.heartbeatLock);
  if (!lock.acquired) return skip(`another heartbeat is under way (pid ${lock.holder.pid})`);
  const spend = new SpendLedger(dir, config.budget);
  const feeds = new FeedWriter(home, id, env);
  let thread: StoredThread | undefined;
  try {
    thread = await openAgentThread(home, dir.heartbeat, { create: true }, env);
    const toFeed = feedCopier(feeds, logger, 'heartbeat');
    return await beat({ home, env, now, dir, config, heartbeat, logger, spend, thread, owner, toFeed, caller: options.caller }, skip);
  } finally {
    await thread?.close();
    await feeds.close();
    spend.close();
    lock.lock.release();
  }
}

/** What a beat needs of the inbox: whether the agent is started, and the owner's direct chat (a source address) or null. */
export async function inboxState(home: string, dir: AgentDir, config: AgentConfig, env: NodeJS.ProcessEnv = process.env): Promise<{ started: boolean; owner: string | null }> {
  return withAgentThread(home, dir.inbox, async (inbox) => ({ started: (await inbox.consumer(INBOX_CONSUMER))?.subscribed ?? false, owner: await ownerDirectChat(inbox, config.policy) }), env);
}

interface Beat {
  home: string;
  env: NodeJS.ProcessEnv;
  now: Date;
  dir: AgentDir;
  config: AgentConfig;
  heartbeat: HeartbeatConfig;
  logger: Logger;
  spend: SpendLedger;
  thread: StoredThread;
  /** The owner's direct chat (a source address). */
  owner: string;
  /** Its commands go to the warden's feed, an error no retry mends to the maintainer's (feeds.ts). */
  toFeed: ReturnType<typeof feedCopier>;
  caller?: ModelCaller;
}

async function beat(b: Beat, skip: (reason: string) => HeartbeatOutcome): Promise<HeartbeatOutcome> {
  const { home, env, dir, config, heartbeat, logger, thread } = b;
  const { record, settled } = recordWriter(thread);
  const paiConfig = withAgentSettings(loadPaiConfig(home), config);
  const redact = createRedactor(env, providerSecrets(paiConfig, env));
  const rule = commandRuleFor(config.policy, b.owner);
  const tools = offersTools(rule);
  // The owner's own check: their workdir, the agent's memory and skills; no person's memory, no conversation's thread.
  const scope: TurnScope = { threadId: HEARTBEAT_THREAD_ID, thread: dir.heartbeat, memory: { agent: agentMemoryFile(dir) }, ownMemory: null, owner: true, files: [] };
  const { system, input } = heartbeatPrompt({ dir, heartbeat, commands: tools ? commandsFact(rule, sandboxFact(config.sandbox, scope)) : null, lastFinding: await lastFinding(thread), now: b.now });
  let beatId: number | undefined;
  let release = (): void => {};
  let result: ChatResult;
  try {
    const model = await resolveModel(paiConfig, heartbeat.model ? { model: heartbeat.model } : config.pai, env);
    // Reserved like a message's call (its prompt and the model's largest answer): a beat that
    // would pass a cap is not made, and nobody is told, since nobody asked.
    const reservation = b.spend.reserve(HEARTBEAT_THREAD_ID, estimateTokens(system, input) + model.maxOutputTokens, b.now);
    if (reservation.over) return skip(`over its budget: ${reservation.over.reason}`);
    release = reservation.release;
    const id = await record('heartbeat', { model: `${model.provider}/${model.model}`, tools } satisfies HeartbeatRecord);
    beatId = id;
    const authorize = commandAuthorizer(rule, {
      dir,
      policy: config.policy,
      logger,
      conversation: HEARTBEAT_THREAD_ID,
      askedFor: b.owner,
      tellOwner: (text) => tellOwnerOf(home, dir.id, text, 'approval', undefined, env),
    });
    const onEvent = turnRecorder({
      account: { record, inReplyTo: id, spend: b.spend, peer: HEARTBEAT_THREAD_ID },
      redact,
      used: () => model,
      logger,
      where: `heartbeat ${id}`,
      ranCommand: (toolcall) => b.toFeed('toolcalls', 'toolcall', { agent: dir.id, thread: HEARTBEAT_THREAD_ID, ...toolcall } satisfies ToolcallFeedEntry),
    });
    result = await new TurnRegistry(dir.turnProcesses).during((turnMark) =>
      callModel(
        { home, dir, config, paiConfig, env, model, caller: b.caller },
        {
          input,
          system,
          tools,
          scope,
          authorize,
          turnMark,
          onEvent,
          env: { ...env, THECLAW_HOME: home, THECLAW_AGENT: dir.id, THECLAW_AGENT_DIR: dir.root, THECLAW_CONVERSATION: HEARTBEAT_THREAD_ID },
        },
      ),
    );
    await settled();
  } catch (error) {
    await settled().catch(() => {}); // what the model's events recorded goes before the error record
    throw await failed(b, error, beatId, redact);
  } finally {
    release();
  }
  await afterCommands(b);
  const tokens = result.usage.input + result.usage.output;
  const finding = heartbeatFinding(result.text);
  if (finding === null) {
    await record('decision', { in_reply_to: beatId, decision: 'no_reply' } satisfies DecisionRecord);
    logger.info(`heartbeat: nothing to report (${result.usage.input}+${result.usage.output} tokens)`);
    return { outcome: 'ok', tokens };
  }
  if (!(await tellOwnerOf(home, dir.id, finding, undefined, undefined, env))) {
    await record('error', { in_reply_to: beatId, stage: 'route', error: `the owner's direct chat is gone; the finding was not told: ${clip(finding, 1000)}` } satisfies ErrorRecord);
    throw new ClawError('not_found', "the heartbeat's finding could not reach the owner: they have no direct chat with the agent", {
      suggestion: `the owner writes to ${dir.id} once, then the next heartbeat tells them`,
    });
  }
  await record('decision', { in_reply_to: beatId, decision: 'told_owner', text: finding } satisfies DecisionRecord);
  logger.info(`heartbeat: told the owner (${result.usage.input}+${result.usage.output} tokens)`);
  return { outcome: 'told_owner', text: finding, tokens };
}

/**
 * A beat's commands may have left what only a conversation's turn takes: files for an answer
 * (a finding is text: they are dropped, and the log says so) and reminders (set in the owner's
 * direct chat, for whom the heartbeat acts).
 */
async function afterCommands(b: Beat): Promise<void> {
  const files = takeAttachments(b.home, b.dir, HEARTBEAT_THREAD_ID);
  if (files.attachments.length) b.logger.warn(`heartbeat: ${files.attachments.length} attached file(s) not sent: a heartbeat's finding is text`);
  const reminders = await setReminders(b.home, b.dir, HEARTBEAT_THREAD_ID, b.owner, b.env);
  if (reminders.set.length) b.logger.info(`heartbeat: set reminder timer(s) ${reminders.set.join(', ')} for the owner's chat`);
  for (const problem of [...files.problems, ...reminders.problems]) b.logger.warn(`heartbeat: ${problem}`);
}

/**
 * A beat without an answer: recorded in the heartbeat thread; a failure no retry mends (a key
 * refused, no such model) also goes to the maintainer's feed, which tells the owner once; an
 * outage only misses this beat. The error makes the timer's run exit 1.
 */
async function failed(b: Beat, error: unknown, beatId: number | undefined, redact: (text: string) => string): Promise<ClawError> {
  const failure = classifyFailure(error);
  const detail = redact(error instanceof Error ? error.message : String(error));
  await push(b.thread, {
    source: 'self',
    type: 'record',
    subtype: 'error',
    content: JSON.stringify({ ...(beatId === undefined ? {} : { in_reply_to: beatId }), stage: 'llm', error: detail, kind: failure.kind, status: failure.status } satisfies ErrorRecord),
  });
  b.logger.error(`heartbeat: no answer (${failure.kind}): ${detail}`);
  if (failure.class === 'unrecoverable') {
    b.toFeed('errors', 'error', { agent: b.dir.id, thread: HEARTBEAT_THREAD_ID, stage: 'llm', kind: failure.kind, status: failure.status, reason: failure.reason } satisfies ErrorFeedEntry);
  }
  return new ClawError('upstream', `the heartbeat got no answer: ${failure.reason}`, {
    suggestion: failure.class === 'outage' ? 'the next heartbeat tries again' : `see: theclaw logs ${b.dir.id}, and theclaw doctor`,
    cause: error,
  });
}

/** The last finding a heartbeat told the owner, from the heartbeat thread. */
async function lastFinding(thread: StoredThread): Promise<{ text: string; at: string } | null> {
  for (const event of (await thread.peek({ filter: "type = 'record' AND subtype = 'decision'", last: 200 })).reverse()) {
    const decision = JSON.parse(event.content) as DecisionRecord;
    if (decision.decision === 'told_owner') return { text: decision.text, at: event.created_at };
  }
  return null;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
