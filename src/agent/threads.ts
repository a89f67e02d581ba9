import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isClawError } from '../core/errors.js';
import { closeWhenCommandDone } from '../core/process-resources.js';
import { openThreadStore, threadName, type OpenStoredThreadOptions, type PushInput, type StoredThread, type ThreadStore } from '../thread/index.js';

/**
 * The agent's threads, in its home's store (thread/store: the home's SQLite files, or PostgreSQL
 * when `THECLAW_DATABASE_URL` or `store:` in config.yaml says so). A thread is named by its path,
 * as the agent's directories lay them out (agent-dir.ts, router.ts); the store knows it by its
 * name relative to the home (`threadName`).
 *
 * One store per home and database URL for the whole process: a warm runner runs many jobs in one
 * process, and a PostgreSQL pool per job would use up the server's connections. Only the end of
 * the work closes them (`closeThreadStores`): a CLI's process when its command is done (core/cli.ts
 * `main`, whatever tool's library opened them), a test when it is done, never a job, since another
 * may be using them. `store:` in config.yaml is read once per process.
 */
const stores = new Map<string, Promise<ThreadStore>>();

export function threadStore(home: string, env: NodeJS.ProcessEnv = process.env): Promise<ThreadStore> {
  const key = `${home}\n${env.THECLAW_DATABASE_URL ?? ''}`;
  let store = stores.get(key);
  if (!store) {
    store = openThreadStore(home, env);
    stores.set(key, store);
    // One that could not be opened (a bad setting) is tried again by the next caller.
    store.catch(() => stores.delete(key));
    closeWhenCommandDone(closeThreadStores);
  }
  return store;
}

/** Closes every store this process opened: when it leaves, never while a job may run. */
export async function closeThreadStores(): Promise<void> {
  const open = [...stores.values()];
  stores.clear();
  await Promise.all(open.map(async (store) => (await store.catch(() => null))?.close()));
}

/** Opens the thread at `path` (a directory in the home, as AgentDir and ThreadRoute give it). */
export async function openAgentThread(home: string, path: string, options: OpenStoredThreadOptions = {}, env: NodeJS.ProcessEnv = process.env): Promise<StoredThread> {
  return (await threadStore(home, env)).open(threadName(home, path), options);
}

/** Runs `use` on the thread at `path`, closing it after. */
export async function withAgentThread<T>(home: string, path: string, use: (thread: StoredThread) => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const thread = await openAgentThread(home, path, {}, env);
  try {
    return await use(thread);
  } finally {
    await thread.close();
  }
}

/** Whether the thread at `path` exists (in SQLite: has its events.db). */
export async function hasAgentThread(home: string, path: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const store = await threadStore(home, env);
  // SQLite: a look at the disk, as ever (a damaged thread exists too; opening it says so).
  if (store.kind === 'sqlite') return existsSync(join(path, 'events.db'));
  try {
    await (await store.open(threadName(home, path))).close();
    return true;
  } catch (error) {
    if (isClawError(error, 'not_found')) return false;
    throw error;
  }
}

/** Appends one event; its id (the first one's, when its idempotency key was seen). */
export async function push(thread: StoredThread, input: PushInput): Promise<number> {
  return (await thread.append([input]))[0]!.id;
}

/** Like `push`, and says whether the idempotency key had been seen (nothing was stored). */
export async function pushOnce(thread: StoredThread, input: PushInput): Promise<{ id: number; duplicate: boolean }> {
  return (await thread.append([input]))[0]!;
}

/** Records put into a thread in the order they are made, by callers that need not wait (a model's events). */
export interface RecordWriter {
  /** Puts a record (`type` record, this `subtype`) after the ones before it; its id. */
  record: (subtype: string, content: object, idempotencyKey?: string) => Promise<number>;
  /** Waits for the records made so far and throws the first that failed. */
  settled: () => Promise<void>;
}

export function recordWriter(thread: StoredThread): RecordWriter {
  let last: Promise<unknown> = Promise.resolve();
  let failure: { error: unknown } | undefined;
  return {
    record: (subtype, content, idempotencyKey) => {
      const stored = last.then(() => push(thread, { source: 'self', type: 'record', subtype, content: JSON.stringify(content), idempotency_key: idempotencyKey }));
      last = stored.catch((error: unknown) => {
        failure ??= { error };
      });
      return stored;
    },
    settled: async () => {
      await last;
      if (failure) throw failure.error;
    },
  };
}
