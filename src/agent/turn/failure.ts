import { ClawError, isClawError } from '../../core/errors.js';
import type { NoticeKind, ReplyContext } from '../../core/message.js';
import { ModelCallError } from '../../pai/index.js';
import type { PushInput, StoredThread, ThreadEvent } from '../../thread/index.js';
import type { AgentConfig, ErrorRecord } from '../types.js';
import { UpkeepSkipped } from '../accounting/index.js';

/**
 * What becomes of a message whose model call failed for good (pai has retried what it retries).
 * Failures are told apart by structure (the ModelError's kind), never by text:
 *
 * - unrecoverable (credentials refused, a bad request, no such model, a broken config, a bug):
 *   the person gets an error notice instead of an answer, and an error record is the message's
 *   one outcome (key `reply:<inbound id>`).
 * - outage (unreachable, 5xx, 429, timeout): no outcome. ModelOutage is thrown, so the message
 *   stays unacknowledged in the inbox, later messages of its conversation wait behind it, and the
 *   run fails: notifier retries it with backoff and the answer comes once the model is back.
 *   Once the message has waited `notices.delayed_after_seconds`, the person gets one delayed notice.
 *
 * A notice is a `source: self` message with the inbound's reply_context, delivered like an answer
 * and marked with `notice` so that chat clients can tell it from one. Its text is the agent's
 * wording with a reason of ours: the provider's text goes to the record and the log only.
 */
export type FailureClass = 'unrecoverable' | 'outage';

export interface ModelFailure {
  class: FailureClass;
  /** The ModelError's kind; `internal` for anything else (a model that does not resolve, a bug). */
  kind: string;
  status: number | null;
  /** A few words for the person, e.g. "the model refused the request (401)". */
  reason: string;
}

/**
 * A turn the runtime gives up on, whatever the model did: it ran past the turn limit
 * (`timeout`), or it was cut off `turn.max_attempts` times (`crashed`, see turn-attempts.ts).
 * Unrecoverable: retrying would bill the model again for the same end.
 */
export class TurnAbandoned extends Error {
  override name = 'TurnAbandoned';

  constructor(
    readonly kind: 'timeout' | 'crashed' | 'over_budget',
    /** A few words for the person. */
    readonly reason: string,
  ) {
    super(reason);
  }
}

export function classifyFailure(error: unknown): ModelFailure {
  if (error instanceof TurnAbandoned) return { class: 'unrecoverable', kind: error.kind, status: null, reason: error.reason };
  if (!(error instanceof ModelCallError)) {
    // A model that cannot be resolved (unknown provider or model, no base_url) is a ClawError of
    // pai's; anything else is a fault of ours.
    const reason = isClawError(error) ? 'the model is not set up correctly' : 'something went wrong on my side';
    return { class: 'unrecoverable', kind: 'internal', status: null, reason };
  }
  const { kind, status } = error.modelError;
  const withStatus = (words: string) => (status === null ? words : `${words} (${status})`);
  // The caller's signal (a run being stopped) is no verdict on the message: it waits like in an outage.
  const outage = error.modelError.recoverable || kind === 'aborted';
  const reason = (() => {
    switch (kind) {
      case 'auth':
        return status === null ? 'the model has no API key' : withStatus('the model refused the request');
      case 'invalid_request':
        return status === 404 ? withStatus('the model was not found') : withStatus('the model refused the request');
      case 'context_length':
        return 'the conversation is too long for the model, even shortened';
      case 'network':
        return 'the model cannot be reached';
      case 'timeout':
        return 'the model did not answer in time';
      case 'rate_limit':
        return withStatus('the model is busy');
      case 'server':
        return withStatus('the model is failing');
      case 'aborted':
        return 'the answer was interrupted';
      case 'unknown':
        return 'the model is not set up correctly';
    }
  })();
  return { class: outage ? 'outage' : 'unrecoverable', kind, status, reason };
}

/** The agent's wording with `{reason}` and `{status}` filled in. */
export function noticeText(template: string, failure: ModelFailure): string {
  return template.replaceAll('{reason}', failure.reason).replaceAll('{status}', failure.status === null ? '' : String(failure.status));
}

