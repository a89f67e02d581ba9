import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { chatCommandOf } from '../chat-commands.js';
import { memoryFiles } from '../context.js';
import { pushReply } from '../reply-context.js';
import { mixesPeople } from '../router.js';
import type { MessageAccount, MessageOutcome, TakenMessage, TurnSettings } from '../turn/index.js';
import type { ThreadRoute } from '../types.js';
import { answerChatCommand } from './command-replies.js';

/**
 * The second stage of a message's path (run.ts handleTurn): a chat command (`/new`, `/stop`,
 * `/approve`, ...: chat-commands.ts) is answered here, without the model. Null: the message is
 * for the model.
 */
export async function answerCommand(
  turn: TurnSettings,
  thread: StoredThread,
  route: ThreadRoute,
  event: ThreadEvent,
  message: TakenMessage,
  { upkeep }: MessageAccount,
): Promise<MessageOutcome | null> {
  const command = chatCommandOf(event);
  if (!command) return null;
  const { inboundId } = message;
  const text = await answerChatCommand(command, {
    ...turn,
    route,
    thread,
    inboxEvent: event,
    commandId: inboundId,
    summaryFile: memoryFiles(turn.dir, route).thread,
    mixedPeople: mixesPeople(route),
    summarise: upkeep('new_conversation'),
    policy: turn.config.policy,
  });
  await pushReply(thread, message.target, inboundId, text, message.outcomeKey);
  turn.logger.info(`run: answered /${command} in thread ${route.threadId} (event ${inboundId})`);
  return 'replied';
}
