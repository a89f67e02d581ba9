// Over 400 lines: the run in the order its spec below tells it, with the path of one turn (handleTurn) and its small helpers beside it; the work of each stage is in its room.
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { tryLock } from '../core/lock.js';
import { createLogger, type Logger } from '../core/logger.js';
import { createRedactor } from '../core/secrets.js';
import { TurnRegistry } from '../core/turn-processes.js';
import { loadPaiConfig, preloadProvider, providerSecrets, resolveModel, type ModelCaller } from '../pai/index.js';
import { threadName, type StoredThread, type ThreadEvent, type ThreadStore } from '../thread/index.js';
import { openAgentThread, threadStore } from './threads.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { ModelOutage } from './turn/failure.js';
import { damagedThread, describeDamage } from './damaged-thread.js';
import { ownerMessage } from './conversation/owner-notice.js';
import { takeApart } from './delivery/take-apart.js';
import { setReminders } from './proactive/reminders.js';
import { resolveFallbacks } from './turn/failover.js';
import { serveEmbeddings } from './memory/memory-embedder.js';
import { openMemoryDoors, type MemoryDoors } from './memory/memory-door.js';
import { serveBrowserProxy } from '../browser/index.js';
import { serveWebSearch } from '../web/search-door.js';
import { SpendLedger } from './accounting/budget.js';
import { feedCopier, FeedWriter } from './accounting/feeds.js';
import { INBOX_CONSUMER, OUTBOUND_CONSUMER, subscribeOutbound } from './lifecycle.js';
import { answerCommand } from './conversation/answer-command.js';
import { commandAuthorizer, noticeApproval, ownerDirectChat } from './conversation/owner-approval.js';
import { noteOutage } from './turn/outage.js';
import { mixesPeople, routeFor } from './router.js';
import { withAgentSettings } from './turn/model-call.js';
import { runModelTurn } from './turn/model-turn.js';
import { messageAccount, type MessageAccount, type MessageOutcome, type ModelInput, type TakenMessage, type TurnSettings } from './turn/turn-settings.js';
import { noticeStop, RunningTurns } from './turn/turn-stop.js';
import { watchInbox, type InboxWatch } from './inbox-watch.js';
import { ConversationQueue } from './conversation/conversation-queue.js';
import { conversationModel, sessionSettings } from './conversation/session-settings.js';
import { agentQueueMode, mayJoin, planTurn, queueMode } from './conversation/queue-mode.js';
import { collectedMessage, partInput, recordJoined } from './conversation/joined-turn.js';
import type { AgentConfig, QueueMode, ThreadRoute } from './types.js';
import { push } from './threads.js';

