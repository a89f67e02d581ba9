import { ClawError } from '../../core/errors.js';
import { splitText } from '../split.js';
import type { ChannelSendOptions, OutboundFile } from '../types.js';

/**
 * Sends a text split into parts of at most `limit` (see splitText), one platform call each;
 * parts of only white space are left out (platforms refuse them as empty). Skips the parts an earlier attempt
 * sent (`options.sent`: the same text splits the same way) and reporting each part sent
 * (`options.onPart`) before the next. A failure says how many parts went out before it. Files
 * (`files`, with the channel's way to send one) are parts after the text, each one message; with
 * files, the text may be empty.
 */
export async function sendInParts(
  channelId: string,
  text: string,
  limit: number,
  options: ChannelSendOptions,
  sendPart: (chunk: string, index: number) => Promise<string>,
  toError: (error: unknown, partly: string) => ClawError,
  files?: { items: readonly OutboundFile[]; send: (file: OutboundFile) => Promise<string> },
): Promise<{ messageIds: string[] }> {
  const { signal } = options;
  const chunks = splitText(text, limit).filter((chunk) => chunk.trim() !== '');
  const parts: (() => Promise<string>)[] = [...chunks.map((chunk, index) => () => sendPart(chunk, index)), ...(files?.items ?? []).map((file) => () => files!.send(file))];
  if (parts.length === 0) throw new ClawError('usage', 'the text is empty', { suggestion: 'send some text' });
  const messageIds = [...(options.sent ?? [])].slice(0, parts.length);
  for (let index = messageIds.length; index < parts.length; index++) {
    try {
      if (signal?.aborted) throw new ClawError('aborted', `sending to ${channelId} was aborted`);
      messageIds.push(await parts[index]!());
    } catch (error) {
      const partly = index > 0 ? ` after ${index} of ${parts.length} parts were sent (ids ${messageIds.join(', ')})` : '';
      throw signal?.aborted
        ? new ClawError('aborted', `sending to ${channelId} was aborted${partly}`, { suggestion: 'send it again with the same idempotency key to send the rest' })
        : toError(error, partly);
    }
    options.onPart?.(messageIds);
  }
  return { messageIds };
}
