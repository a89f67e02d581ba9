import { dirname, resolve } from 'node:path';
import { resolveHome } from '../core/home.js';
import { paiConfigPath } from '../core/layout.js';
import { createRedactor } from '../core/secrets.js';
import { killMarked, newMark, TURN_MARK, type ProcessMark } from '../core/turn-processes.js';
import { attempt } from './attempts.js';
import { bashExec, BASH_EXEC_TOOL } from './bash-exec.js';
import { KeyRing, type KeyProfile } from './key-ring.js';
import type { Sandbox } from './sandbox.js';
import { createModelCaller, type ModelCaller, type ModelReply, type ReasoningLevel } from './llm.js';
import { ModelCallError } from './model-error.js';
import { loadPaiConfig, providerKeyVariables, providerSecrets, resolveModel, type ModelChoice } from './models.js';
import { appendSession, lastTurnStart, readSession, type ImageRef, type SessionLine } from './session.js';
import { addUsage, ZERO_USAGE, type BashExecArgs, type BashExecResult, type ChatEvent, type ChatResult, type PaiConfig, type ResolvedModel } from './types.js';

/**
 * The tool loop of one turn. Written here rather than taken from pi-agent-core: that package
 * loads pi-ai's index and TypeBox (~190 ms per process, and every agent run is a process), and
 * its loop would need wrapping anyway for retries by error class and for a session appended
 * message by message.
 */
export const DEFAULT_SYSTEM_PROMPT =
  "You are a helpful assistant on the user's own machine. You can run shell commands with bash_exec; `cmds find <what you need>` tells which commands and skills exist. Be concise.";

export interface ChatOptions extends ModelChoice {
  /** The user's message for this turn. */
  input: string;
  /** Images with it, for a model that takes them (ResolvedModel.images). */
  images?: ImageRef[];
  /** System prompt. Default: the session's own system line, else DEFAULT_SYSTEM_PROMPT. */
  system?: string;
  /** JSONL session: read for history, appended message by message. Default: none (one-off). */
  sessionFile?: string;
  /** Written on the turn's user line (see SessionLine): the name a resumed turn is found by. */
  turn?: string;
  /**
   * Continue the turn the session ends with, cut off by a crash or a kill, instead of beginning
   * one with `input`: its finished tool calls are not run again (the model gets their recorded
   * results), a call without a result gets an `interrupted` result for the model to judge, and an
   * answer it already has ends the turn without a model call.
   */
  resume?: boolean;
  /** Offer bash_exec to the model. Default: true. */
  tools?: boolean;
  /** Tool rounds before the turn ends with a note. Default: config `max_turns` (20). */
  maxTurns?: number;
  /** bash_exec's working directory. Default: `process.cwd()`. */
  cwd?: string;
  /** Environment for keys and for bash_exec (secrets removed). Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where bash_exec runs its commands (sandbox.ts). Default: none, as this user. */
  sandbox?: Sandbox;
  /** Data root for the config. Default: `resolveHome(env)`. */
  home?: string;
  /** Default: `$THECLAW_HOME/pai/config.yaml`. */
  config?: PaiConfig;
  onEvent?: (event: ChatEvent) => void;
  signal?: AbortSignal;
  /**
   * The turn's mark on its commands' processes, when the caller owns the turn's end (and kills
   * them then; see bash-exec.ts). Default: a mark of this call's own, and what the commands left
   * running is killed when it returns.
   */
  turnMark?: ProcessMark;
  /**
   * Asked before each command runs: null lets it run; a text refuses it, and the model gets that
   * text with exit code 126 (the shell's "cannot execute"). It may wait (for an owner's approval).
   */
  authorize?: (command: string, signal?: AbortSignal) => Promise<string | null>;
  /**
   * Asked after each round of commands, before the next model call: messages that came while the
   * turn ran, added to it (user lines marked `joined`), so that its next call and its answer take
   * them into account. Default: none.
   */
  joining?: () => Promise<JoiningMessage[]>;
  /** Seam for tests: replaces the provider call. */
  caller?: ModelCaller;
  /** The reasoning level asked of a model that has one (llm.ts). Default: none asked. */
  reasoning?: ReasoningLevel;
}

/** A message that joins a running turn (ChatOptions.joining). */
export interface JoiningMessage {
  text: string;
  images?: ImageRef[];
}

/**
 * Runs one turn: the user's message, then model calls and bash_exec rounds until the model
 * answers without tools or `maxTurns` rounds have run. Recoverable model errors are retried with
 * backoff; a call that fails for good throws `ModelCallError` (with the `error` event emitted),
 * and nothing empty is written to the session for it.
 */
export async function chat(options: ChatOptions): Promise<ChatResult> {
  // Without tools no process is started, and there is nothing to look for.
  if (options.turnMark || options.tools === false) return runTurn(options, options.turnMark ?? newMark(TURN_MARK));
  const turnMark = newMark(TURN_MARK);
  try {
    return await runTurn(options, turnMark);
  } finally {
    await killMarked(turnMark);
  }
}

