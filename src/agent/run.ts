import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { tryLock } from '../core/lock.js';
import { createLogger, type Logger } from '../core/logger.js';
import type { Attachment } from '../core/message.js';
import { createRedactor } from '../core/secrets.js';
import { isStorageError, storageError } from '../core/storage-error.js';
import { TurnRegistry } from '../core/turn-processes.js';
import { loadPaiConfig, preloadProvider, providerSecrets, resolveModel, type ModelCaller, type PaiConfig, type ReasoningLevel, type ResolvedModel } from '../pai/index.js';
import { openThread, type Thread, type ThreadEvent } from '../thread/index.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { memoryFiles, ownMemoryFile, sessionFile } from './context.js';
import { answerFailure, ModelOutage, TurnAbandoned } from './turn/failure.js';
import { damagedThread, describeDamage } from './damaged-thread.js';
import { ownerMessage } from './conversation/owner-notice.js';
import { replyProgress, type ReplyProgress } from './delivery/reply-progress.js';
import { modelInput, ownFile } from './delivery/attachments.js';
import { answerUnheardVoice, hearVoice, unheardVoice } from './delivery/voice.js';
import { takeAttachments } from './delivery/reply-files.js';
import { setReminders } from './proactive/reminders.js';
import { resolveFallbacks, withFailover } from './turn/failover.js';
import { EMBEDDINGS_SOCKET_ENV, serveEmbeddings } from './memory/memory-embedder.js';
import { BROWSER_SOCKET_ENV, serveBrowserProxy } from '../browser/index.js';
import { serveWebSearch, WEB_SEARCH_SOCKET_ENV } from '../web/search-door.js';
import { estimateTokens } from './tokens.js';
import { SpendLedger } from './accounting/budget.js';
import { accountedSummariser, type CallAccount, type Summarise } from './accounting/accounting.js';
import { feedCopier, FeedWriter, type ErrorFeedEntry, type ToolcallFeedEntry } from './accounting/feeds.js';
import { deliverHandler, INBOX_CONSUMER, OUTBOUND_CONSUMER, OUTBOUND_FILTER } from './lifecycle.js';
import { callWithinWindow } from './turn/overflow.js';
import { flushMemory } from './turn/memory-flush.js';
import { condenseOverCap } from './turn/memory-condense.js';
import { answerTarget, readInbound, type AnswerTarget } from './conversation/reply-context.js';
import { commandAuthorizer, noticeApproval, ownerDirectChat } from './conversation/owner-approval.js';
import { commandRuleFor, commandsFact, isOwnerDirectChat, offersTools } from './policy/tool-policy.js';
import { messageScope, sandboxFact, turnShows, turnWorkdir } from './policy/sandbox-profile.js';
import { noteOutage } from './turn/outage.js';
import { mixesPeople, routeMessage } from './router.js';
import { chatCommandOf } from './chat-commands.js';
import { answerChatCommand } from './conversation/command-replies.js';
import { callModel, turnRecorder, withAgentSettings, type CallInput } from './turn/model-call.js';
import { noticeStop, RunningTurns, type RunningTurn } from './turn/turn-stop.js';
import { watchInbox, type InboxWatch } from './inbox-watch.js';
import { ConversationQueue } from './conversation/conversation-queue.js';
import { conversationModel, sessionSettings } from './conversation/session-settings.js';
import { beginAttempt, overTurnLimit, unfinishedTurn, type Attempt } from './turn/turn-attempts.js';
import type { AgentConfig, DecisionRecord, ErrorRecord, ThreadRoute, UpkeepPurpose } from './types.js';

