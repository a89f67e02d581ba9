import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { parseAddress } from '../core/address.js';
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { tryLock } from '../core/lock.js';
import { createLogger, type Logger } from '../core/logger.js';
import { createRedactor } from '../core/secrets.js';
import { isStorageError, storageError } from '../core/storage-error.js';
import { parseMessageContent, type ReplyContext } from '../core/message.js';
import { chat } from '../pai/chat.js';
import type { ModelCaller } from '../pai/llm.js';
import { loadPaiConfig, providerSecrets, resolveModel } from '../pai/models.js';
import { preloadProvider } from '../pai/pi.js';
import type { BashExecArgs, PaiConfig, ResolvedModel } from '../pai/types.js';
import { openThread, type Thread } from '../thread/thread.js';
import type { ThreadEvent } from '../thread/types.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { compactIfNeeded } from './compaction.js';
import { answerFailure, isNotice, ModelOutage } from './failure.js';
import { buildSystemPrompt, historyLines, memoryFiles, messageText, sessionFile } from './context.js';
import { deliverHandler, INBOX_CONSUMER, OUTBOUND_CONSUMER, OUTBOUND_FILTER } from './lifecycle.js';
import { noteOutage } from './outage.js';
import { ANSWER_CONVERSATION, routeMessage } from './router.js';
import type { AgentConfig, DecisionRecord, ThreadRoute, ToolcallRecord, UsageRecord } from './types.js';

/**
 * `agent run <id>`: one batch, started by notifier when the inbox has messages.
 *
 * 1. Take the run lock (pid-aware; a dead holder's lock is reclaimed).
 * 2. Pop the inbox from the stored progress.
 * 3. Route each message by its source into a conversation thread; threads are handled
 *    concurrently (config `concurrency`), the messages of one thread strictly in order.
 * 4. For each message: put it into the thread with its original source; skip it if its outcome is
 *    there already (a crash after answering); compact the thread when it has grown past the
 *    threshold; build the context; call the model through pai, recording every tool call and
 *    the usage; push the reply (with reply_context and in_reply_to) or a NO_REPLY decision. A
 *    model that fails is dealt with by failure.ts: an error notice and record, or, when it is
 *    unavailable, the message waits (its thread stops, the run fails, notifier retries).
 * 5. Acknowledge the inbox up to the last message whose outcome is stored and before which every
 *    message of the batch is done, so a crash never skips a message.
 */
export interface RunOptions {
  home?: string;
  env?: NodeJS.ProcessEnv;
  /** Most inbox messages in one batch. Default: 50; notifier starts another run for the rest. */
  batchSize?: number;
  /** Seam for tests: replaces the provider call. */
  caller?: ModelCaller;
  signal?: AbortSignal;
}

export interface RunSummary {
  handled: number;
  replied: number;
  errors: number;
}

/** Characters of a tool's output kept in its record. */
const OUTPUT_LIMIT = 4_000;

