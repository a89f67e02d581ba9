import { parseMessageContent } from '../../core/message.js';
import { isStorageError } from '../../core/storage-error.js';
import type { Logger } from '../../core/logger.js';
import type { PaiConfig, ResolvedModel } from '../../pai/index.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { withAgentThread } from '../threads.js';
import type { AgentDir } from '../agent-dir.js';
import { chatCommandArgument, chatCommandHelp, type ChatCommand } from '../chat-commands.js';
import { type Summarise, describeUsage, plusUsage, threadUsage, NO_USAGE } from '../accounting/index.js';
import { startFreshConversation } from '../turn/index.js';
import { approvalReply } from './owner-approval.js';
import { tasksReply } from '../tasks.js';
import { isOwner, type Policy } from '../policy/index.js';
import { storedConversationThreads } from '../lifecycle.js';
import type { AgentConfig, DecisionRecord, QueueMode, ThreadRoute } from '../types.js';
import { compactNow } from './compact-now.js';
import { allowedModels, modelReply, sessionSettings, thinkReply, verboseReply } from './session-settings.js';
import { agentQueueMode, describeQueueMode, queueMode, queueReply } from './queue-mode.js';

/**
 * The answers to chat commands (chat-commands.ts), made by the runtime without the model. Each
 * returns the reply's text; a failure other than the disk's is the reply too, so that the person
 * always hears back.
 */
export interface CommandContext {
  home: string;
  dir: AgentDir;
  route: ThreadRoute;
  thread: StoredThread;
  /** The command's inbox event. */
  inboxEvent: ThreadEvent;
  /** The command's event in the conversation thread. */
  commandId: number;
  /** The thread's running summary file. */
  summaryFile: string;
  /** The conversation's model (session-settings.ts), or why it cannot be used. */
  model: ResolvedModel | Error;
  config: AgentConfig;
  paiConfig: PaiConfig;
  env: NodeJS.ProcessEnv;
  mixedPeople: boolean;
  /** The summariser for `/new` and `/compact`; throws when the model cannot be used. */
  summarise: Summarise;
  redact: (text: string) => string;
  logger: Logger;
  /** Who may `/approve` and `/deny`, and see the whole agent in `/status`. */
  policy: Policy;
  now?: Date;
}

export async function answerChatCommand(command: ChatCommand, context: CommandContext): Promise<string> {
  try {
    switch (command) {
      case 'help':
        return chatCommandHelp();
      case 'new':
      case 'reset':
        return await startFreshConversation({
          command,
          thread: context.thread,
          threadId: context.route.threadId,
          memoryDir: context.dir.memory,
          summaryFile: context.summaryFile,
          commandId: context.commandId,
          sentAt: context.inboxEvent.created_at,
          contextWindow: context.model instanceof Error ? 0 : context.model.contextWindow,
          mixedPeople: context.mixedPeople,
          summarise: context.summarise,
          redact: context.redact,
          logger: context.logger,
        });
      case 'stop':
        return (await stoppedTurns(context.thread, context.inboxEvent.id)) > 0 ? 'Stopped.' : 'Nothing is running.';
      case 'status':
        return await statusReply(context);
      case 'usage':
        return await usageReply(context);
      case 'approve':
      case 'deny':
        return approvalReply(command, context.inboxEvent, context.dir, context.policy, context.home);
      case 'tasks': {
        const [, argument = null, id = null] = parseMessageContent(context.inboxEvent.content).text.trim().split(/\s+/);
        return await tasksReply(context.home, context.dir, context.route.threadId, argument, id);
      }
      case 'model':
        // It changes what the agent costs: the owner's to choose.
        if (!isOwner(context.policy, context.inboxEvent.source)) return ownerOnly(command);
        return await modelReply(context.thread, allowedModels(context.config, context.paiConfig, context.env), modelName(context), argumentOf(context));
      case 'think':
        if (!isOwner(context.policy, context.inboxEvent.source)) return ownerOnly(command);
        return await thinkReply(context.thread, argumentOf(context));
      case 'compact':
        return await compactNow({
          thread: context.thread,
          memoryDir: context.dir.memory,
          summaryFile: context.summaryFile,
          commandId: context.commandId,
          context: context.config.context,
          contextWindow: context.model instanceof Error ? 0 : context.model.contextWindow,
          mixedPeople: context.mixedPeople,
          summarise: context.summarise,
          logger: context.logger,
          instructions: parseMessageContent(context.inboxEvent.content)
            .text.trim()
            .replace(/^\S+\s*/, ''),
        });
      case 'verbose':
        return await verboseReply(context.thread, argumentOf(context));
      case 'queue':
        return await queueReply(context.thread, argumentOf(context), defaultQueueMode(context), context.config.queue.debounce_ms);
    }
  } catch (error) {
    // A full or read-only disk: the command waits in the inbox like any message, and is answered later.
    if (isStorageError(error)) throw error;
    const message = context.redact(error instanceof Error ? error.message : String(error));
    context.logger.error(`run: /${command} in thread ${context.route.threadId} failed: ${message}`);
    return `Error: /${command} failed: ${message} - see the agent log (${context.dir.log})`;
  }
}