/**
 * `agent run <id>`: one batch, started by notifier when the inbox has messages.
 *
 * 1. Take the run lock (pid-aware; a dead holder's lock is reclaimed).
 * 2. Pop the inbox from the stored progress. Messages that come while the run goes on join it,
 *    up to the batch size (conversation-queue.ts).
 * 3. Route each message by its source into a conversation thread; threads are handled
 *    concurrently (config `concurrency`), the messages of one thread strictly in order, as its
 *    queue mode takes them (queue-mode.ts): several of a person's messages in one turn
 *    (collect), a message joining the running turn (steer), or stopping it (interrupt).
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
 * 5. Acknowledge the inbox up to the last message whose turn is done (a message that joined
 *    another's turn with that turn) and before which every message of the batch is done, so a
 *    crash never skips a message.
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
  const threads = new Map<string, Promise<StoredThread>>();
  const summary: RunSummary = { handled: 0, replied: 0, errors: 0 };
  const spend = new SpendLedger(dir, config.budget);
  const feeds = new FeedWriter(home, id, env);
  let inbox: StoredThread | undefined;
  let inboxWatch: InboxWatch | undefined;
  let embeddings: Awaited<ReturnType<typeof serveEmbeddings>> = null;
  let browser: Awaited<ReturnType<typeof serveBrowserProxy>> | null = null;
  let search: Awaited<ReturnType<typeof serveWebSearch>> | null = null;
  let memoryDoors: MemoryDoors | null = null;
  try {
    // A model that cannot be resolved (unknown provider, no key) is a configuration error: each
    // message gets it as its error record, as the spec says of unrecoverable errors.
    const paiConfig = withAgentSettings(loadPaiConfig(home), config);
    const model = await resolveModel(paiConfig, config.pai, env).catch((error: unknown) => error as Error);
    if (!(model instanceof Error)) preloadProvider(model.api); // overlaps the provider's loading with the inbox work
    const fallbacks = config.pai.fallbacks.length ? await resolveFallbacks(paiConfig, config.pai.fallbacks, env, logger) : [];
    await reapKilledTurns(dir, logger);
    const store = await threadStore(home, env);
    inbox = await openAgentThread(home, dir.inbox, {}, env);
    const batch = await inbox.pop(INBOX_CONSUMER, { limit: options.batchSize ?? 50 });
    if (batch.length === 0) {
      logger.debug('run: inbox empty');
      return summary;
    }
    logger.info(`run: ${batch.length} message(s) from the inbox (${batch[0]!.id}..${batch.at(-1)!.id})`);
    const acks = createAckTracker((upTo) => inbox!.ack(INBOX_CONSUMER, upTo));
    const open = (route: ThreadRoute, source: string) => openConversation(turn, store, threads, route, source);
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
    // Memory search in the turns' commands reads the threads in the database through it (memory-door.ts); on SQLite their files.
    if (store.kind === 'postgres') memoryDoors = openMemoryDoors(home, dir, env, logger);
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
      memoryDoors,
      toFeed: feedCopier(feeds, logger, 'run'),
    };
    const tellOwner = async (text: string): Promise<boolean> => {
      const owner = await ownerDirectChat(inbox!, config.policy);
      if (owner === null) return false;
      const thread = await open(routeFor(dir, config, owner), owner);
      await push(thread, ownerMessage(owner, text, 'approval'));
      return true;
    };
    const turns = new RunningTurns(options.signal, config.turn.timeout_seconds * 1000);
    const conversationOf = (source: string) => routeOf(dir, config, source)?.path ?? null;
    const agentMode = agentQueueMode(config, env);
    // A conversation whose thread cannot be read has no /queue of its own: its turn lets its
    // messages go and says why, and planning it must not stop every other conversation's. Read
    // when its first message is taken (planning is synchronous), and again after each turn (a
    // /queue may change it).
    const chosenModes = new Map<string, QueueMode | null>();
    const readMode = async (route: ThreadRoute, source: string): Promise<void> => {
      try {
        chosenModes.set(route.path, (await sessionSettings(await open(route, source))).queue);
      } catch {
        chosenModes.set(route.path, null);
      }
    };
    const modeOf = ({ route, event }: QueueItem): QueueMode => queueMode(chosenModes.get(route.path) ?? null, agentMode, route, event.source);
    // Queue mode interrupt: a person's new message stops the running turn of its conversation, as a /stop would.
    const noticeInterrupt = (event: ThreadEvent): void => {
      const route = mayJoin(event) ? routeOf(dir, config, event.source) : null;
      if (route !== null && modeOf({ route, event }) === 'interrupt' && turns.stop(route.path, event.id)) {
        logger.info(`run: inbox event ${event.id} stops the running turn of ${route.path} (queue mode interrupt)`);
      }
    };

    // Conversations run concurrently, each in order; each message keeps its own route: in a
    // shared thread the senders differ (memory, facts). Messages that come while the run goes
    // on join it, up to the batch size; the first one that cannot join ends the joining, so that
    // no later message is acknowledged past it. The conversation's queue mode plans its turns.
    const queue = new ConversationQueue<QueueItem>((_conversation, waiting) =>
      planTurn(
        modeOf(waiting[0]!),
        waiting.map((item) => item.event),
        config.queue.debounce_ms,
      ),
    );
    const maxMessages = options.batchSize ?? 50;
    let taken = 0;
    let joining = true;
    let lastSeen = batch.at(-1)!.id;
    // One message at a time, in inbox order (the watch's looks and this loop never overlap).
    const take = async (event: ThreadEvent): Promise<void> => {
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
      if (!chosenModes.has(route.path)) await readMode(route, event.source);
      if (!queue.add(route.path, { route, event })) {
        joining = false;
        return;
      }
      acks.expect(event.id);
      taken++;
    };
    for (const event of batch) await take(event);
    // The inbox is watched while the run goes on: for `/stop`, and for messages that join.
    inboxWatch = await watchInbox(inbox, {
      afterId: batch[0]!.id - 1,
      logger,
      onMessage: async (event) => {
        const route = routeOf(dir, config, event.source);
        if (route !== null && !chosenModes.has(route.path)) await readMode(route, event.source);
        noticeStop(event, turns, conversationOf, logger);
        noticeInterrupt(event);
        noticeApproval(event, dir, config.policy, logger);
        if (event.id <= lastSeen) return;
        lastSeen = event.id;
        const before = taken;
        await take(event);
        if (taken > before) logger.debug(`run: inbox event ${event.id} joins the run`);
      },
    });

    let failed: unknown;
    let outage: ModelOutage | undefined;
    const answer = async (conversation: string, items: QueueItem[]): Promise<boolean> => {
      const { route, event } = items.at(-1)!;
      const running = turns.begin(conversation, event.id);
      // Messages that join the turn while it runs (steer) are answered, and acknowledged, with it.
      const joined: QueueItem[] = [];
      const done = () => {
        for (const item of [...items, ...joined]) acks.done(item.event.id);
      };
      try {
        const thread = await open(route, event.source);
        // The conversation's own settings (/model, /think, /verbose, /queue) over the agent's: session-settings.ts.
        const settings = await sessionSettings(thread);
        const model = await conversationModel(settings, turn.model, (choice) => resolveModel(paiConfig, choice, env));
        const settled: TurnSettings = { ...turn, running, model, reasoning: settings.think ?? undefined, toolProgress: settings.verbose };
        // Queue mode steer: the person's messages waiting behind this turn join it when it asks, the inbox looked at first.
        const waiting = async () => {
          await inboxWatch?.look();
          return queue.takeWaiting(conversation, (item) => mayJoin(item.event));
        };
        const steer = modeOf({ route, event }) === 'steer' ? steering(settled, thread, route, waiting, joined) : undefined;
        const outcomes = [...(await handleTurn(settled, thread, items, steer)), ...joined.map((): MessageOutcome => 'joined')];
        await readMode(route, event.source); // a /queue in this turn changes how the next ones are planned
        summary.handled += outcomes.length;
        summary.replied += outcomes.filter((outcome) => outcome === 'replied').length;
        summary.errors += outcomes.filter((outcome) => outcome === 'error').length;
        done();
        return true;
      } catch (error) {
        // A damaged thread stops only its own conversation: its messages are let go, said in the log and status.
        const damaged = damagedThread(dir, route.path, error);
        if (damaged) {
          logger.error(`run: inbox event ${event.id} is not answered: ${describeDamage(damaged)}`);
          summary.errors++;
          done();
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
    await acks.settled();
    noteOutage(dir, { outage, failed: failed !== undefined }, logger);
    if (failed !== undefined) throw failed;
    logger.info(`run: done, ${summary.handled} handled, ${summary.replied} replied, ${summary.errors} errors`);
    return summary;
  } finally {
    inboxWatch?.close();
    await embeddings?.close();
    await browser?.close();
    await search?.close();
    await memoryDoors?.close();
    for (const opening of threads.values()) await (await opening.catch(() => null))?.close();
    await inbox?.close();
    spend.close();
    await feeds.close();
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

/** An inbox message a run answers, routed to its conversation. */
interface QueueItem {
  route: ThreadRoute;
  event: ThreadEvent;
}