/**
 * `agent run <id>`: one batch, started by notifier when the inbox has messages.
 *
 * 1. Take the run lock (pid-aware; a dead holder's lock is reclaimed).
 * 2. Pop the inbox from the stored progress. Messages that come while the run goes on join it,
 *    up to the batch size (conversation-queue.ts).
 * 3. Route each message by its source into a conversation thread; threads are handled
 *    concurrently (config `concurrency`), the messages of one thread strictly in order.
 * 4. For each message: put it into the thread with its original source; skip it if its outcome is
 *    there already (a crash after answering); compact the thread when it has grown past the
 *    threshold; build the context (memory cut to its caps); call the model through pai (once more,
 *    compacted, when the provider finds the context too long), recording every tool call and
 *    the usage; push the reply (with reply_context and in_reply_to) or a NO_REPLY decision, then
 *    condense the memory files it loaded that are over their caps (memory-condense.ts). A
 *    model that fails is dealt with by failure.ts: an error notice and record, or, when it is
 *    unavailable, the message waits (its thread stops, the run fails, notifier retries). A turn
 *    has a time limit and a few attempts, and a retried turn resumes (turn-attempts.ts). A chat
 *    command (`/new`, `/stop`, ...: chat-commands.ts) is answered without the model; a turn that
 *    a `/stop` ended gets a `stopped` decision (turn-stop.ts).
 * 5. Acknowledge the inbox up to the last message whose outcome is stored and before which every
 *    message of the batch is done, so a crash never skips a message.
 */
