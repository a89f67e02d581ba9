import { existsSync } from 'node:fs';
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { tryLock } from '../core/lock.js';
import { createLogger, type Logger } from '../core/logger.js';
import { createRedactor } from '../core/secrets.js';
import { TurnRegistry } from '../core/turn-processes.js';
import { loadPaiConfig, preloadProvider, providerSecrets, resolveModel, type ModelCaller } from '../pai/index.js';
import { openThread, type Thread, type ThreadEvent } from '../thread/index.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { ModelOutage } from './turn/failure.js';
import { damagedThread, describeDamage } from './damaged-thread.js';
import { ownerMessage } from './conversation/owner-notice.js';
import { takeApart } from './delivery/take-apart.js';
import { setReminders } from './proactive/reminders.js';
import { resolveFallbacks } from './turn/failover.js';
import { serveEmbeddings } from './memory/memory-embedder.js';
import { serveBrowserProxy } from '../browser/index.js';
import { serveWebSearch } from '../web/search-door.js';
import { SpendLedger } from './accounting/budget.js';
import { feedCopier, FeedWriter } from './accounting/feeds.js';
import { deliverHandler, INBOX_CONSUMER, OUTBOUND_CONSUMER, OUTBOUND_FILTER } from './lifecycle.js';
import { answerCommand } from './conversation/answer-command.js';
import { commandAuthorizer, noticeApproval, ownerDirectChat } from './conversation/owner-approval.js';
import { noteOutage } from './turn/outage.js';
import { routeFor } from './router.js';
import { withAgentSettings } from './turn/model-call.js';
import { runModelTurn } from './turn/model-turn.js';
import { messageAccount, type MessageOutcome, type TurnSettings } from './turn/turn-settings.js';
import { noticeStop, RunningTurns } from './turn/turn-stop.js';
import { watchInbox, type InboxWatch } from './inbox-watch.js';
import { ConversationQueue } from './conversation/conversation-queue.js';
import { conversationModel, sessionSettings } from './conversation/session-settings.js';
import type { AgentConfig, ThreadRoute } from './types.js';

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
      const thread = openConversation(turn, threads, routeFor(dir, config, owner));
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
        route = routeFor(dir, config, event.source);
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
        // The conversation's own settings (/model, /think, /verbose) over the agent's: session-settings.ts.
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

/**
 * One message's path, in three stages, each in the room that owns it: it is taken apart (its
 * voice heard, put into its thread, read: delivery), a chat command is answered (conversation),
 * or else the model answers it (turn).
 */
async function handleMessage(turn: TurnSettings, thread: Thread, route: ThreadRoute, event: ThreadEvent): Promise<MessageOutcome> {
  const message = await takeApart(turn, thread, route, event);
  if (typeof message === 'string') return message;
  const account = messageAccount(turn, thread, route, message.inboundId);
  const answered = await answerCommand(turn, thread, route, event, message, account);
  if (answered !== null) return answered;
  const { dir, config, logger } = turn;
  return runModelTurn(turn, thread, route, event, message, account, {
    authorize: (rule) => commandAuthorizer(rule, { dir, policy: config.policy, logger, conversation: route.threadId, askedFor: event.source, tellOwner: turn.tellOwner }),
    setReminders: () => setReminders(turn.home, dir, route.threadId, event.source, turn.env),
  });
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
    return routeFor(dir, config, source).path;
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