export async function runAgent(id: string, options: RunOptions = {}): Promise<RunSummary> {
  const env = options.env ?? process.env;
  const home = options.home ?? resolveHome(env);
  const dir = requireAgent(home, id);
  const config = loadAgentConfig(dir);
  const logger = createLogger(dir.log, { env });
  const lock = tryLock(dir.runLock);
  if (!lock.acquired) {
    logger.warn(`run skipped: run.lock is held by pid ${lock.holder.pid}`);
    throw new ClawError('conflict', `agent ${id} is already running (pid ${lock.holder.pid})`, { suggestion: 'wait for that run to finish; notifier starts the next one' });
  }
  const threads = new Map<string, Thread>();
  const summary: RunSummary = { handled: 0, replied: 0, errors: 0 };
  let inbox: Thread | undefined;
  try {
    // A model that cannot be resolved (unknown provider, no key) is a configuration error: each
    // message gets it as its error record, as the spec says of unrecoverable errors.
    const paiConfig = withAgentSettings(loadPaiConfig(home), config);
    const model = await resolveModel(paiConfig, config.pai, env).catch((error: unknown) => error as Error);
    if (!(model instanceof Error)) preloadProvider(model.api); // overlaps the provider's loading with the inbox work
    inbox = openThread(dir.inbox, { home });
    const batch = inbox.pop(INBOX_CONSUMER, { limit: options.batchSize ?? 50 });
    if (batch.length === 0) {
      logger.debug('run: inbox empty');
      return summary;
    }
    logger.info(`run: ${batch.length} message(s) from the inbox (${batch[0]!.id}..${batch.at(-1)!.id})`);
    const acks = createAckTracker(batch.map((event) => event.id), (upTo) => inbox!.ack(INBOX_CONSUMER, upTo));
    const redact = createRedactor(env, providerSecrets(paiConfig, env));
    const turn: TurnSettings = { home, dir, config, paiConfig, model, env, logger, redact, caller: options.caller, signal: options.signal };

    // Group by thread, in inbox order; threads run concurrently, each thread in order. Each
    // message keeps its own route: in a shared thread the senders differ (memory, facts).
    const groups = new Map<string, { route: ThreadRoute; event: ThreadEvent }[]>();
    for (const event of batch) {
      let route: ThreadRoute;
      try {
        route = routeMessage(dir, config.routing.default, event.source);
      } catch (error) {
        logger.error(`run: inbox event ${event.id} cannot be routed (${(error as Error).message}); skipped`);
        acks.done(event.id);
        continue;
      }
      groups.set(route.path, [...(groups.get(route.path) ?? []), { route, event }]);
    }
    let failed: unknown;
    let outage: ModelOutage | undefined;
    await forEachLimit([...groups.values()], config.concurrency, async (messages) => {
      for (const { route, event } of messages) {
        try {
          const outcome = await handleMessage(turn, openConversation(turn, threads, route), route, event);
          summary.handled++;
          if (outcome === 'replied') summary.replied++;
          if (outcome === 'error') summary.errors++;
          acks.done(event.id);
        } catch (error) {
          // The model is unavailable, or not an LLM failure (storage, a bug). This thread stops
          // here, unacknowledged, while the others finish; the run then fails and notifier retries.
          if (error instanceof ModelOutage) outage ??= error;
          logger.error(`run: inbox event ${event.id} ${error instanceof ModelOutage ? 'waits, with the later messages of its conversation' : 'failed'}: ${error instanceof Error ? error.message : String(error)}`);
          failed ??= error;
          return;
        }
      }
    });
    noteOutage(dir, { outage, failed: failed !== undefined }, logger);
    if (failed !== undefined) throw failed;
    logger.info(`run: done, ${summary.handled} handled, ${summary.replied} replied, ${summary.errors} errors`);
    return summary;
  } finally {
    for (const thread of threads.values()) thread.close();
    inbox?.close();
    lock.lock.release();
  }
}

interface TurnSettings {
  home: string;
  dir: AgentDir;
  config: AgentConfig;
  paiConfig: PaiConfig;
  /** The agent's model, or why it could not be resolved. */
  model: ResolvedModel | Error;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Removes secret values (environment keys and tokens) from text that goes into records. */
  redact: (text: string) => string;
  caller?: ModelCaller;
  signal?: AbortSignal;
}

type Outcome = 'replied' | 'no_reply' | 'error' | 'already_handled';