export interface RunOptions {
  home?: string;
  env?: NodeJS.ProcessEnv;
  /** Most inbox messages one run answers, joiners included. Default: 50; notifier starts another run for the rest. */
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
  const spend = new SpendLedger(dir, config.budget);
  const feeds = new FeedWriter(home, id);
  let inbox: Thread | undefined;
  let inboxWatch: InboxWatch | undefined;
  let embeddings: Awaited<ReturnType<typeof serveEmbeddings>> = null;
  let browser: Awaited<ReturnType<typeof serveBrowserProxy>> | null = null;
  let search: Awaited<ReturnType<typeof serveWebSearch>> | null = null;
  try {
    // A model that cannot be resolved (unknown provider, no key) is a configuration error: each
    // message gets it as its error record, as the spec says of unrecoverable errors.
    const paiConfig = withAgentSettings(loadPaiConfig(home), config);
    const model = await resolveModel(paiConfig, config.pai, env).catch((error: unknown) => error as Error);
    if (!(model instanceof Error)) preloadProvider(model.api); // overlaps the provider's loading with the inbox work
    const fallbacks = config.pai.fallbacks.length ? await resolveFallbacks(paiConfig, config.pai.fallbacks, env, logger) : [];
    await reapKilledTurns(dir, logger);
    inbox = openThread(dir.inbox, { home });
    const batch = inbox.pop(INBOX_CONSUMER, { limit: options.batchSize ?? 50 });
    if (batch.length === 0) {
      logger.debug('run: inbox empty');
      return summary;
    }
    logger.info(`run: ${batch.length} message(s) from the inbox (${batch[0]!.id}..${batch.at(-1)!.id})`);
    const acks = createAckTracker((upTo) => inbox!.ack(INBOX_CONSUMER, upTo));
    const redact = createRedactor(env, providerSecrets(paiConfig, env));
    // Memory search in the turns' commands gets its embeddings from this run (memory-embedder.ts).
    embeddings = await serveEmbeddings(home, dir, config, env, logger).catch((error: unknown) => {
      logger.warn(`run: memory search in this run's turns is by words only: no embeddings socket (${(error as Error).message})`);
      return null;
    });
    // `browser` in the turns' commands reaches this agent's browser, and no other, through it (browser/proxy.ts).
    browser = await serveBrowserProxy(home, dir.id, env).catch((error: unknown) => {
      logger.warn(`run: no browser in this run's turns: no browser socket (${(error as Error).message})`);
      return null;
    });
    // `web search` in the turns' commands searches through it, with the provider's key kept out here (web/search-door.ts).
    search = await serveWebSearch(home, env).catch((error: unknown) => {
      logger.warn(`run: web search in this run's turns goes without the owner's key: no search socket (${(error as Error).message})`);
      return null;
    });
    const turn: TurnSettings = {
      home,
      dir,
      config,
      paiConfig,
      model,
      fallbacks,
      env,
      logger,
      redact,
      caller: options.caller,
      tellOwner: (text) => tellOwner(text),
      spend,
      embeddingsSocket: embeddings?.socket ?? null,
      browserSocket: browser?.socket ?? null,
      searchSocket: search?.socket ?? null,
      toFeed: feedCopier(feeds, logger, 'run'),
    };
    const tellOwner = (text: string): boolean => {
      const owner = ownerDirectChat(inbox!, config.policy);
      if (owner === null) return false;
      const thread = openConversation(turn, threads, routeMessage(dir, config.routing.default, owner));
      thread.push(ownerMessage(owner, text, 'approval'));
      return true;
    };
    const turns = new RunningTurns(options.signal, config.turn.timeout_seconds * 1000);
    const conversationOf = (source: string) => conversationPath(dir, config, source);

    // Conversations run concurrently, each in order; each message keeps its own route: in a
    // shared thread the senders differ (memory, facts). Messages that come while the run goes
    // on join it, up to the batch size; the first one that cannot join ends the joining, so that
    // no later message is acknowledged past it.
    const queue = new ConversationQueue<{ route: ThreadRoute; event: ThreadEvent }>();
    const maxMessages = options.batchSize ?? 50;
    let taken = 0;
    let joining = true;
    let lastSeen = batch.at(-1)!.id;
    const take = (event: ThreadEvent): void => {
      joining &&= queue.accepting && taken < maxMessages;
      if (!joining) return;
      let route: ThreadRoute;
      try {
        route = routeMessage(dir, config.routing.default, event.source);
      } catch (error) {
        logger.error(`run: inbox event ${event.id} cannot be routed (${(error as Error).message}); skipped`);
        acks.expect(event.id);
        acks.done(event.id);
        return;
      }
      if (!queue.add(route.path, { route, event })) {
        joining = false;
        return;
      }
      acks.expect(event.id);
      taken++;
    };
    for (const event of batch) take(event);
    // The inbox is watched while the run goes on: for `/stop`, and for messages that join.
    inboxWatch = watchInbox(inbox, {
      afterId: batch[0]!.id - 1,
      logger,
      onMessage: (event) => {
        noticeStop(event, turns, conversationOf, logger);
        noticeApproval(event, dir, config.policy, logger);
        if (event.id <= lastSeen) return;
        lastSeen = event.id;
        const before = taken;
        take(event);
        if (taken > before) logger.debug(`run: inbox event ${event.id} joins the run`);
      },
    });

    let failed: unknown;
    let outage: ModelOutage | undefined;
    const answer = async (conversation: string, { route, event }: { route: ThreadRoute; event: ThreadEvent }): Promise<boolean> => {
      const running = turns.begin(conversation, event.id);
      try {
        const thread = openConversation(turn, threads, route);
        // The conversation's own settings (/model, /think) over the agent's: session-settings.ts.
        const settings = sessionSettings(thread);
        const model = await conversationModel(settings, turn.model, (choice) => resolveModel(paiConfig, choice, env));
        const outcome = await handleMessage({ ...turn, running, model, reasoning: settings.think ?? undefined, toolProgress: settings.verbose }, thread, route, event);
        summary.handled++;
        if (outcome === 'replied') summary.replied++;
        if (outcome === 'error') summary.errors++;
        acks.done(event.id);
        return true;
      } catch (error) {
        // A damaged thread stops only its own conversation: its messages are let go, said in the log and status.
        const damaged = damagedThread(dir, route.path, error);
        if (damaged) {
          logger.error(`run: inbox event ${event.id} is not answered: ${describeDamage(damaged)}`);
          summary.errors++;
          acks.done(event.id);
          return true;
        }
        // The model is unavailable, or not an LLM failure (storage, a bug). This conversation
        // stops here, unacknowledged, and nothing more joins, while the others finish; the run
        // then fails and notifier retries.
        if (error instanceof ModelOutage) outage ??= error;
        logger.error(
          `run: inbox event ${event.id} ${error instanceof ModelOutage ? 'waits, with the later messages of its conversation' : 'failed'}: ${error instanceof Error ? error.message : String(error)}`,
        );
        failed ??= error;
        queue.close();
        return false;
      } finally {
        turns.end(conversation, running);
      }
    };
    await queue.run(config.concurrency, answer, () => inboxWatch?.look());
    noteOutage(dir, { outage, failed: failed !== undefined }, logger);
    if (failed !== undefined) throw failed;
    logger.info(`run: done, ${summary.handled} handled, ${summary.replied} replied, ${summary.errors} errors`);
    return summary;
  } finally {
    inboxWatch?.close();
    await embeddings?.close();
    await browser?.close();
    await search?.close();
    for (const thread of threads.values()) thread.close();
    inbox?.close();
    spend.close();
    feeds.close();
    lock.lock.release();
  }
}

