import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { chatCommandOf } from '../chat-commands.js';
import { withGroupContext } from '../context.js';
import { OUTBOUND_CONSUMER } from '../lifecycle.js';
import { answerTarget, readInbound } from '../reply-context.js';
import type { ErrorFeedEntry } from '../accounting/index.js';
import type { MessageOutcome, TakenMessage, TurnSettings } from '../turn/index.js';
import type { ThreadRoute } from '../types.js';
import { modelInput, ownFile } from './attachments.js';
import { replyProgress } from './reply-progress.js';
import { takeAttachments } from './reply-files.js';
import { receiveFiles, shareReplyFiles } from './shared-files.js';
import { answerUnheardVoice, hearVoice, unheardVoice } from './voice.js';
import { pushOnce } from '../threads.js';

/**
 * The first stage of a message's path (run.ts handleTurn): puts the inbox message into its
 * conversation thread, its voice transcribed (voice.ts), and reads it. Its outcome instead, when
 * it was answered before a crash, or when it is a voice message that could not be heard (and no
 * chat command, which the next stage answers).
 */
export async function takeApart(turn: TurnSettings, thread: StoredThread, route: ThreadRoute, event: ThreadEvent): Promise<TakenMessage | MessageOutcome> {
  const { dir, logger } = turn;
  // The inbox event's id is the key: a message put into its thread before a crash is not put twice.
  // Its files are fetched first where they are on another host (shared-files.ts), and a voice
  // message's words transcribed (voice.ts), once: a retried turn finds them there.
  const inboxKey = `inbox:${event.id}`;
  const heard =
    (await thread.findByKey(inboxKey)) === undefined
      ? await hearVoice(await receiveFiles(turn.home, dir, event, turn.env, logger), { dir, paiConfig: turn.paiConfig, env: turn.env, signal: turn.running?.signal })
      : undefined;
  const { id: inboundId } = await pushOnce(thread, { source: event.source, type: 'message', content: heard?.content ?? event.content, idempotency_key: inboxKey });
  const outcomeKey = `reply:${inboundId}`;
  if ((await thread.findByKey(outcomeKey)) !== undefined) {
    logger.info(`run: inbox event ${event.id} was handled before (thread ${route.threadId} event ${inboundId}); not answered twice`);
    return 'already_handled';
  }
  const stored = heard?.content ?? (await thread.peek({ afterId: inboundId - 1, limit: 1 }))[0]?.content ?? event.content;
  const inbound = readInbound({ ...event, content: stored });
  const target = await answerTarget(thread, inbound, inboundId);
  if (unheardVoice(inbound.attachments) && chatCommandOf(event) === null) {
    const record = await answerUnheardVoice({ thread, inboundId, outcomeKey, replyContext: target.replyContext, paiConfig: turn.paiConfig, problem: heard?.problem, redact: turn.redact });
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
  return {
    inboundId,
    outcomeKey,
    inbound,
    target,
    input: (seesImages) => modelInput(dir, withGroupContext(inbound.text, { source: event.source, content: stored }), inbound.attachments, seesImages),
    carried: () => inbound.attachments.flatMap((attachment) => ownFile(dir, attachment) ?? []),
    progress: () => replyProgress(turn.home, target.replyContext, logger, turn.redact, () => thread.hasPending(OUTBOUND_CONSUMER)),
    takeFiles: async (shows) => {
      const taken = takeAttachments(turn.home, dir, route.threadId, shows);
      await shareReplyFiles(turn.home, dir, taken.attachments, turn.env);
      return taken;
    },
  };
}