async function handleMessage(turn: TurnSettings, thread: Thread, route: ThreadRoute, event: ThreadEvent): Promise<Outcome> {
  const { dir, config, logger } = turn;
  // The inbox event's id is the key: a message put into its thread before a crash is not put twice.
  const { id: inboundId } = thread.pushOnce({ source: event.source, type: 'message', content: event.content, idempotency_key: `inbox:${event.id}` });
  // Whatever answers it (reply, NO_REPLY decision, error record) carries this key: one outcome per message.
  const outcomeKey = `reply:${inboundId}`;
  if (thread.findByKey(outcomeKey) !== undefined) {
    logger.info(`run: inbox event ${event.id} was handled before (thread ${route.threadId} event ${inboundId}); not answered twice`);
    return 'already_handled';
  }
  const inbound = readInbound(event);
  const memory = memoryFiles(dir, route);
  const mixedPeople = config.routing.default !== 'per-peer';
  const record = (subtype: string, content: object, idempotencyKey?: string) =>
    thread.push({ source: 'self', type: 'record', subtype, content: JSON.stringify(content), idempotency_key: idempotencyKey });
  try {
    const model = turn.model;
    if (model instanceof Error) throw model;
    const modelTurn = { ...turn, model };
    const promptInput = { dir, route, memory, source: event.source };
    const before = buildSystemPrompt(promptInput);
    const { afterId, compacted } = await compactIfNeeded({
      thread,
      summaryFile: memory.thread,
      currentId: inboundId,
      system: before,
      input: inbound.text,
      contextWindow: model.contextWindow,
      threshold: config.context.compaction_threshold,
      recentMessages: config.context.recent_messages,
      keepRecent: config.context.keep_recent,
      mixedPeople,
      summarise: async (system, input) => (await callModel(modelTurn, { input, system, tools: false })).text,
    });
    // Built again only after a compaction, so that the summary it wrote is in it.
    const system = compacted ? buildSystemPrompt(promptInput) : before;
    const history = thread
      .peek({ afterId, filter: "type = 'message'", last: config.context.recent_messages + 1 })
      .filter((message) => message.id !== inboundId && !isNotice(message))
      .slice(-config.context.recent_messages);
    const session = sessionFile(dir, route);
    writeSession(session, historyLines(history, mixedPeople));

    const commands = new Map<string, BashExecArgs>();
    const result = await callModel(modelTurn, {
      input: inbound.text,
      system,
      sessionFile: session,
      tools: true,
      // What `agent send` and `cmds` run through bash_exec need to know about the asker.
      env: { ...turn.env, THECLAW_HOME: turn.home, THECLAW_AGENT: dir.id, THECLAW_AGENT_DIR: dir.root, THECLAW_CONVERSATION: route.threadId },
      onEvent(chatEvent) {
        if (chatEvent.type === 'tool_call') commands.set(chatEvent.id, chatEvent.arguments);
        if (chatEvent.type === 'retry') {
          logger.warn(`run: retry ${chatEvent.attempt} of the model call for thread ${route.threadId} event ${inboundId} in ${chatEvent.delay_ms} ms (${chatEvent.error}${chatEvent.status ? `, HTTP ${chatEvent.status}` : ''})`);
        }
        if (chatEvent.type === 'tool_result') {
          // A command may print a key it found; records are read by people and other agents.
          const output = turn.redact(chatEvent.stdout + (chatEvent.stderr ? `\n[stderr]\n${chatEvent.stderr}` : ''));
          record('toolcall', {
            in_reply_to: inboundId,
            command: commands.get(chatEvent.id)?.command ?? '',
            ...(commands.get(chatEvent.id)?.comment ? { comment: commands.get(chatEvent.id)!.comment } : {}),
            exit_code: chatEvent.exit_code,
            output: output.length > OUTPUT_LIMIT ? `${output.slice(0, OUTPUT_LIMIT)}\n[... ${output.length - OUTPUT_LIMIT} characters more]` : output,
            duration_ms: chatEvent.duration_ms,
          } satisfies ToolcallRecord);
        }
        if (chatEvent.type === 'usage') {
          record('usage', {
            in_reply_to: inboundId,
            provider: model.provider,
            model: model.model,
            input_tokens: chatEvent.usage.input,
            output_tokens: chatEvent.usage.output,
            cost: chatEvent.usage.cost,
            duration_ms: chatEvent.duration_ms,
          } satisfies UsageRecord);
        }
      },
    });

    // An empty answer is nothing to deliver: recorded like NO_REPLY rather than sent and refused.
    if (result.text.trim() === 'NO_REPLY' || result.text.trim() === '') {
      record('decision', { in_reply_to: inboundId, decision: 'no_reply' } satisfies DecisionRecord, outcomeKey);
      logger.info(`run: NO_REPLY to thread ${route.threadId} event ${inboundId}`);
      return 'no_reply';
    }
    // Without a reply context the answer is kept in the thread and goes nowhere: an agent's answer
    // to our question, in a conversation with no person to tell, is not sent back (no ping-pong).
    const replyContext = replyContextFor(thread, inbound);
    thread.push({
      source: 'self',
      type: 'message',
      content: JSON.stringify({ text: result.text, attachments: [], ...(replyContext ? { reply_context: replyContext } : {}), in_reply_to: inboundId }),
      idempotency_key: outcomeKey,
    });
    logger.info(`run: replied in thread ${route.threadId} to event ${inboundId} (${result.toolRounds} tool rounds, ${result.usage.input}+${result.usage.output} tokens)`);
    return 'replied';
  } catch (error) {
    // A full or read-only disk is no answer: the message stays unacknowledged and is answered on
    // the run after the disk recovers (the error record could not be written anyway, or would
    // consume the message for good if it could).
    if (isStorageError(error)) throw error;
    // Told to the person and recorded (unrecoverable), or thrown as ModelOutage: see failure.ts.
    const failure = answerFailure({ thread, config, event, inboundId, outcomeKey, replyContext: replyContextFor(thread, inbound), redact: turn.redact }, error);
    logger.error(`run: no answer to thread ${route.threadId} event ${inboundId} (${failure.kind}): ${error instanceof Error ? error.message : String(error)}`);
    return 'error';
  }
}

interface Inbound {
  text: string;
  replyContext: ReplyContext | null;
  /** It answers a message of ours (an agent's reply to `agent send`). */
  isReply: boolean;
  source: string;
}

/** The inbound message's text and where an answer goes: its reply_context, or its source address. */
function readInbound(event: ThreadEvent): Inbound {
  let content;
  try {
    content = parseMessageContent(event.content);
  } catch {
    return { text: messageText(event.content), replyContext: replyContextFromSource(event.source), isReply: isAnswer(event.source), source: event.source };
  }
  return {
    text: content.text,
    replyContext: trustedReplyContext(content.reply_context, event.source),
    isReply: isAnswer(event.source),
    source: event.source,
  };
}

