import type { Logger } from '../../core/logger.js';
import type { ModelCaller, PaiConfig, ReasoningLevel, ResolvedModel } from '../../pai/index.js';
import type { StoredThread } from '../../thread/index.js';
import type { Attachment } from '../../core/message.js';
import type { ImageRef } from '../../pai/index.js';
import type { AgentDir } from '../agent-dir.js';
import type { MemoryDoors } from '../memory/index.js';
import type { AnswerTarget, Inbound } from '../reply-context.js';
import { accountedSummariser, type CallAccount, type feedCopier, type SpendLedger, type Summarise } from '../accounting/index.js';
import type { AgentConfig, ThreadRoute, UpkeepPurpose } from '../types.js';
import { recordWriter } from '../threads.js';
import { callModel } from './model-call.js';
import type { RunningTurn } from './turn-stop.js';

/** What every stage of a message's path (run.ts handleTurn) works with: the run's agent, model and doors. */
export interface TurnSettings {
  home: string;
  /** Where the turns' memory searches get embeddings (memory-embedder.ts); null: none. */
  embeddingsSocket: string | null;
  /** Where the turns' `browser` commands reach the agent's browser (browser/proxy.ts); null: none. */
  browserSocket: string | null;
  /** Where the turns' `web search` commands search with the owner's key (web/search-door.ts); null: none. */
  searchSocket: string | null;
  /** Where the turns' memory searches read the threads in a PostgreSQL store (memory-door.ts); null: none, they read their files. */
  memoryDoors: MemoryDoors | null;
  dir: AgentDir;
  config: AgentConfig;
  paiConfig: PaiConfig;
  /** The conversation's model, or why it could not be resolved. */
  model: ResolvedModel | Error;
  /** The conversation's `/think` level; none: not asked. */
  reasoning?: ReasoningLevel;
  /** The conversation's `/verbose`: its chat is shown the commands a turn runs. */
  toolProgress?: boolean;
  /** Its `pai.fallbacks`, resolved (failover.ts). */
  fallbacks: ResolvedModel[];
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Removes secret values (environment keys and tokens) from text that goes into records. */
  redact: (text: string) => string;
  caller?: ModelCaller;
  /** The message's turn: `/stop` aborts its signal. */
  running?: RunningTurn;
  /** Puts an approval request into the owner's direct chat with the agent; false when there is none. */
  tellOwner: (text: string) => Promise<boolean>;
  /** The agent's spend caps and what they count (budget.ts). */
  spend: SpendLedger;
  /** Errors and commands go to the system agents' feeds too (feeds.ts). */
  toFeed: ReturnType<typeof feedCopier>;
}

/** How a message ended: what the run's summary counts. */
export type MessageOutcome = 'replied' | 'no_reply' | 'stopped' | 'error' | 'already_handled' | 'joined';

/** How one message's calls are counted and recorded: the turn's and the upkeep's alike (accounting.ts). */
export interface MessageAccount {
  account: CallAccount;
  /** Puts a record into the message's thread; records are stored in the order they are made. */
  record: (subtype: string, content: object, idempotencyKey?: string) => Promise<number>;
  /**
   * Waits for the records made so far and throws the first that failed: a model's events are
   * recorded as they come, without waiting, and a record that cannot be stored fails the turn.
   */
  settled: () => Promise<void>;
  /** A summariser for an upkeep call (compaction, memory flush, ...), counted against this message. */
  upkeep: (purpose: UpkeepPurpose) => Summarise;
}

export function messageAccount(turn: TurnSettings, thread: StoredThread, route: ThreadRoute, inboundId: number): MessageAccount {
  const { record, settled } = recordWriter(thread);
  // Every call for this message is counted alike, the upkeep's too (accounting.ts).
  const account: CallAccount = { spend: turn.spend, peer: route.peerKey ?? route.threadId, inReplyTo: inboundId, record };
  const upkeep = (purpose: UpkeepPurpose): Summarise => {
    const model = turn.model;
    if (model instanceof Error) return () => Promise.reject(model);
    return accountedSummariser(account, model, purpose, (system, input, onEvent) => callModel({ ...turn, model }, { input, system, tools: false, onEvent }));
  };
  return { account, record, settled, upkeep };
}

/** What the model is given of a message: its text, and its files. */
export interface ModelInput {
  text: string;
  images: ImageRef[];
}

/** What the person sees of a turn while it runs (delivery/reply-progress.ts). */
export interface ReplyProgress {
  /** More of the answer's text, as the model streams it. */
  written(delta: string): void;
  /** The model turned to a command: what it wrote so far is not the answer. */
  restart(): void;
  /** A command of the turn starts (as the model asked for it). */
  running(command: string): void;
  /** The turn is over; `answered`: an answer was put in the thread, and replaces the draft. */
  end(answered: boolean): void;
}

/**
 * A message taken apart (delivery/take-apart.ts): put into its thread, read, and what the turn
 * needs of delivery as functions, so that the turn room need not know it.
 */
export interface TakenMessage {
  inboundId: number;
  /**
   * Messages before it in the thread that joined its turn (queue mode collect): their words are in
   * `input`, so the history leaves them out. Default: none.
   */
  joinedIds?: readonly number[];
  /** What answers it (reply, NO_REPLY decision, error record) carries this key: one outcome per message. */
  outcomeKey: string;
  inbound: Inbound;
  target: AnswerTarget;
  /** What the model is given (attachments.ts). */
  input: (seesImages: boolean) => ModelInput;
  /** The agent's own files this message carries, which its commands may see. */
  carried: () => string[];
  /** The answer's progress, shown where it goes (reply-progress.ts). */
  progress: () => ReplyProgress;
  /** The files the turn's commands attached that its commands could see (reply-files.ts), in the store too where hosts share it. */
  takeFiles: (shows: (path: string) => boolean) => Promise<{ attachments: Attachment[]; problems: string[] }>;
}