async function runTurn(options: ChatOptions, turnMark: ProcessMark): Promise<ChatResult> {
  const env = options.env ?? process.env;
  const home = options.home ?? resolveHome(env);
  const config = options.config ?? loadPaiConfig(home);
  const script = config.providers.mock?.script;
  const model = await resolveModel(config, options, env);
  const keys = KeyRing.of(config, model, env, home);
  const callers = new Map<KeyProfile, ModelCaller>();
  const callerFor = (key: KeyProfile): ModelCaller => {
    if (options.caller) return options.caller;
    let caller = callers.get(key);
    if (!caller) {
      caller = createModelCaller(model, {
        apiKey: key.key,
        keyless: Boolean(config.providers[model.provider]?.base_url),
        idleTimeoutMs: config.timeout_seconds * 1000,
        env,
        reasoning: options.reasoning,
        // Relative to the config's folder, so that a home holding its script can move.
        mockScript: script === undefined ? undefined : resolve(dirname(paiConfigPath(home)), script),
      });
      callers.set(key, caller);
    }
    return caller;
  };
  const emit = options.onEvent ?? (() => {});
  const maxTurns = options.maxTurns ?? config.max_turns;
  const tools = options.tools ?? true;
  const history: SessionLine[] = options.sessionFile ? readSession(options.sessionFile) : [];
  const system = options.system ?? history.find((line) => line.role === 'system')?.content ?? DEFAULT_SYSTEM_PROMPT;
  // Every provider's key variable, not just this model's: the tool must not see any provider key.
  const secretNames = [...model.apiKeyEnvs, ...providerKeyVariables(config)];
  // What a command prints goes to the model, the session and the caller's records: a secret it
  // found (a file, /proc/$PPID/environ: the environment it gets is clean, ours is not) is cut out first.
  const redact = createRedactor(env, [...providerSecrets(config, env), ...secretNames.flatMap((name) => env[name] ?? [])]);
  const record = (line: SessionLine) => {
    history.push(line);
    if (options.sessionFile) appendSession(options.sessionFile, line);
  };

  emit({ type: 'start', provider: model.provider, model: model.model });
  const result: ChatResult = { text: '', toolCalls: [], usage: ZERO_USAGE, toolRounds: 0, stoppedAtMaxTurns: false };
  const resumed = options.resume ? resumeTurn(history, record, emit) : null;
  if (resumed === null)
    record({
      role: 'user',
      content: options.input,
      ts: new Date().toISOString(),
      ...(options.turn === undefined ? {} : { turn: options.turn }),
      ...(options.images?.length ? { images: options.images } : {}),
    });
  else result.toolRounds = resumed.toolRounds;

  while (resumed?.answer === undefined) {
    const reply = await callWithRetries(callerFor, { system, history, tools }, { config, model, keys, emit, signal: options.signal });
    result.usage = addUsage(result.usage, reply.usage);
    const modelName = `${model.provider}/${model.model}`;
    const ts = new Date().toISOString();
    if (reply.toolCalls.length === 0 || !tools) {
      record({ role: 'assistant', content: reply.text, model: modelName, ts });
      result.text = reply.text;
      break;
    }
    record({ role: 'assistant', content: reply.text, tool_calls: reply.toolCalls, model: modelName, ts });
    if (result.toolRounds >= maxTurns) {
      // Every tool call gets a result, so the session stays a valid conversation for the next turn.
      for (const call of reply.toolCalls) {
        record({ role: 'tool', tool_call_id: call.id, name: call.name, content: JSON.stringify({ stdout: '', stderr: 'not run: the tool round limit was reached', exit_code: 125 }) });
      }
      result.text = `I stopped after ${maxTurns} rounds of commands without reaching an answer (the limit is --max-turns ${maxTurns}). Ask me to continue, or raise the limit.`;
      result.stoppedAtMaxTurns = true;
      record({ role: 'assistant', content: result.text, model: modelName, ts: new Date().toISOString() });
      break;
    }
    const perRound = config.max_tool_calls_per_round;
    for (const [index, call] of reply.toolCalls.entries()) {
      const args = toBashArgs(call.arguments);
      emit({ type: 'tool_call', id: call.id, name: call.name, arguments: args });
      const started = Date.now();
      // After an abort no command starts: the next call of the model ends the turn.
      const ran = options.signal?.aborted
        ? { stdout: '', stderr: 'not run: the turn was aborted', exit_code: 125 }
        : index >= perRound
          ? { stdout: '', stderr: `not run: at most ${perRound} commands run per answer (max_tool_calls_per_round); ask for the rest in the next round`, exit_code: 125 }
          : call.name === BASH_EXEC_TOOL.name && args.command
            ? await authorizedRun(
                args,
                options.authorize,
                () => bashExec(args, { cwd: options.cwd, env, secretNames, redact, signal: options.signal, turnMark, sandbox: options.sandbox }),
                options.signal,
              )
            : { stdout: '', stderr: `unknown tool ${call.name} or no command; the only tool is bash_exec with {"command": "..."}`, exit_code: 127 };
      const output = { ...ran, stdout: redact(ran.stdout), stderr: redact(ran.stderr) };
      emit({ type: 'tool_result', id: call.id, exit_code: output.exit_code, stdout: output.stdout, stderr: output.stderr, duration_ms: Date.now() - started });
      result.toolCalls.push({ id: call.id, arguments: args, result: output });
      record({ role: 'tool', tool_call_id: call.id, name: call.name, content: JSON.stringify(output), ts: new Date().toISOString() });
    }
    result.toolRounds++;
    // After an abort the next call ends the turn: nothing joins it.
    const joining = options.signal?.aborted ? [] : ((await options.joining?.()) ?? []);
    for (const message of joining) {
      record({ role: 'user', content: message.text, ts: new Date().toISOString(), joined: true, ...(message.images?.length ? { images: message.images } : {}) });
    }
  }
  if (resumed?.answer !== undefined) result.text = resumed.answer;
  emit({ type: 'done', text: result.text, usage: result.usage, tool_rounds: result.toolRounds, stopped_at_max_turns: result.stoppedAtMaxTurns });
  return result;
}

