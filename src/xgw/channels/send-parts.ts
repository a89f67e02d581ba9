import { ClawError } from '../../core/errors.js';
import { splitText } from '../split.js';
import type { ChannelSendOptions } from '../types.js';

/**
 * Sends a text split into parts of at most `limit` (see splitText), one platform call each;
 * parts of only white space are left out (platforms refuse them as empty). Skips the parts an earlier attempt
 * sent (`options.sent`: the same text splits the same way) and reporting each part sent
 * (`options.onPart`) before the next. A failure says how many parts went out before it.
 */
export async function sendInParts(
  channelId: string,
  text: string,
  limit: number,
  options: ChannelSendOptions,
  sendPart: (chunk: string, index: number) => Promise<string>,
  toError: (error: unknown, partly: string) => ClawError,
): Promise<{ messageIds: string[] }> {
  const { signal } = options;
  const chunks = splitText(text, limit).filter((chunk) => chunk.trim() !== '');
  if (chunks.length === 0) throw new ClawError('usage', 'the text is empty', { suggestion: 'send some text' });
  const messageIds = [...(options.sent ?? [])].slice(0, chunks.length);
  for (let index = messageIds.length; index < chunks.length; index++) {
    try {
      if (signal?.aborted) throw new ClawError('aborted', `sending to ${channelId} was aborted`);
      messageIds.push(await sendPart(chunks[index]!, index));
    } catch (error) {
      const partly = index > 0 ? ` after ${index} of ${chunks.length} parts were sent (ids ${messageIds.join(', ')})` : '';
      throw signal?.aborted
        ? new ClawError('aborted', `sending to ${channelId} was aborted${partly}`, { suggestion: 'send it again with the same idempotency key to send the rest' })
        : toError(error, partly);
    }
    options.onPart?.(messageIds);
  }
  return { messageIds };
}
