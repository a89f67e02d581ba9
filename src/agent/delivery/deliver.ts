import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { formatAddress } from '../../core/address.js';
import { ClawError, isClawError } from '../../core/errors.js';
import { ensureDir, resolveHome } from '../../core/home.js';
import { resolveHomeRef } from '../../core/layout.js';
import { createLogger } from '../../core/logger.js';
import { parseMessageContent, type ReplyContext } from '../../core/message.js';
import { openSqlite } from '../../core/sqlite.js';
import { isStorageError } from '../../core/storage-error.js';
import type { StoredThread, ThreadEvent } from '../../thread/index.js';
import { askXgw, isXgwUnavailable } from '../../xgw/client.js';
import type { XgwRequest } from '../../xgw/index.js';
import { agentDir } from '../agent-dir.js';
import { recordGivenUp } from './given-up.js';
import { agentOfThread, findSender, type Sender } from './sender.js';
import { deliverTaskResult, TASK_CONVERSATION } from '../tasks.js';
import { ANSWER_CONVERSATION } from '../router.js';
import type { ErrorRecord } from '../types.js';
import { openAgentThread, push, withAgentThread } from '../threads.js';

/**
 * `agent deliver --consumer C`: started by notifier when a conversation thread (THECLAW_THREAD, or
 * `--thread`) has replies (`source = self` messages) to deliver. External replies go through the
 * xgw daemon with the idempotency key `<thread>#<event id>@<created_at>`, the thread relative to
 * the home (a retried delivery is not sent twice;
 * the time tells apart the events of a thread made anew where a damaged one was moved away);
 * internal ones are pushed into the asking agent's inbox. A failure is not acknowledged: the
 * run ends with exit 1 and notifier retries with backoff. The attempt count is kept on disk (the
 * agent's `state.db`, or this home's where its directory is on another host: sender.ts);
 * past `deliver.max_attempts` an error record is written, the maintainer is told (given-up.ts:
 * `theclaw retry` sends it again) and the reply is skipped. Only a
 * delivery that was tried and failed is an attempt: while xgw is down, restarting or its channel
 * not up, the reply waits (exit 1, retried with backoff) however long that takes, so that a
 * gateway restart never costs a reply.
 */
export interface DeliverOptions {
  /** Default: THECLAW_THREAD of `env`. */
  thread?: string;
  consumer: string;
  home?: string;
  env?: NodeJS.ProcessEnv;
  /**
   * `deliver.max_attempts` as the handler carries it (`--max-attempts`, lifecycle.ts), for an
   * agent whose directory is on another host. Default: the agent's config here, else 3.
   */
  maxAttempts?: number;
}

export interface DeliverSummary {
  delivered: number;
  skipped: number;
  /** A reply that could not be delivered now; it stays for the next dispatch. */
  failed: boolean;
}

export async function deliverReplies(options: DeliverOptions): Promise<DeliverSummary> {
  const env = options.env ?? process.env;
  const home = options.home ?? resolveHome(env);
  const path = threadToDeliver(home, options.thread, env.THECLAW_THREAD);
  const sender = await findSender(home, agentOfThread(path), env, options.maxAttempts);
  const logger = createLogger(sender.log, { env });
  const thread = await openAgentThread(home, path, {}, env);
  const ref = thread.name;
  const attempts = new AttemptStore(sender.state);
  const summary: DeliverSummary = { delivered: 0, skipped: 0, failed: false };
  try {
    for (const event of await thread.pop(options.consumer, { limit: 100 })) {
      try {
        const waiting = await deliverOne(home, sender, thread, event, env);
        if (waiting) {
          logger.warn(`deliver: event ${event.id} of ${ref} waits: ${waiting} (not counted as an attempt)`);
          summary.failed = true;
          break; // in order: later replies wait for this one
        }
        summary.delivered++;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (isStorageError(error)) {
          // A full or read-only disk (here or the gateway's) is no fault of the reply: it does not
          // use up an attempt, so waiting for the disk can never make a reply be given up.
          logger.warn(`deliver: event ${event.id} of ${ref} waits for the disk: ${message}`);
          summary.failed = true;
          break;
        }
        const count = attempts.fail(ref, event.id, message);
        // Read only when a delivery fails: the config is not needed on the common path, and every
        // reply pays this process's start-up.
        const limit = sender.maxAttempts();
        if (count < limit && !isClawError(error, 'invalid')) {
          logger.warn(`deliver: event ${event.id} of ${ref} failed (attempt ${count} of ${limit}): ${message}`);
          summary.failed = true;
          break; // in order: later replies wait for this one
        }
        const record: ErrorRecord = { stage: 'deliver', event_id: event.id, error: `not delivered after ${count} attempt(s): ${message}` };
        await push(thread, { source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record) });
        await recordGivenUp(home, sender, ref, event.id, count, error, env);
        logger.error(`deliver: gave up on event ${event.id} of ${ref}: ${message}`);
        summary.skipped++;
      }
      await thread.ack(options.consumer, event.id);
      attempts.forget(ref, event.id);
    }
    return summary;
  } finally {
    await thread.close();
    attempts.close();
  }
}