/** Runs the command if `authorize` lets it; a refusal is what the model gets instead, exit code 126. */
async function authorizedRun(args: BashExecArgs, authorize: ChatOptions['authorize'], run: () => Promise<BashExecResult>, signal?: AbortSignal): Promise<BashExecResult> {
  const refusal = authorize ? await authorize(args.command, signal) : null;
  if (refusal !== null) return { stdout: '', stderr: refusal, exit_code: 126 };
  return signal?.aborted ? { stdout: '', stderr: 'not run: the turn was aborted', exit_code: 125 } : run();
}

/** What a command that was running when its turn was cut off returns to the model. */
export const INTERRUPTED_RESULT = {
  stdout: '',
  stderr: 'interrupted: the turn was killed while this ran; it may or may not have finished - check before running it again',
  exit_code: 125,
} as const;

/**
 * Prepares the resumption of the turn the history ends with (from its last user line): each tool
 * call without a result gets INTERRUPTED_RESULT (emitted like a run call, so the caller records
 * it). Returns the tool rounds the turn has used, and its answer when the model gave one.
 */
function resumeTurn(history: readonly SessionLine[], record: (line: SessionLine) => void, emit: (event: ChatEvent) => void): { toolRounds: number; answer?: string } {
  const start = lastTurnStart(history);
  const turn = history.slice(start + 1);
  const answered = new Set(turn.flatMap((line) => (line.role === 'tool' ? [line.tool_call_id] : [])));
  const rounds = turn.flatMap((line) => (line.role === 'assistant' && line.tool_calls?.length ? [line.tool_calls] : []));
  for (const call of rounds.at(-1) ?? []) {
    if (answered.has(call.id)) continue;
    emit({ type: 'tool_call', id: call.id, name: call.name, arguments: toBashArgs(call.arguments) });
    emit({ type: 'tool_result', id: call.id, ...INTERRUPTED_RESULT, duration_ms: 0 });
    record({ role: 'tool', tool_call_id: call.id, name: call.name, content: JSON.stringify(INTERRUPTED_RESULT), ts: new Date().toISOString() });
  }
  const last = turn.at(-1);
  const answer = last?.role === 'assistant' && !last.tool_calls?.length ? last.content : undefined;
  return { toolRounds: rounds.length, ...(answer === undefined ? {} : { answer }) };
}

/** One model call with the provider's keys in turn and retries by class (attempts.ts), as events. */
async function callWithRetries(
  callerFor: (key: KeyProfile) => ModelCaller,
  request: Parameters<ModelCaller>[0],
  context: { config: PaiConfig; model: ResolvedModel; keys: KeyRing; emit: (event: ChatEvent) => void; signal?: AbortSignal },
): Promise<ModelReply> {
  const { config, model, keys, emit, signal } = context;
  try {
    let started = 0;
    const { value, key } = await attempt<ModelReply>(
      (profile) => {
        started = Date.now();
        return callerFor(profile)(request, { signal, onDelta: (text) => emit({ type: 'delta', text }) }).then((outcome) => (outcome.ok ? { ok: true, value: outcome.reply } : outcome));
      },
      {
        retry: config.retry,
        model,
        keys,
        signal,
        onRetry: (event) => emit({ type: 'retry', ...event }),
        onKeyRotation: (event) => emit({ type: 'key_rotation', ...event }),
      },
    );
    emit({ type: 'usage', usage: value.usage, duration_ms: Date.now() - started, profile: key.name });
    return value;
  } catch (error) {
    if (error instanceof ModelCallError) emit({ type: 'error', error: error.message, suggestion: error.suggestion ?? '', kind: error.modelError.kind, status: error.modelError.status });
    throw error;
  }
}

function toBashArgs(raw: Record<string, unknown>): BashExecArgs {
  const args: BashExecArgs = { command: typeof raw.command === 'string' ? raw.command : '' };
  if (typeof raw.comment === 'string') args.comment = raw.comment;
  if (typeof raw.cwd === 'string') args.cwd = raw.cwd;
  if (typeof raw.timeout_seconds === 'number' && raw.timeout_seconds > 0) args.timeout_seconds = raw.timeout_seconds;
  return args;
}
