import { isClawError, type ErrorKind } from '../../core/errors.js';
import { backoffMs, sleep } from '../../core/retry.js';
import type { ChannelContext } from '../channel.js';
import type { InboundMessage, InboundOutcome } from '../types.js';

const RECEIVE_ATTEMPTS = 3;
/** Gateway failures that a second try cannot fix. */
const PERMANENT: ReadonlySet<ErrorKind> = new Set(['usage', 'invalid', 'not_found']);
/**
 * Failures of the machine, not of the message: tried again until they pass (or the channel
 * stops), holding back the messages after it, since giving up loses the message.
 */
const ENVIRONMENTAL: ReadonlySet<ErrorKind> = new Set(['disk_full', 'read_only']);

export interface ReceiveRetryOptions {
  /** The channel's id, for the log. */
  channelId: string;
  /** An error as one line without secrets. */
  describe(error: unknown): string;
  /** Aborted when the channel stops: a retry delay under way ends, and the message with it. */
  signal: AbortSignal;
  /** Delay before the second try; doubles per failure, up to 5 s. */
  initialDelayMs: number;
}

/**
 * Hands a message from a platform that does not deliver it again (the channel has confirmed it
 * already) to the gateway, retrying failures that may pass: giving up loses the message (it is
 * logged). A full or read-only disk is waited out however long it lasts; other failures get
 * RECEIVE_ATTEMPTS tries, so that one message the gateway cannot take never wedges the channel.
 * Undefined when the message was dropped.
 */
export async function receiveWithRetries(context: ChannelContext, inbound: InboundMessage, options: ReceiveRetryOptions): Promise<InboundOutcome | undefined> {
  const { logger } = context;
  const { channelId, describe, signal } = options;
  for (let attempt = 1; ; attempt++) {
    try {
      return await context.receive(inbound);
    } catch (error) {
      const permanent = isClawError(error) && PERMANENT.has(error.kind);
      const environmental = isClawError(error) && ENVIRONMENTAL.has(error.kind);
      if (permanent || (attempt >= RECEIVE_ATTEMPTS && !environmental) || signal.aborted) {
        logger.error(`${channelId}: dropped message ${inbound.messageId} from ${JSON.stringify(inbound.peerId)}: ${describe(error)}`);
        return undefined;
      }
      logger.warn(`${channelId}: message ${inbound.messageId} from ${JSON.stringify(inbound.peerId)} failed (${describe(error)}); retrying`);
      try {
        await sleep(backoffMs(attempt, { initialMs: options.initialDelayMs, maxMs: 5000 }), signal);
      } catch {
        return undefined;
      }
    }
  }
}