/**
 * Delivers one reply. Returns null once it is delivered (or has nowhere to go), or why it cannot
 * be tried now (xgw is unavailable); a delivery that was tried and failed is thrown.
 */
export async function deliverOne(home: string, sender: Sender, thread: StoredThread, event: ThreadEvent, env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const content = parseMessageContent(event.content);
  const context: ReplyContext | undefined = content.reply_context;
  if (!context) return null; // kept in the thread on purpose (see run.ts): nothing to deliver
  if (context.kind === 'external') {
    const request: XgwRequest = {
      op: 'send',
      channel: context.channel_id,
      peer: context.peer_id,
      conversation_type: context.conversation_type,
      conversation: context.conversation_id,
      reply_to: context.message_id,
      idempotency_key: deliveryKey(thread, event),
      text: content.text,
      ...(content.notice ? { notice: content.notice } : {}),
      ...(content.attachments.length ? { files: await sender.outboundFiles(content.attachments) } : {}),
      agent: sender.id,
    };
    try {
      await askXgw(home, request, 60_000);
    } catch (error) {
      if (isXgwUnavailable(error)) return (error as Error).message;
      throw error;
    }
    return null;
  }
  if (context.conversation_type === TASK_CONVERSATION) {
    await deliverTaskResult(home, sender.dir, context.agent_id, context.conversation_id, content, env);
    return null;
  }
  // An answer for another agent: into its inbox, from us, marked as an answer so that it goes
  // back into the conversation that asked (router.ts).
  const target = agentDir(home, context.agent_id);
  await withAgentThread(
    home,
    target.inbox,
    (inbox) =>
      push(inbox, {
        source: formatAddress({ kind: 'internal', conversationType: ANSWER_CONVERSATION, conversationId: context.conversation_id, agentId: sender.id }),
        type: 'message',
        content: JSON.stringify({
          text: content.text,
          attachments: [],
          reply_context: {
            kind: 'internal',
            conversation_type: ANSWER_CONVERSATION,
            conversation_id: context.conversation_id,
            agent_id: sender.id,
            // The asker passes the answer on to the message that asked (reply-context.ts).
            ...(context.asking_event_id ? { asking_event_id: context.asking_event_id } : {}),
          },
          in_reply_to: event.id,
        }),
        idempotency_key: `${sender.id}:${deliveryKey(thread, event)}`,
      }),
    env,
  );
  return null;
}

/** Names one reply for good: ids start again at 1 in a thread made anew at the same path. */
function deliveryKey(thread: StoredThread, event: ThreadEvent): string {
  return `${thread.name}#${event.id}@${event.created_at}`;
}

/**
 * The thread to deliver from: `--thread` (relative to the working directory, as a path given on
 * the command line is) or THECLAW_THREAD, which notifier sets to the thread's path (SQLite) or its
 * name relative to the home (PostgreSQL). An older handler names it by its absolute path, which
 * may be the home's before a move or a copy: it is found in this home (layout.ts resolveHomeRef).
 */
function threadToDeliver(home: string, flag: string | undefined, fromNotifier: string | undefined): string {
  const given = flag === undefined ? fromNotifier : resolve(flag);
  if (!given) throw new ClawError('usage', 'no thread to deliver from', { suggestion: 'pass --thread <home>/agents/<id>/threads/peers/<name> (notifier sets THECLAW_THREAD)' });
  return resolveHomeRef(home, given);
}

/** Delivery attempts, on disk so that they survive the short-lived deliver processes. */
class AttemptStore {
  private opened: Database.Database | undefined;

  /** `file`: the SQLite file that keeps them (Sender.state). */
  constructor(private readonly file: string) {}

  /** Opened on first use: most deliveries succeed at once and never need it. */
  private get db(): Database.Database {
    if (!this.opened) {
      ensureDir(dirname(this.file));
      this.opened = openSqlite(this.file);
      this.opened.exec('CREATE TABLE IF NOT EXISTS delivery_attempts (thread TEXT NOT NULL, event_id INTEGER NOT NULL, attempts INTEGER NOT NULL, last_error TEXT, PRIMARY KEY (thread, event_id))');
    }
    return this.opened;
  }

  /** Counts one more failure; returns the count. */
  fail(thread: string, eventId: number, error: string): number {
    return this.db
      .prepare(
        `INSERT INTO delivery_attempts VALUES (?, ?, 1, ?) ON CONFLICT (thread, event_id)
         DO UPDATE SET attempts = attempts + 1, last_error = excluded.last_error RETURNING attempts`,
      )
      .pluck()
      .get(thread, eventId, error.slice(0, 1000)) as number;
  }

  forget(thread: string, eventId: number): void {
    // A reply that never failed has no row; a store not opened yet holds none of this process's.
    if (!this.opened && !existsSync(this.file)) return;
    // Also the row an older version kept under the thread's absolute path, wherever the home was then.
    this.db
      .prepare("DELETE FROM delivery_attempts WHERE event_id = @eventId AND (thread = @thread OR (substr(thread, 1, 1) = '/' AND substr(thread, -length(@thread) - 1) = '/' || @thread))")
      .run({ thread, eventId });
  }

  close(): void {
    this.opened?.close();
  }
}
