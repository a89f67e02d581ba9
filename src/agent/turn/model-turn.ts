import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { isStorageError, storageError } from '../../core/storage-error.js';
import { TurnRegistry } from '../../core/turn-processes.js';
import { BROWSER_SOCKET_ENV } from '../../browser/index.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { WEB_SEARCH_SOCKET_ENV } from '../../web/search-door.js';
import { memoryFiles, ownMemoryFile, sessionFile } from '../context.js';
import { pushReply } from '../reply-context.js';
import { mixesPeople } from '../router.js';
import { estimateTokens } from '../tokens.js';
import type { DecisionRecord, ThreadRoute } from '../types.js';
import type { ErrorFeedEntry, ToolcallFeedEntry } from '../accounting/index.js';
import { EMBEDDINGS_SOCKET_ENV, MEMORY_SOCKET_ENV } from '../memory/index.js';
import { type CommandRule, commandRuleFor, commandsFact, isOwnerDirectChat, messageScope, offersTools, sandboxFact, turnShows, turnWorkdir } from '../policy/index.js';
import { answerFailure, TurnAbandoned } from './failure.js';
import { withFailover } from './failover.js';
import { condenseOverCap } from './memory-condense.js';
import { flushMemory } from './memory-flush.js';
import { callModel, turnRecorder, type CallInput } from './model-call.js';
import { callWithinWindow } from './overflow.js';
import { beginAttempt, overTurnLimit, unfinishedTurn, type Attempt } from './turn-attempts.js';
import type { MessageAccount, MessageOutcome, ModelInput, ReplyProgress, TakenMessage, TurnSettings } from './turn-settings.js';

/** What a model turn needs from the rooms above it, given by run.ts. */
export interface TurnSurroundings {
  /** Asks for the commands the rule does not allow outright (conversation/owner-approval.ts). */
  authorize: (rule: CommandRule) => CallInput['authorize'];
  /** Sets the reminders the turn's commands asked for (proactive/reminders.ts). */
  setReminders: () => Promise<{ set: string[]; problems: string[] }>;
  /**
   * The conversation's messages that join the turn before its next model call (queue mode steer:
   * run.ts), each put into the thread and answered by this turn; none: nothing joins.
   */
  joining?: (seesImages: boolean) => Promise<ModelInput[]>;
}

/**
 * The last stage of a message's path (run.ts handleTurn): the model answers it. Reserved
 * against the day's budget; the context built (memory cut to its caps, compaction), the model
 * called (once more, compacted, on a context overflow; a fallback on failover), every tool call
 * and the usage recorded; the reply pushed or a NO_REPLY decision recorded, then the memory files
 * over their caps condensed. A failure is told and recorded (failure.ts), or thrown as an outage.
 */
export async function runModelTurn(
  turn: TurnSettings,
  thread: StoredThread,
  route: ThreadRoute,
  event: ThreadEvent,
  message: TakenMessage,
  { account, record, settled, upkeep }: MessageAccount,
  around: TurnSurroundings,
): Promise<MessageOutcome> {
  const { dir, config, logger } = turn;
  const { inboundId, outcomeKey, inbound, target } = message;
  const memory = memoryFiles(dir, route);
  const mixedPeople = mixesPeople(route);
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
        await turn.tellOwner(`${dir.id} stopped answering for today: ${reservation.over.reason} (budget.${reservation.over.cap} in its config.yaml). Messages get a notice until tomorrow (UTC).`);
      throw new TurnAbandoned('over_budget', reservation.over.reason);
    }
    attempt = await beginAttempt(thread, inboundId, config.turn);
    progress = message.progress();
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
    const carried = message.carried();
    const scope = messageScope(dir, route, isOwnerDirectChat(config.policy, event.source), carried);
    // Its memory searches ask the run, which reads its thread in the database (memory-door.ts).
    const memorySocket = await turn.memoryDoors?.socketFor(route.threadId, scope.thread);
    const recordEvent = turnRecorder({
      account,
      redact: turn.redact,
      used: () => used,
      logger,
      where: `thread ${route.threadId} event ${inboundId}`,
      ranCommand: (toolcall) => turn.toFeed('toolcalls', 'toolcall', { agent: dir.id, thread: route.threadId, ...toolcall } satisfies ToolcallFeedEntry),
    });
    const asked = message.input(model.images);
    const turnCall: Omit<CallInput, 'system'> = {
      input: asked.text,
      images: asked.images,
      sessionFile: session,
      turn: turnName,
      tools: offersTools(rule),
      scope,
      authorize: around.authorize(rule),
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
        ...(memorySocket ? { [MEMORY_SOCKET_ENV]: memorySocket } : {}),
      },
      joining: around.joining && (() => around.joining!(model.images)),
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
        joinedIds: message.joinedIds ?? [],
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
    await settled();

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
    const files = await message.takeFiles((path) => turnShows(dir, scope, path));
    const reminders = await around.setReminders();
    for (const problem of [...files.problems, ...reminders.problems]) logger.warn(`run: ${problem}`);
    if (reminders.set.length) logger.info(`run: set reminder timer(s) ${reminders.set.join(', ')} for thread ${route.threadId}`);
    // An empty answer is nothing to deliver: recorded like NO_REPLY rather than sent and refused.
    if (result.text.trim() === 'NO_REPLY' || (result.text.trim() === '' && files.attachments.length === 0)) {
      await record('decision', { in_reply_to: inboundId, decision: 'no_reply' } satisfies DecisionRecord, outcomeKey);
      logger.info(`run: NO_REPLY to thread ${route.threadId} event ${inboundId}${files.attachments.length ? ` (${files.attachments.length} attached file(s) not sent)` : ''}`);
      return 'no_reply';
    }
    await pushReply(thread, target, inboundId, result.text, outcomeKey, files.attachments);
    answered = true;
    if (target.problem) logger.warn(`run: the answer in thread ${route.threadId} to event ${inboundId} is kept there: ${target.problem}`);
    logger.info(`run: replied in thread ${route.threadId} to event ${inboundId} (${result.toolRounds} tool rounds, ${result.usage.input}+${result.usage.output} tokens)`);
    return 'replied';
  } catch (error) {
    // A full or read-only disk is no answer: the message stays unacknowledged and is answered on
    // the run after the disk recovers (the error record could not be written anyway, or would
    // consume the message for good if it could).
    if (isStorageError(error)) throw error;
    // The records the model's events made before it failed go first (a storage error among them is thrown, as above).
    await settled().catch((failed: unknown) => {
      if (isStorageError(failed)) throw failed;
    });
    const stoppedBy = turn.running?.stoppedBy ?? null;
    if (stoppedBy !== null) {
      // Not a failure: the person asked for it, and their `/stop` gets the answer.
      await record('decision', { in_reply_to: inboundId, decision: 'stopped', stopped_by_inbox_id: stoppedBy } satisfies DecisionRecord, outcomeKey);
      logger.info(`run: the turn for thread ${route.threadId} event ${inboundId} was stopped by inbox event ${stoppedBy} (a /stop, or a newer message in queue mode interrupt)`);
      return 'stopped';
    }
    // Told to the person and recorded (unrecoverable), or thrown as ModelOutage: see failure.ts. A
    // turn over the limit is not retried: the retry would bill the model again for the same end.
    const cause = turn.running?.timedOut ? overTurnLimit(config.turn) : error;
    let failure;
    try {
      failure = await answerFailure({ thread, config, event, inboundId, outcomeKey, replyContext: target.replyContext, redact: turn.redact }, cause);
    } catch (outage) {
      await attempt?.waits();
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
