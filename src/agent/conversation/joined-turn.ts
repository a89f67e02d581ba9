import type { StoredThread } from '../../thread/index.js';
import { spokenBy } from '../context.js';
import type { ModelInput, TakenMessage } from '../turn/index.js';
import type { DecisionRecord } from '../types.js';
import { push } from '../threads.js';

/**
 * Messages that one turn answers together (queue modes collect and steer: queue-mode.ts). Each one
 * that joins another's turn gets its outcome, a `joined` decision, before the turn is answered: a
 * crash after it leaves the message answered by the turn's message alone, which the next run
 * answers once (the joined one is in its history), and never twice.
 */
/** One of the messages a turn answers, and who sent it. */
export interface TurnPart {
  message: TakenMessage;
  /** Its sender's address: named in the turn's input where the thread mixes people. */
  source: string;
}

/** Records that `message` is answered by the turn of the message whose thread event is `turnOf`. */
export async function recordJoined(thread: StoredThread, message: TakenMessage, turnOf: number): Promise<void> {
  const record: DecisionRecord = { in_reply_to: message.inboundId, decision: 'joined', turn_of: turnOf };
  await push(thread, { source: 'self', type: 'record', subtype: 'decision', content: JSON.stringify(record), idempotency_key: message.outcomeKey });
}

/** What the model is given of a message that joins a turn: its words and files, named where the thread mixes people. */
export function partInput({ message, source }: TurnPart, mixedPeople: boolean, seesImages: boolean): ModelInput {
  const input = message.input(seesImages);
  return mixedPeople ? { ...input, text: spokenBy(source, input.text) } : input;
}

/**
 * Messages collected into one turn (collect), as one message: the last one is answered (its
 * answer target, its reply files); the model is given all their words and files, in order.
 */
export async function collectedMessage(thread: StoredThread, collected: readonly TurnPart[], mixedPeople: boolean): Promise<TakenMessage> {
  const last = collected.at(-1)!.message;
  const earlier = collected.slice(0, -1);
  for (const { message } of earlier) await recordJoined(thread, message, last.inboundId);
  return {
    ...last,
    joinedIds: earlier.map(({ message }) => message.inboundId),
    input: (seesImages) => {
      const inputs = collected.map((part) => partInput(part, mixedPeople, seesImages));
      return { text: inputs.map((input) => input.text).join('\n\n'), images: inputs.flatMap((input) => input.images) };
    },
    carried: () => collected.flatMap(({ message }) => message.carried()),
  };
}
