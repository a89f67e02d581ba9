import type { Logger } from '../../core/logger.js';
import type { ProcessMark } from '../../core/turn-processes.js';
import { chat, type BashExecArgs, type ChatEvent, type ImageRef, type ModelCaller, type PaiConfig, type ReasoningLevel, type ResolvedModel } from '../../pai/index.js';
import type { AgentDir } from '../agent-dir.js';
import { recordUsage, type CallAccount } from '../accounting/index.js';
import { ClawError } from '../../core/errors.js';
import { agentSandbox, turnWorkdir, type TurnScope } from '../policy/index.js';
import type { AgentConfig } from '../types.js';

/**
 * One pai turn of the agent's — a message's (run.ts) or a heartbeat's (heartbeat.ts): the
 * agent's sandbox, tool-round limit and retry settings, and the records the turn leaves in its
 * thread (each command it ran, each call's usage, counted against the spend caps).
 */
export interface ModelCallSettings {
  home: string;
  dir: AgentDir;
  config: AgentConfig;
  paiConfig: PaiConfig;
  env: NodeJS.ProcessEnv;
  model: ResolvedModel;
  /** Seam for tests: replaces the provider call. */
  caller?: ModelCaller;
  signal?: AbortSignal;
  /** The conversation's `/think` level; none: not asked. */
  reasoning?: ReasoningLevel;
}

export interface CallInput {
  input: string;
  images?: ImageRef[];
  system: string;
  sessionFile?: string;
  turn?: string;
  resume?: boolean;
  tools: boolean;
  /** What the turn's commands may see and where they run (sandbox-profile.ts); needed with `tools`. */
  scope?: TurnScope;
  authorize?: Parameters<typeof chat>[0]['authorize'];
  env?: NodeJS.ProcessEnv;
  onEvent?: Parameters<typeof chat>[0]['onEvent'];
  /** Messages that join the turn between its rounds of commands (queue mode steer). */
  joining?: Parameters<typeof chat>[0]['joining'];
  turnMark?: ProcessMark;
}

export function callModel(settings: ModelCallSettings, input: CallInput) {
  const { scope, ...call } = input;
  if (input.tools && !scope) throw new ClawError('invalid', 'a model call with commands has no conversation to scope its sandbox to', { suggestion: 'this is a bug: report it' });
  const env = input.env ?? settings.env;
  return chat({
    ...call,
    provider: settings.model.provider,
    model: settings.model.model,
    config: settings.paiConfig,
    env,
    cwd: scope ? turnWorkdir(settings.dir, scope) : settings.dir.workdir,
    sandbox: scope && input.tools ? agentSandbox(settings.home, settings.dir, settings.config.sandbox, env, scope) : undefined,
    maxTurns: settings.config.max_turns,
    caller: settings.caller,
    signal: settings.signal,
    reasoning: settings.reasoning,
  });
}

/** The agent's retry settings win over pai's. */
export function withAgentSettings(paiConfig: PaiConfig, config: AgentConfig): PaiConfig {
  return { ...paiConfig, retry: { ...paiConfig.retry, max_attempts: config.retry.max_attempts } };
}

/** Characters of a tool's output kept in its record. */
const OUTPUT_LIMIT = 4_000;

export interface TurnRecording {
  /** Where the records go and who the spend is charged to (accounting.ts). */
  account: CallAccount;
  /** Removes secret values from what a command printed. */
  redact: (text: string) => string;
  /** The model answering now (a fallback after a failover): the usage records name it. */
  used: () => ResolvedModel;
  logger: Logger;
  /** For the log: which turn retries. */
  where: string;
  /** Told of each command after its record: the warden's feed gets a copy (feeds.ts). */
  ranCommand?: (toolcall: { event: number; command: string; exit_code: number }) => void;
}

/** The part of a turn's `onEvent` that records: commands with their results, usage, retries (logged). */
export function turnRecorder(recording: TurnRecording): (event: ChatEvent) => void {
  const commands = new Map<string, BashExecArgs>();
  const { account } = recording;
  return (event) => {
    if (event.type === 'tool_call') commands.set(event.id, event.arguments);
    if (event.type === 'retry') {
      recording.logger.warn(`run: retry ${event.attempt} of the model call for ${recording.where} in ${event.delay_ms} ms (${event.error}${event.status ? `, HTTP ${event.status}` : ''})`);
    }
    if (event.type === 'key_rotation') {
      recording.logger.warn(
        `run: the key in ${event.from ?? 'the config'} was ${event.error === 'rate_limit' ? 'rate limited' : 'refused'}${event.status ? ` (HTTP ${event.status})` : ''}; going on with ${event.to ?? 'the next'} for ${recording.where}`,
      );
    }
    if (event.type === 'tool_result') {
      // A command may print a key it found; records are read by people and other agents.
      const output = recording.redact(event.stdout + (event.stderr ? `\n[stderr]\n${event.stderr}` : ''));
      const command = commands.get(event.id);
      // Stored in order with the turn's other records; the turn waits for them (MessageAccount.settled).
      const recorded = account.record('toolcall', {
        in_reply_to: account.inReplyTo,
        command: command?.command ?? '',
        ...(command?.comment ? { comment: command.comment } : {}),
        exit_code: event.exit_code,
        output: output.length > OUTPUT_LIMIT ? `${output.slice(0, OUTPUT_LIMIT)}\n[... ${output.length - OUTPUT_LIMIT} characters more]` : output,
        duration_ms: event.duration_ms,
      });
      const ran = { command: recording.redact(command?.command ?? ''), exit_code: event.exit_code };
      recorded.then(
        (recordId) => recording.ranCommand?.({ event: recordId, ...ran }),
        () => {},
      );
    }
    if (event.type === 'usage') void recordUsage(account, recording.used(), event);
  };
}