/** Takes the messages that join a running turn now (queue mode steer), for the model. */
type Steer = (turnOf: number, seesImages: boolean) => Promise<ModelInput[]>;

/**
 * The messages that join a running turn when it asks (queue mode steer), each put into the thread
 * and marked joined (joined-turn.ts); `joined` keeps them, to be acknowledged with the turn.
 */
function steering(turn: TurnSettings, thread: StoredThread, route: ThreadRoute, waiting: () => Promise<QueueItem[]>, joined: QueueItem[]): Steer {
  return async (turnOf, seesImages) => {
    const inputs: ModelInput[] = [];
    for (const item of await waiting()) {
      joined.push(item);
      const message = await takeApart(turn, thread, item.route, item.event);
      if (typeof message === 'string') continue; // joined before a crash: in the turn's session already
      await recordJoined(thread, message, turnOf);
      inputs.push(partInput({ message, source: item.event.source }, mixesPeople(route), seesImages));
      turn.logger.info(`run: inbox event ${item.event.id} joins the running turn in thread ${route.threadId} (queue mode steer)`);
    }
    return inputs;
  };
}

/**
 * One turn's path, in three stages, each in the room that owns it: its messages are taken apart
 * (their voice heard, put into their thread, read: delivery), a chat command is answered
 * (conversation), or else the model answers them (turn), several collected into one turn
 * (joined-turn.ts). One outcome per message, in order.
 */