async function settingsLines(context: CommandContext): Promise<string[]> {
  const settings = await sessionSettings(context.thread);
  const mode = queueMode(settings.queue, defaultQueueMode(context), context.route, context.inboxEvent.source);
  return [`Thinking: ${settings.think ?? 'off'}`, `Verbose: ${settings.verbose ? 'on' : 'off'}`, `Queue mode: ${describeQueueMode(mode, context.config.queue.debounce_ms)}`];
}

/** The conversation's mode when it chose none with `/queue`. */
function defaultQueueMode(context: CommandContext): QueueMode {
  return queueMode(null, agentQueueMode(context.config, context.env), context.route, context.inboxEvent.source);
}

function ownerOnly(command: ChatCommand): string {
  return `Error: only the owner may use /${command} (it changes what the agent costs) - ask the owner`;
}

/** The word after the command, or null. */
function argumentOf(context: CommandContext): string | null {
  return chatCommandArgument(parseMessageContent(context.inboxEvent.content).text);
}

function modelName(context: CommandContext): string {
  const { model } = context;
  return model instanceof Error ? `not available (${context.redact(model.message)})` : `${model.provider}/${model.model}`;
}

/** How many turns of the thread the `/stop` with this inbox id ended (see turn-stop.ts). */
async function stoppedTurns(thread: StoredThread, stopInboxId: number): Promise<number> {
  // The turns it ended are the ones just before it in this thread.
  return (await thread.peek({ filter: "type = 'record' AND subtype = 'decision'", last: 100 })).filter((event) => {
    const decision = JSON.parse(event.content) as DecisionRecord;
    return decision.decision === 'stopped' && decision.stopped_by_inbox_id === stopInboxId;
  }).length;
}

/** The owner's status of the agent; anyone else's is of their own conversation only. */
async function statusReply(context: CommandContext): Promise<string> {
  const { dir } = context;
  const today = todayUtc(context.now);
  const conversation = await threadUsage(context.thread, today);
  if (!isOwner(context.policy, context.inboxEvent.source)) return [`Agent: ${dir.id}`, `Today (${today}, UTC): this conversation ${describeUsage(conversation)}`].join('\n');
  let agent = NO_USAGE;
  for (const path of await storedConversationThreads(context.home, dir, context.env)) {
    agent = plusUsage(agent, path === context.route.path ? conversation : await withAgentThread(context.home, path, (thread) => threadUsage(thread, today), context.env));
  }
  return [
    `Agent: ${dir.id}`,
    `Model: ${modelName(context)}`,
    ...(await settingsLines(context)),
    `Today (${today}, UTC): this conversation ${describeUsage(conversation)}; all conversations ${describeUsage(agent)}`,
    `Queue: ${plural(await waitingAfter(context), 'message')} waiting in the inbox`,
  ].join('\n');
}

async function usageReply(context: CommandContext): Promise<string> {
  const today = todayUtc(context.now);
  // The upkeep (summaries, memory writes) is in the figures; said apart when there was any.
  const upkeep = await threadUsage(context.thread, undefined, true);
  return [
    `This conversation today (${today}, UTC): ${describeUsage(await threadUsage(context.thread, today))}`,
    `In total: ${describeUsage(await threadUsage(context.thread))}`,
    ...(upkeep.calls > 0 ? [`Of these in total, summaries and memory upkeep: ${describeUsage(upkeep)}`] : []),
  ].join('\n');
}

/** Inbox messages after this command: waiting for this run or the next. */
async function waitingAfter(context: CommandContext): Promise<number> {
  return withAgentThread(context.home, context.dir.inbox, async (inbox) => (await inbox.peek({ afterId: context.inboxEvent.id, filter: "type = 'message'", limit: 100_000 })).length, context.env);
}

function todayUtc(now = new Date()): string {
  return now.toISOString().slice(0, 10);
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