/** A message left waiting for the model: the run fails with it, so that notifier retries with backoff. */
export class ModelOutage extends ClawError {
  override name = 'ModelOutage';

  constructor(
    readonly failure: ModelFailure,
    /** What went wrong, secrets removed: for the log and the owner. */
    detail: string,
  ) {
    super('upstream', `the model is unavailable: ${detail}`, {
      suggestion: 'the message waits and is answered once the model is back (notifier retries with backoff); theclaw retry tries now',
    });
  }
}

export interface FailedMessage {
  thread: StoredThread;
  config: AgentConfig;
  /** The inbox event: its time is when the message arrived. */
  event: ThreadEvent;
  /** The message in its conversation thread. */
  inboundId: number;
  /** The key of the message's one outcome (see run.ts). */
  outcomeKey: string;
  /** Where an answer would go; null: nobody to tell. */
  replyContext: ReplyContext | null;
  /** Removes secret values from what goes into records. */
  redact: (text: string) => string;
  now?: number;
}

/**
 * Deals with a failed model call as described above: returns the failure once the notice and the
 * record are stored, or throws ModelOutage (with the delayed notice stored when it is due).
 */
export async function answerFailure(message: FailedMessage, error: unknown): Promise<ModelFailure> {
  const { thread, config, inboundId, replyContext } = message;
  const failure = classifyFailure(error);
  const detail = message.redact(error instanceof Error ? error.message : String(error));
  if (failure.class === 'outage') {
    const waitedMs = (message.now ?? Date.now()) - Date.parse(message.event.created_at);
    // Only to people: an agent that asked gets the answer later anyway, and a notice would cost it a turn.
    if (replyContext?.kind === 'external' && waitedMs >= config.notices.delayed_after_seconds * 1000) {
      await thread.append([noticeEvent('delayed', noticeText(config.notices.delayed, failure), replyContext, inboundId)]);
    }
    throw new ModelOutage(failure, detail);
  }
  // Both in one transaction: a crash never leaves the outcome without its notice.
  const record: ErrorRecord = {
    in_reply_to: inboundId,
    stage: error instanceof TurnAbandoned ? 'turn' : 'llm',
    error: detail,
    kind: failure.kind,
    ...(error instanceof ModelCallError ? { status: failure.status } : {}),
  };
  await thread.append([
    ...(replyContext ? [noticeEvent('error', noticeText(config.notices.error, failure), replyContext, inboundId)] : []),
    { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: message.outcomeKey },
  ]);
  return failure;
}

/** A notice to the person instead of (or before) an answer to `inboundId`, once. */
export function noticeEvent(kind: NoticeKind, text: string, replyContext: ReplyContext, inboundId: number): PushInput {
  return {
    source: 'self',
    type: 'message',
    content: JSON.stringify({ text, attachments: [], reply_context: replyContext, in_reply_to: inboundId, notice: kind }),
    idempotency_key: `${kind}-notice:${inboundId}`,
  };
}

/** A notice is the runtime speaking, not the model: it is left out of the history the model sees. */
export function isNotice(event: ThreadEvent): boolean {
  if (event.source !== 'self' || event.type !== 'message') return false;
  try {
    return (JSON.parse(event.content) as { notice?: unknown }).notice !== undefined;
  } catch {
    return false;
  }
}

/**
 * A warning record: something beside the answer failed (a summary, a memory flush, condensing a
 * memory file) and the message is answered all the same. `what` says what failed and what it
 * means; the error's text follows it, without secrets, and is returned for the log.
 */
export function warningRecord(inReplyTo: number, stage: ErrorRecord['stage'], what: string, error: unknown, redact: (text: string) => string): { record: ErrorRecord; message: string } {
  const message = redact(error instanceof Error ? error.message : String(error));
  return {
    message,
    record: {
      in_reply_to: inReplyTo,
      stage,
      severity: 'warning',
      error: `${what}: ${message}`,
      ...(error instanceof ModelCallError ? { kind: error.modelError.kind, status: error.modelError.status } : { kind: error instanceof UpkeepSkipped ? 'over_budget' : 'internal' }),
    },
  };
}