/**
 * For a warm runner that loaded the agent CLI: loads the provider code of the home's default
 * model, which the first `agent run` would otherwise load in its first turn.
 */
export function warmAgentRuns(env: NodeJS.ProcessEnv = process.env): void {
  try {
    resolveModel(loadPaiConfig(resolveHome(env)), {}, env).then(
      (model) => preloadProvider(model.api),
      () => {},
    );
  } catch {
    // No home or no configuration yet: the run that needs them says so.
  }
}

interface TurnSettings {
  home: string;
  /** Where the turns' memory searches get embeddings (memory-embedder.ts); null: none. */
  embeddingsSocket: string | null;
  /** Where the turns' `browser` commands reach the agent's browser (browser/proxy.ts); null: none. */
  browserSocket: string | null;
  /** Where the turns' `web search` commands search with the owner's key (web/search-door.ts); null: none. */
  searchSocket: string | null;
  dir: AgentDir;
  config: AgentConfig;
  paiConfig: PaiConfig;
  /** The conversation's model, or why it could not be resolved. */
  model: ResolvedModel | Error;
  /** The conversation's `/think` level; none: not asked. */
  reasoning?: ReasoningLevel;
  /** The conversation's `/verbose`: its chat is shown the commands a turn runs. */
  toolProgress?: boolean;
  /** Its `pai.fallbacks`, resolved (failover.ts). */
  fallbacks: ResolvedModel[];
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Removes secret values (environment keys and tokens) from text that goes into records. */
  redact: (text: string) => string;
  caller?: ModelCaller;
  /** The message's turn: `/stop` aborts its signal. */
  running?: RunningTurn;
  /** Puts an approval request into the owner's direct chat with the agent; false when there is none. */
  tellOwner: (text: string) => boolean;
  /** The agent's spend caps and what they count (budget.ts). */
  spend: SpendLedger;
  /** Errors and commands go to the system agents' feeds too (feeds.ts). */
  toFeed: ReturnType<typeof feedCopier>;
}

type Outcome = 'replied' | 'no_reply' | 'stopped' | 'error' | 'already_handled';