async function handleTurn(turn: TurnSettings, thread: StoredThread, items: readonly QueueItem[], steer?: Steer): Promise<MessageOutcome[]> {
  const outcomes: MessageOutcome[] = [];
  const taken: (QueueItem & { message: TakenMessage })[] = [];
  for (const item of items) {
    const message = await takeApart(turn, thread, item.route, item.event);
    if (typeof message === 'string') outcomes.push(message);
    else taken.push({ ...item, message });
  }
  const last = taken.at(-1);
  if (last === undefined) return outcomes;
  const { route } = last;
  const account = messageAccount(turn, thread, route, last.message.inboundId);
  try {
    return await answerTaken(turn, thread, outcomes, taken, account, steer);
  } finally {
    // What the model's events recorded is stored whatever became of the turn; a failure is the turn's already.
    await account.settled().catch(() => {});
  }
}

/** The turn of the messages taken apart: a chat command's answer, or the model's. */
async function answerTaken(
  turn: TurnSettings,
  thread: StoredThread,
  outcomes: MessageOutcome[],
  taken: readonly (QueueItem & { message: TakenMessage })[],
  account: MessageAccount,
  steer?: Steer,
): Promise<MessageOutcome[]> {
  const last = taken.at(-1)!;
  const { route, event } = last;
  // A chat command is never collected (queue-mode.ts planTurn): it is a turn of its own.
  const answered = taken.length === 1 ? await answerCommand(turn, thread, route, event, last.message, account) : null;
  if (answered !== null) return [...outcomes, answered];
  const message =
    taken.length === 1
      ? last.message
      : await collectedMessage(
          thread,
          taken.map((part) => ({ message: part.message, source: part.event.source })),
          mixesPeople(route),
        );
  const { dir, config, logger } = turn;
  const outcome = await runModelTurn(turn, thread, route, event, message, account, {
    authorize: (rule) => commandAuthorizer(rule, { dir, policy: config.policy, logger, conversation: route.threadId, askedFor: event.source, tellOwner: turn.tellOwner }),
    setReminders: () => setReminders(turn.home, dir, route.threadId, event.source, turn.env),
    joining: steer && ((seesImages) => steer(message.inboundId, seesImages)),
  });
  return [...outcomes, ...taken.slice(1).map((): MessageOutcome => 'joined'), outcome];
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
function routeOf(dir: AgentDir, config: AgentConfig, source: string): ThreadRoute | null {
  try {
    return routeFor(dir, config, source);
  } catch {
    return null;
  }
}

/**
 * Opens a conversation thread, creating it (with its outbound consumer, placed by the channel of
 * `source`, the message it is opened for) on first use. Opened once per run: the map holds the
 * opening, so that two callers at once share it.
 */
function openConversation(turn: TurnSettings, store: ThreadStore, open: Map<string, Promise<StoredThread>>, route: ThreadRoute, source: string): Promise<StoredThread> {
  let opening = open.get(route.path);
  if (opening) return opening;
  opening = (async () => {
    const thread = await store.open(threadName(turn.home, route.path), { create: true });
    if (!(await thread.consumer(OUTBOUND_CONSUMER))?.subscribed) {
      await subscribeOutbound(thread, source, turn.dir.id, turn.config.deliver.max_attempts);
      turn.logger.info(`run: new thread ${route.threadId} (${route.path})`);
    }
    return thread;
  })();
  open.set(route.path, opening);
  return opening;
}

/**
 * Acknowledges the inbox in order: the stored progress moves to the highest id before which every
 * expected id is done, so that a crash (with conversations running concurrently) never
 * acknowledges a message that was not handled, and one that is never done (its conversation
 * stopped) holds back all that came after it for the next run.
 */
function createAckTracker(ack: (upTo: number) => Promise<unknown>) {
  const ids: number[] = [];
  const finished = new Set<number>();
  let next = 0;
  // Acks go one after another (progress only moves forward) and the run waits for the last before
  // it ends: notifier checks the progress once the run is over, and a PostgreSQL ack takes a trip.
  let acked: Promise<unknown> = Promise.resolve();
  return {
    /** Every acknowledgement given so far is stored; an ack that failed fails the run. */
    settled: () => acked,
    /** Ids come in inbox order. */
    expect(id: number) {
      ids.push(id);
    },
    done(id: number) {
      finished.add(id);
      let upTo: number | undefined;
      while (next < ids.length && finished.has(ids[next]!)) upTo = ids[next++];
      if (upTo === undefined) return;
      acked = acked.then(() => ack(upTo));
      acked.catch(() => {}); // seen by settled(), not an unhandled rejection meanwhile
    },
  };
}
