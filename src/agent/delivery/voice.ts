import { ClawError } from '../../core/errors.js';
import { formatMessageContent, parseMessageContent, type Attachment, type MessageContent, type ReplyContext } from '../../core/message.js';
import { ModelCallError, transcribe, type PaiConfig } from '../../pai/index.js';
import type { StoredThread } from '../../thread/index.js';
import type { AgentDir } from '../agent-dir.js';
import { ownFile } from './attachments.js';
import { noticeEvent } from '../turn/index.js';
import type { ErrorRecord } from '../types.js';

/**
 * Voice messages. xgw stores them as `voice` files like any other (it has no provider keys); the
 * runtime transcribes them with pai (`transcription.model` in pai's config) before the message
 * goes into its conversation thread, once: the thread keeps the words as the message's text,
 * after the caption if there is one, and the file, marked `transcribed`, so the model, the
 * history and memory search read what was said. A voice message that could not be heard (no
 * transcription model, a failed call, no words) is answered with a notice instead of a turn.
 */

/** What the person is told of a voice message that was not heard. */
export const VOICE_NOT_TAKEN = 'I cannot take voice messages yet: please write it as text.';
export const VOICE_NOT_HEARD = 'I could not make out that voice message: please write it as text.';

export interface Heard {
  /** The message content to store: with the words, or as it came. */
  content: string;
  /** Why a voice message of it was not transcribed though a model is configured. */
  problem?: unknown;
}

/** The content with its voice messages' words (see above); as it came when it has none, or they could not be heard. */
export async function hearVoice(content: string, options: { dir: AgentDir; paiConfig: PaiConfig; env: NodeJS.ProcessEnv; signal?: AbortSignal }): Promise<Heard> {
  let message: MessageContent;
  try {
    message = parseMessageContent(content);
  } catch {
    return { content }; // plain text pushed by hand
  }
  if (!unheardVoice(message.attachments) || !options.paiConfig.transcription) return { content };
  const words: string[] = [];
  try {
    for (const attachment of message.attachments) {
      if (attachment.type !== 'voice') continue;
      const path = ownFile(options.dir, attachment);
      if (path === undefined) throw new ClawError('invalid', `the voice message is not in the agent's files (${attachment.path ?? attachment.url ?? 'no path'})`);
      const heard = await transcribe({ path, ...(attachment.mime_type ? { mime_type: attachment.mime_type } : {}) }, { config: options.paiConfig, env: options.env, signal: options.signal });
      if (heard === '') throw new ClawError('upstream', 'the transcription found no words in the voice message');
      words.push(heard);
    }
  } catch (error) {
    return { content, problem: error };
  }
  const text = [message.text.trim(), ...words].filter((part) => part !== '').join('\n\n');
  const attachments = message.attachments.map((attachment) => (attachment.type === 'voice' ? { ...attachment, transcribed: true } : attachment));
  return { content: formatMessageContent({ ...message, text, attachments }) };
}

/** Whether a message holds a voice message whose words it does not carry. */
export function unheardVoice(attachments: readonly Attachment[]): boolean {
  return attachments.some((attachment) => attachment.type === 'voice' && !attachment.transcribed);
}

export interface UnheardMessage {
  thread: StoredThread;
  inboundId: number;
  /** The key of the message's one outcome (see run.ts). */
  outcomeKey: string;
  replyContext: ReplyContext | null;
  paiConfig: PaiConfig;
  /** Why it was not heard, when a transcription was tried (see Heard). */
  problem?: unknown;
  /** Removes secret values from what goes into records. */
  redact: (text: string) => string;
}

/**
 * Answers a voice message that was not heard: the person gets a notice (that voice messages are
 * not taken, or that this one could not be made out), and an error record is the message's
 * outcome. Returns the record.
 */
export async function answerUnheardVoice(message: UnheardMessage): Promise<ErrorRecord> {
  const { thread, inboundId, replyContext, problem } = message;
  const configured = message.paiConfig.transcription !== undefined;
  const record: ErrorRecord = {
    in_reply_to: inboundId,
    stage: 'transcription',
    error: message.redact(
      problem instanceof Error
        ? problem.message
        : problem !== undefined
          ? String(problem)
          : configured
            ? 'the voice message was not transcribed'
            : 'no transcription model is configured (transcription in pai/config.yaml)',
    ),
    kind: problem instanceof ModelCallError ? problem.modelError.kind : configured ? 'failed' : 'not_configured',
    ...(problem instanceof ModelCallError ? { status: problem.modelError.status } : {}),
  };
  // Both in one transaction: a crash never leaves the outcome without its notice.
  await thread.append([
    ...(replyContext ? [noticeEvent('error', configured ? VOICE_NOT_HEARD : VOICE_NOT_TAKEN, replyContext, inboundId)] : []),
    { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: message.outcomeKey },
  ]);
  return record;
}