async function handleMessage(turn: TurnSettings, thread: Thread, route: ThreadRoute, event: ThreadEvent): Promise<Outcome> {
  const { dir, config, logger } = turn;
  // The inbox event's id is the key: a message put into its thread before a crash is not put twice.
  // A voice message's words are transcribed first (voice.ts), once: a retried turn finds them there.
  const inboxKey = `inbox:${event.id}`;
  const heard = thread.findByKey(inboxKey) === undefined ? await hearVoice(event.content, { dir, paiConfig: turn.paiConfig, env: turn.env, signal: turn.running?.signal }) : undefined;
  const { id: inboundId } = thread.pushOnce({ source: event.source, type: 'message', content: heard?.content ?? event.content, idempotency_key: inboxKey });
  // Whatever answers it (reply, NO_REPLY decision, error record) carries this key: one outcome per message.
  const outcomeKey = `reply:${inboundId}`;
  if (thread.findByKey(outcomeKey) !== undefined) {
    logger.info(`run: inbox event ${event.id} was handled before (thread ${route.threadId} event ${inboundId}); not answered twice`);
    return 'already_handled';
  }
  const stored = heard?.content ?? thread.peek({ afterId: inboundId - 1, limit: 1 })[0]?.content ?? event.content;
  const inbound = readInbound({ ...event, content: stored });
  const target = answerTarget(thread, inbound, inboundId);
  const memory = memoryFiles(dir, route);
  const mixedPeople = mixesPeople(route);
  const record = (subtype: string, content: object, idempotencyKey?: string) =>
    thread.push({ source: 'self', type: 'record', subtype, content: JSON.stringify(content), idempotency_key: idempotencyKey });
  // Every call for this message is counted alike, the upkeep's too (accounting.ts).
  const account: CallAccount = { spend: turn.spend, peer: route.peerKey ?? route.threadId, inReplyTo: inboundId, record };
  const upkeep = (purpose: UpkeepPurpose): Summarise => {
    const model = turn.model;
    if (model instanceof Error) return () => Promise.reject(model);
    return accountedSummariser(account, model, purpose, (system, input, onEvent) => callModel({ ...turn, model }, { input, system, tools: false, onEvent }));
  };
  const command = chatCommandOf(event);
  if (command) {
    const text = await answerChatCommand(command, {
      ...turn,
      route,
      thread,
      inboxEvent: event,
      commandId: inboundId,
      summaryFile: memory.thread,
      mixedPeople,
      summarise: upkeep('new_conversation'),
      policy: config.policy,
    });
    pushReply(thread, target, inboundId, text, outcomeKey);
    logger.info(`run: answered /${command} in thread ${route.threadId} (event ${inboundId})`);
    return 'replied';
  }
  if (unheardVoice(inbound.attachments)) {
    const record = answerUnheardVoice({ thread, inboundId, outcomeKey, replyContext: target.replyContext, paiConfig: turn.paiConfig, problem: heard?.problem, redact: turn.redact });
    logger.warn(`run: a voice message in thread ${route.threadId} (event ${inboundId}) was not transcribed: ${record.error}; the person is told`);
    if (heard?.problem === undefined) return 'no_reply'; // not set up (or told before a crash): nothing new to report
    const status = record.status ?? null;
    turn.toFeed('errors', 'error', {
      agent: dir.id,
      thread: route.threadId,
      stage: record.stage,
      kind: record.kind!,
      status,
      reason: `a voice message could not be transcribed${status ? ` (${status})` : ''}`,
    } satisfies ErrorFeedEntry);
    return 'error';
  }
  let attempt: Attempt | undefined;
  let progress: ReplyProgress | undefined;
  let answered = false;
  let releaseBudget = (): void => {};
  let afterAnswer: (() => Promise<unknown>) | undefined;
  try {
    const model = turn.model;
    if (model instanceof Error) throw model;
    // Before the model is called: a turn that kills its run is known to the next one.
    // Reserved before the call: its input and the model's largest answer, against the day's caps.
    const reservation = turn.spend.reserve(account.peer, estimateTokens(inbound.text) + model.maxOutputTokens);
    releaseBudget = reservation.release;
    if (reservation.over) {
      if (turn.spend.firstReport(reservation.over.cap))
        turn.tellOwner(`${dir.id} stopped answering for today: ${reservation.over.reason} (budget.${reservation.over.cap} in its config.yaml). Messages get a notice until tomorrow (UTC).`);
      throw new TurnAbandoned('over_budget', reservation.over.reason);
    }
    attempt = beginAttempt(thread, inboundId, config.turn);
    progress = replyProgress(turn.home, target.replyContext, logger, turn.redact, () => thread.hasPending(OUTBOUND_CONSUMER));
    const modelTurn = { ...turn, model };
    // The model that answers (a fallback after a failover): the usage records name it.
    let used = model;
    const session = sessionFile(dir, route);
    // Named by the inbox event, whose ids never start again: a thread made anew (after a damaged
    // one was moved away) counts its events from 1, and must not resume an old turn of the session.
    const turnName = `inbox-${event.id}`;
    // Who may have what run here (tool-policy.ts): a conversation whose rule denies every command
    // is answered without the tool.
    const rule = commandRuleFor(config.policy, event.source);
    // What its commands may see (sandbox-profile.ts): this conversation's own, and the files this
    // message carries; the owner's files only in the owner's direct chat (a group reads the answer).
    const carried = inbound.attachments.flatMap((attachment) => ownFile(dir, attachment) ?? []);
    const scope = messageScope(dir, route, isOwnerDirectChat(config.policy, event.source), carried);
    const recordEvent = turnRecorder({
      account,
      redact: turn.redact,
      used: () => used,
      logger,
      where: `thread ${route.threadId} event ${inboundId}`,
      ranCommand: (toolcall) => turn.toFeed('toolcalls', 'toolcall', { agent: dir.id, thread: route.threadId, ...toolcall } satisfies ToolcallFeedEntry),
    });
    const asked = modelInput(dir, inbound.text, inbound.attachments, model.images);
    const turnCall: Omit<CallInput, 'system'> = {
      input: asked.text,
      images: asked.images,
      sessionFile: session,
      turn: turnName,
      tools: offersTools(rule),
      scope,
      authorize: commandAuthorizer(rule, { dir, policy: config.policy, logger, conversation: route.threadId, askedFor: event.source, tellOwner: turn.tellOwner }),
      // What `agent send` and `cmds` run through bash_exec need to know about the asker; the
      // asking event is the message that an answer to `agent send` will be passed on to.
      env: {
        ...turn.env,
        THECLAW_HOME: turn.home,
        THECLAW_AGENT: dir.id,
        THECLAW_AGENT_DIR: dir.root,
        THECLAW_CONVERSATION: route.threadId,
        THECLAW_ASKING_EVENT: String(target.eventId ?? inboundId),
        ...(turn.embeddingsSocket ? { [EMBEDDINGS_SOCKET_ENV]: turn.embeddingsSocket } : {}),
        ...(turn.browserSocket ? { [BROWSER_SOCKET_ENV]: turn.browserSocket } : {}),
        ...(turn.searchSocket ? { [WEB_SEARCH_SOCKET_ENV]: turn.searchSocket } : {}),
      },
      onEvent(chatEvent) {
        if (chatEvent.type === 'delta') progress?.written(chatEvent.text);
        if (chatEvent.type === 'tool_call') {
          progress?.restart();
          if (turn.toolProgress !== false) progress?.running(chatEvent.arguments.command);
        }
        recordEvent(chatEvent);
      },
    };
    // Where a compaction's memory flush writes: this conversation's own person or group file.
    const flushFile = config.context.memory_flush ? ownMemoryFile(route, memory) : null;
    // The context (memory caps, compaction) and the call, retried once on a context overflow;
    // what its commands leave running ends with the turn.
    const result = await new TurnRegistry(dir.turnProcesses).during((turnMark) =>
      callWithinWindow({
        thread,
        currentId: inboundId,
        input: asked.text,
        prompt: {
          dir,
          route,
          memory,
          caps: config.context.memory_caps,
          source: event.source,
          workdir: turnWorkdir(dir, scope),
          commands: commandsFact(rule, sandboxFact(config.sandbox, scope)),
        },
        settings: config.context,
        contextWindow: model.contextWindow,
        mixedPeople,
        summarise: upkeep('compaction'),
        flush: flushFile
          ? (covered) =>
              flushMemory(
                {
                  dir,
                  thread,
                  file: flushFile,
                  cap: config.context.memory_caps.person,
                  contextWindow: model.contextWindow,
                  mixedPeople,
                  summarise: upkeep('memory_flush'),
                  redact: turn.redact,
                  logger,
                  inReplyTo: inboundId,
                },
                covered,
              )
          : undefined,
        redact: turn.redact,
        logger,
        call: ({ system, history }) => {
          // An earlier turn at this message that was cut off is continued, not begun again: the
          // commands it ran are not run twice.
          const cutOff = unfinishedTurn(session, turnName);
          if (cutOff.length > 0) logger.warn(`run: resuming the cut-off turn for thread ${route.threadId} event ${inboundId} from its session`);
          writeSession(session, [...history, ...cutOff]);
          return withFailover([model, ...turn.fallbacks], cutOff.length > 0, logger, (current, resume) => {
            used = current;
            return callModel({ ...modelTurn, model: current, signal: turn.running?.signal }, { ...turnCall, system, turnMark, resume });
          });
        },
      }),
    );

    // The memory files it loaded that are over their caps are condensed once it is answered.
    afterAnswer = () =>
      condenseOverCap({
        dir,
        thread,
        files: [
          ['agent', memory.agent],
          ['person', memory.user],
          ['person', memory.group],
        ],
        caps: config.context.memory_caps,
        contextWindow: model.contextWindow,
        summarise: upkeep('memory_rewrite'),
        redact: turn.redact,
        logger,
        inReplyTo: inboundId,
      });

    // Files the turn's commands attached go with the answer (taken now either way: a NO_REPLY drops them);
    // the reminders they asked for are set in this conversation's name.
    const files = takeAttachments(turn.home, dir, route.threadId, (path) => turnShows(dir, scope, path));
    const reminders = await setReminders(turn.home, dir, route.threadId, event.source, turn.env);
    for (const problem of [...files.problems, ...reminders.problems]) logger.warn(`run: ${problem}`);
    if (reminders.set.length) logger.info(`run: set reminder timer(s) ${reminders.set.join(', ')} for thread ${route.threadId}`);
    // An empty answer is nothing to deliver: recorded like NO_REPLY rather than sent and refused.
    if (result.text.trim() === 'NO_REPLY' || (result.text.trim() === '' && files.attachments.length === 0)) {
      record('decision', { in_reply_to: inboundId, decision: 'no_reply' } satisfies DecisionRecord, outcomeKey);
      logger.info(`run: NO_REPLY to thread ${route.threadId} event ${inboundId}${files.attachments.length ? ` (${files.attachments.length} attached file(s) not sent)` : ''}`);
      return 'no_reply';
    }
    pushReply(thread, target, inboundId, result.text, outcomeKey, files.attachments);
    answered = true;
    if (target.problem) logger.warn(`run: the answer in thread ${route.threadId} to event ${inboundId} is kept there: ${target.problem}`);
    logger.info(`run: replied in thread ${route.threadId} to event ${inboundId} (${result.toolRounds} tool rounds, ${result.usage.input}+${result.usage.output} tokens)`);
    return 'replied';
  } catch (error) {
    // A full or read-only disk is no answer: the message stays unacknowledged and is answered on
    // the run after the disk recovers (the error record could not be written anyway, or would
    // consume the message for good if it could).
    if (isStorageError(error)) throw error;
    const stoppedBy = turn.running?.stoppedBy ?? null;
    if (stoppedBy !== null) {
      // Not a failure: the person asked for it, and their `/stop` gets the answer.
      record('decision', { in_reply_to: inboundId, decision: 'stopped', stopped_by_inbox_id: stoppedBy } satisfies DecisionRecord, outcomeKey);
      logger.info(`run: the turn for thread ${route.threadId} event ${inboundId} was stopped by /stop (inbox event ${stoppedBy})`);
      return 'stopped';
    }
    // Told to the person and recorded (unrecoverable), or thrown as ModelOutage: see failure.ts. A
    // turn over the limit is not retried: the retry would bill the model again for the same end.
    const cause = turn.running?.timedOut ? overTurnLimit(config.turn) : error;
    let failure;
    try {
      failure = answerFailure({ thread, config, event, inboundId, outcomeKey, replyContext: target.replyContext, redact: turn.redact }, cause);
    } catch (outage) {
      attempt?.waits();
      throw outage;
    }
    logger.error(`run: no answer to thread ${route.threadId} event ${inboundId} (${failure.kind}): ${cause instanceof Error ? cause.message : String(cause)}`);
    turn.toFeed('errors', 'error', {
      agent: dir.id,
      thread: route.threadId,
      stage: cause instanceof TurnAbandoned ? 'turn' : 'llm',
      kind: failure.kind,
      status: failure.status,
      reason: failure.reason,
    } satisfies ErrorFeedEntry);
    return 'error';
  } finally {
    progress?.end(answered);
    releaseBudget();
    // After the outcome is in the thread (and the answer on its way): never delays it.
    await afterAnswer?.();
  }
}

