import type { ChatEvent, ChatResult, ResolvedModel } from '../../pai/index.js';
import type { SpendLedger } from './budget.js';
import { estimateTokens } from '../tokens.js';
import type { ToolcallRecord, UpkeepPurpose, UsageRecord } from '../types.js';

/**
 * Every model call of a turn is counted the same way: the turn's own calls and the runtime's
 * upkeep calls made for it (the compaction's summary, the memory flush, a memory file's rewrite,
 * the summary `/new` saves). Each `record/usage` goes into the conversation's thread (where
 * `/usage` and `theclaw status` read it) and into the spend ledger, charged to the conversation's
 * person or group (budget.ts), so the caps hold whatever the tokens were spent on.
 */
export interface CallAccount {
  spend: SpendLedger;
  /** Who the spend is charged to: the conversation's person or group (its peer key), else its thread. */
  peer: string;
  /** The message (or heartbeat) the calls are made for. */
  inReplyTo: number;
  /** Pushes a record into the conversation's thread (or the heartbeats'), where the usage records go; returns its event id. */
  record: (subtype: 'toolcall' | 'usage', content: ToolcallRecord | UsageRecord) => Promise<number>;
}

/** Records one model call's usage; `purpose` names the upkeep it was for (none: the turn's answer). */
export function recordUsage(account: CallAccount, model: Pick<ResolvedModel, 'provider' | 'model'>, event: Extract<ChatEvent, { type: 'usage' }>, purpose?: UpkeepPurpose): Promise<number> {
  account.spend.spent(account.peer, event.usage.input + event.usage.output);
  const record: UsageRecord = {
    in_reply_to: account.inReplyTo,
    provider: model.provider,
    model: model.model,
    ...(event.profile ? { profile: event.profile } : {}),
    input_tokens: event.usage.input,
    output_tokens: event.usage.output,
    cost: event.usage.cost,
    duration_ms: event.duration_ms,
    ...(purpose ? { purpose } : {}),
  };
  return account.record('usage', record);
}

/** A call that summarises `input` under the instructions `system` (compaction, memory upkeep). */
export type Summarise = (system: string, input: string) => Promise<string>;

/** An upkeep call not made: it would pass a spend cap. Its caller's fallback applies, as for a failed call. */
export class UpkeepSkipped extends Error {}

/**
 * A summariser for one kind of upkeep that reserves before the call (its input and the model's
 * largest answer, as a turn's call does) and records its usage after. Over a cap it makes no
 * call and throws UpkeepSkipped: the upkeep is given up, never the answer.
 */
export function accountedSummariser(
  account: CallAccount,
  model: ResolvedModel,
  purpose: UpkeepPurpose,
  call: (system: string, input: string, onEvent: (event: ChatEvent) => void) => Promise<ChatResult>,
): Summarise {
  return async (system, input) => {
    const reservation = account.spend.reserve(account.peer, estimateTokens(system, input) + model.maxOutputTokens);
    if (reservation.over) throw new UpkeepSkipped(`not made: ${reservation.over.reason} (budget.${reservation.over.cap})`);
    try {
      const result = await call(system, input, (event) => {
        if (event.type === 'usage') void recordUsage(account, model, event, purpose); // awaited with the turn's records (MessageAccount.settled)
      });
      return result.text;
    } finally {
      reservation.release();
    }
  };
}