function isAnswer(source: string): boolean {
  try {
    const address = parseAddress(source);
    return address.kind === 'internal' && address.conversationType === ANSWER_CONVERSATION;
  } catch {
    return false;
  }
}

/**
 * Where an answer may go is decided by the source address; the content's reply_context only adds
 * what the address cannot carry (the platform message id to quote), and only when it names the
 * same channel, conversation and peer: an inbox writer cannot redirect the agent's answer.
 */
function trustedReplyContext(claimed: ReplyContext | undefined, source: string): ReplyContext | null {
  const derived = replyContextFromSource(source);
  if (!claimed || !derived || claimed.kind !== derived.kind) return derived;
  if (claimed.kind === 'external' && derived.kind === 'external') {
    const same = claimed.channel_id === derived.channel_id && claimed.conversation_id === derived.conversation_id && claimed.peer_id === derived.peer_id;
    return same && claimed.message_id ? { ...derived, message_id: claimed.message_id } : derived;
  }
  return derived;
}

function replyContextFromSource(source: string): ReplyContext | null {
  try {
    const address = parseAddress(source);
    if (address.kind === 'external') {
      return {
        kind: 'external',
        channel_id: `${address.channelType}:${address.instance}`,
        conversation_type: address.conversationType,
        conversation_id: address.conversationId,
        peer_id: address.peerId,
      };
    }
    if (address.kind === 'internal') {
      return { kind: 'internal', conversation_type: address.conversationType, conversation_id: address.conversationId, agent_id: address.agentId };
    }
  } catch {
    // not an address: nowhere to answer
  }
  return null;
}

/**
 * Where the answer goes. An agent's reply to our question (`agent send`) came back into the
 * conversation that asked: the answer goes to the person of that conversation (the newest
 * external message's context), not back to the agent.
 */
function replyContextFor(thread: Thread, inbound: Inbound): ReplyContext | null {
  if (!inbound.isReply) return inbound.replyContext;
  const people = thread.peek({ filter: "type = 'message' AND source LIKE 'external:%'", last: 1 });
  return people[0] ? readInbound(people[0]).replyContext : null;
}

interface CallInput {
  input: string;
  system: string;
  sessionFile?: string;
  tools: boolean;
  env?: NodeJS.ProcessEnv;
  onEvent?: Parameters<typeof chat>[0]['onEvent'];
}

/** One pai turn with the agent's model, retries and tool-round limit. */
function callModel(turn: TurnSettings & { model: ResolvedModel }, input: CallInput) {
  return chat({
    ...input,
    provider: turn.model.provider,
    model: turn.model.model,
    config: turn.paiConfig,
    env: input.env ?? turn.env,
    cwd: turn.dir.workdir,
    maxTurns: turn.config.max_turns,
    caller: turn.caller,
    signal: turn.signal,
  });
}

/** The agent's retry settings win over pai's. */
function withAgentSettings(paiConfig: PaiConfig, config: AgentConfig): PaiConfig {
  return { ...paiConfig, retry: { ...paiConfig.retry, max_attempts: config.retry.max_attempts } };
}

/** Opens a conversation thread, creating it (with its outbound consumer) on first use. */
function openConversation(turn: TurnSettings, open: Map<string, Thread>, route: ThreadRoute): Thread {
  let thread = open.get(route.path);
  if (thread) return thread;
  const isNew = !existsSync(route.path);
  thread = openThread(route.path, { home: turn.home, create: true });
  if (isNew || !thread.consumer(OUTBOUND_CONSUMER)?.subscribed) {
    thread.subscribe({ consumer: OUTBOUND_CONSUMER, handler: deliverHandler(route.path), filter: OUTBOUND_FILTER });
    turn.logger.info(`run: new thread ${route.threadId} (${route.path})`);
  }
  open.set(route.path, thread);
  return thread;
}

function writeSession(file: string, lines: readonly object[]): void {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, lines.map((line) => JSON.stringify(line) + '\n').join(''));
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw storageError(error, file) ?? error;
  }
}

/**
 * Acknowledges inbox ids in order: `done` marks one finished; the stored progress moves to the
 * highest id before which every id of the batch is finished, so that a crash (with threads
 * running concurrently) never acknowledges a message that was not handled.
 */
function createAckTracker(ids: readonly number[], ack: (upTo: number) => void) {
  const finished = new Set<number>();
  let next = 0;
  return {
    done(id: number) {
      finished.add(id);
      let upTo: number | undefined;
      while (next < ids.length && finished.has(ids[next]!)) upTo = ids[next++];
      if (upTo !== undefined) ack(upTo);
    },
  };
}

async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let index = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (index < items.length) await fn(items[index++]!);
  });
  await Promise.all(workers);
}