/**
 * The reply to an inbound message, keyed by its outcome key, to where the answer goes. Without a
 * reply context it is kept in the thread and goes nowhere (see reply-context.ts); when that is
 * because the answer's way back is in doubt, the thread records why.
 */
function pushReply(thread: Thread, target: AnswerTarget, inboundId: number, text: string, outcomeKey: string, attachments: Attachment[] = []): void {
  const { replyContext } = target;
  thread.push({
    source: 'self',
    type: 'message',
    content: JSON.stringify({ text, attachments, ...(replyContext ? { reply_context: replyContext } : {}), in_reply_to: inboundId }),
    idempotency_key: outcomeKey,
  });
  if (target.problem) {
    thread.push({ source: 'self', type: 'record', subtype: 'error', content: JSON.stringify({ in_reply_to: inboundId, stage: 'route', error: target.problem } satisfies ErrorRecord) });
  }
}

/**
 * Kills what the turns of a killed run (SIGKILL of `agent run` or of the warm runner it ran in)
 * left running. Nothing else does: when a runner dies under a job, this waits for the next run,
 * which notifier's retry of the unanswered message starts soon after.
 */
async function reapKilledTurns(dir: AgentDir, logger: Logger): Promise<void> {
  const killed = await new TurnRegistry(dir.turnProcesses).reap();
  if (killed.length > 0) logger.warn(`run: killed ${killed.length} process(es) left running by the turns of a run that died (pids ${killed.join(', ')})`);
}

/** The conversation thread of a source address, or null when it cannot be routed. */
function conversationPath(dir: AgentDir, config: AgentConfig, source: string): string | null {
  try {
    return routeMessage(dir, config.routing.default, source).path;
  } catch {
    return null;
  }
}

/** Opens a conversation thread, creating it (with its outbound consumer) on first use. */
function openConversation(turn: TurnSettings, open: Map<string, Thread>, route: ThreadRoute): Thread {
  let thread = open.get(route.path);
  if (thread) return thread;
  const isNew = !existsSync(route.path);
  thread = openThread(route.path, { home: turn.home, create: true });
  if (isNew || !thread.consumer(OUTBOUND_CONSUMER)?.subscribed) {
    thread.subscribe({ consumer: OUTBOUND_CONSUMER, handler: deliverHandler(), filter: OUTBOUND_FILTER });
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
 * Acknowledges the inbox in order: the stored progress moves to the highest id before which every
 * expected id is done, so that a crash (with conversations running concurrently) never
 * acknowledges a message that was not handled, and one that is never done (its conversation
 * stopped) holds back all that came after it for the next run.
 */
function createAckTracker(ack: (upTo: number) => void) {
  const ids: number[] = [];
  const finished = new Set<number>();
  let next = 0;
  return {
    /** Ids come in inbox order. */
    expect(id: number) {
      ids.push(id);
    },
    done(id: number) {
      finished.add(id);
      let upTo: number | undefined;
      while (next < ids.length && finished.has(ids[next]!)) upTo = ids[next++];
      if (upTo !== undefined) ack(upTo);
    },
  };
}
