import { randomBytes } from 'node:crypto';
import * as z from 'zod/mini';
import { formatAddress, parseAddress } from '../core/address.js';
import { joinCommand } from '../core/command.js';
import { ClawError } from '../core/errors.js';
import { formatMessageContent, type MessageContent } from '../core/message.js';
import { cliPath } from '../core/package.js';
import { leaveRequest, takeRequests, TASK_PREFIX } from '../core/turn-outbox.js';
import { loadAgentConfig, requireAgent, type AgentDir } from './agent-dir.js';
import { notifierTimer, notifierTimerSync } from './notifier-timers.js';
import { ANSWER_CONVERSATION, threadById } from './router.js';
import { withTasks, type TaskRow, type TaskState } from './task-store.js';
import { hasAgentThread, push, withAgentThread } from './threads.js';

/**
 * Background tasks: `agent delegate <agent|self> --task …` in a turn starts one and returns at
 * once with its id. The task is a message into the target's inbox from a conversation of its own
 * (source `internal:task:<id>@<asker>`, so the target's router gives it a fresh thread, and its
 * turn runs under that thread's own turn limit and per-conversation spend cap). The target's
 * answer is delivered like an `agent send` answer (deliver.ts): into the asker's inbox, as an
 * answer in the conversation that started the task, for the message that asked — whose sender
 * the asker's next turn tells. A failure notice is the result too; a task still running after
 * `tasks.timeout_seconds` is ended by a notifier timer and the asker told so. Each end is a change
 * of the task's row from `running` and a push with the key `task-result:<asker>:<id>`, so one
 * that is repeated after a crash, or meets another end, tells nothing twice.
 */
export const TASK_CONVERSATION = 'task';

const TaskRequestSchema = z.strictObject({
  id: z.string().check(z.regex(/^t-[0-9a-f]{8}$/)),
  to: z.string(),
  task: z.string().check(z.minLength(1), z.maxLength(8000)),
  label: z.optional(z.string().check(z.regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}$/))),
});
export type TaskRequest = z.infer<typeof TaskRequestSchema>;

/** The turn a task is started from: the asking agent, its conversation, and the message that asked. */
export interface AskingTurn {
  agent: string;
  conversation: string;
  askingEvent: number | null;
}

/** The turn a command runs in, from the variables the runtime sets; null outside a turn. */
export function askingTurnOf(env: NodeJS.ProcessEnv): AskingTurn | null {
  if (!env.THECLAW_AGENT || !env.THECLAW_CONVERSATION) return null;
  const asking = Number(env.THECLAW_ASKING_EVENT);
  return { agent: env.THECLAW_AGENT, conversation: env.THECLAW_CONVERSATION, askingEvent: Number.isSafeInteger(asking) && asking > 0 ? asking : null };
}

/** A request for a task, checked as far as it can be where the command runs; the id it will have. */
export function taskRequest(home: string, to: string, task: string, label: string | undefined, asker: string): TaskRequest {
  const request = TaskRequestSchema.safeParse({ id: `t-${randomBytes(4).toString('hex')}`, to, task, ...(label !== undefined ? { label } : {}) });
  if (!request.success) {
    throw new ClawError('usage', 'a task is 1 to 8,000 characters and a label 1 to 40 letters, digits, spaces, ., _ or -', {
      suggestion: 'agent delegate helper --task "what to do" --label short-name',
    });
  }
  requireAgent(home, to === 'self' ? asker : to);
  return request.data;
}

/** Inside the sandbox: leaves the request in the turn's outbox; the runtime starts it when the command ends. */
export function queueTask(outbox: string, request: TaskRequest): void {
  leaveRequest(outbox, TASK_PREFIX, request);
}

/** Outside the sandbox, after a call: starts the tasks the call asked for. Returns what could not be started. */
export async function startRequestedTasks(home: string, outbox: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const taken = takeRequests(
    outbox,
    (name) => name.startsWith(TASK_PREFIX),
    (json) => TaskRequestSchema.parse(json),
  );
  const problems = taken.problems.map((problem) => `agent delegate: ${problem}`);
  const turn = askingTurnOf(env);
  for (const { request } of taken.requests) {
    try {
      if (!turn) throw new ClawError('usage', 'no turn to start it for');
      await startTask(home, turn, request, env);
    } catch (error) {
      problems.push(`agent delegate: task ${request.id} was not started: ${(error as Error).message}`);
    }
  }
  return problems;
}

/**
 * Starts a task for `turn`: checks the asker's limits, records it, and puts the task into the
 * target's inbox (once, whatever repeats it). Throws a `conflict` when a limit refuses it.
 */
export async function startTask(home: string, turn: AskingTurn, request: TaskRequest, env: NodeJS.ProcessEnv = process.env, now = new Date()): Promise<TaskRow> {
  const asker = requireAgent(home, turn.agent);
  const target = requireAgent(home, request.to === 'self' ? asker.id : request.to);
  const limits = loadAgentConfig(asker).tasks;
  const depth = (await taskDepth(home, asker, turn.conversation, env)) + 1;
  if (depth > limits.max_depth) {
    throw new ClawError('conflict', `a task may not start another task (tasks.max_depth of ${asker.id} is ${limits.max_depth})`, { suggestion: 'do the work in this task, or raise tasks.max_depth' });
  }
  const row = withTasks(asker, (store) => {
    const known = store.get(request.id);
    if (known) return known;
    if (store.running() >= limits.max_running) {
      throw new ClawError('conflict', `${asker.id} has ${limits.max_running} tasks running already (tasks.max_running)`, { suggestion: 'wait for one to finish, or stop one: /tasks stop <id>' });
    }
    // The timer first: a task that cannot be given a time limit is not started.
    const expire = joinCommand([process.execPath, cliPath('agent'), 'tasks', asker.id, '--expire', request.id]);
    notifierTimerSync(home, ['add', '--id', watchdogId(asker.id, request.id), '--in', `${Math.ceil(limits.timeout_seconds)}s`, '--command', expire], env);
    const added = {
      id: request.id,
      target: target.id,
      label: request.label ?? null,
      task: request.task,
      conversation: turn.conversation,
      asking_event: turn.askingEvent,
      depth,
      started_at: now.toISOString(),
    };
    store.add(added);
    return store.get(request.id)!;
  });
  const from = formatAddress({ kind: 'internal', conversationType: TASK_CONVERSATION, conversationId: row.id, agentId: asker.id });
  const text = `[Task ${describeTask(row)} from ${asker.id === target.id ? 'myself, in another conversation' : asker.id}] ${row.task}\n(My answer here is the task's result: it goes back to where the task was started.)`;
  const content: MessageContent = { text, attachments: [], reply_context: { kind: 'internal', conversation_type: TASK_CONVERSATION, conversation_id: row.id, agent_id: asker.id } };
  await withAgentThread(home, target.inbox, (inbox) => push(inbox, { source: from, type: 'message', content: formatMessageContent(content), idempotency_key: `task:${asker.id}:${row.id}` }), env);
  return row;
}

/** How deep the conversation is in tasks: 0 for a person's, the task's depth for a task's own conversation. */
async function taskDepth(home: string, dir: AgentDir, conversation: string, env: NodeJS.ProcessEnv): Promise<number> {
  const route = threadById(dir, conversation);
  if (!route || !(await hasAgentThread(home, route.path, env))) return 0;
  const first = await withAgentThread(home, route.path, async (thread) => (await thread.peek({ filter: "type = 'message' AND source != 'self'", limit: 1 }))[0], env);
  const address = first ? parseAddress(first.source) : null;
  if (address?.kind !== 'internal' || address.conversationType !== TASK_CONVERSATION) return 0;
  const parent = requireAgent(home, address.agentId);
  return withTasks(parent, (store) => store.get(address.conversationId)?.depth ?? 1);
}

/**
 * The target's answer to a task (deliver.ts, for a reply whose reply context is a task's): into
 * the asker's inbox as an answer in the conversation that started it. A task that ended already
 * (stopped, timed out) takes no late result.
 */
export async function deliverTaskResult(home: string, from: AgentDir, asker: string, id: string, content: MessageContent, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  await endTask(home, requireAgent(home, asker), id, content.notice !== undefined ? 'failed' : 'done', content.text, env, from.id);
}

/** `agent tasks <agent> --expire <id>`, run by the task's timer: a task still running is ended as timed out, and the asker told. */
export async function expireTask(home: string, asker: string, id: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const dir = requireAgent(home, asker);
  const row = withTasks(dir, (store) => store.get(id));
  if (!row) throw new ClawError('not_found', `${asker} has no task ${id}`, { suggestion: `see: agent tasks ${asker}` });
  const seconds = loadAgentConfig(dir).tasks.timeout_seconds;
  return endTask(home, dir, id, 'timed_out', `It did not finish within ${seconds} s (tasks.timeout_seconds); it was given up.`, env, row.target);
}

/** `/tasks stop <id>` and `agent tasks <agent> --stop <id>`: ends a running task; its result, when it comes, is dropped. */
export async function stopTask(dir: AgentDir, id: string, home: string, env: NodeJS.ProcessEnv = process.env, conversation?: string): Promise<TaskRow> {
  const row = withTasks(dir, (store) => store.get(id));
  if (!row || (conversation !== undefined && row.conversation !== conversation)) {
    throw new ClawError('not_found', `no task ${id}${conversation !== undefined ? ' in this conversation' : ''}`, {
      suggestion: conversation !== undefined ? 'see: /tasks' : `see: agent tasks ${dir.id}`,
    });
  }
  if (withTasks(dir, (store) => store.end(id, 'stopped'))) await removeWatchdog(home, dir.id, id, env);
  return withTasks(dir, (store) => store.get(id)!);
}

/**
 * Ends a running task as `state` and tells its conversation: the push first, then the row, so
 * that an end cut off in between is repeated whole, and told once (the push's key).
 */
async function endTask(home: string, asker: AgentDir, id: string, state: Exclude<TaskState, 'running' | 'stopped'>, body: string, env: NodeJS.ProcessEnv, from: string): Promise<boolean> {
  const row = withTasks(asker, (store) => store.get(id));
  if (row?.state !== 'running') return false;
  const content: MessageContent = {
    text: `[Task ${describeTask(row)} at ${row.target === asker.id ? 'myself' : row.target} ${ENDINGS[state]}] ${body}`,
    attachments: [],
    reply_context: {
      kind: 'internal',
      conversation_type: ANSWER_CONVERSATION,
      conversation_id: row.conversation,
      agent_id: from,
      ...(row.asking_event ? { asking_event_id: row.asking_event } : {}),
    },
  };
  const source = formatAddress({ kind: 'internal', conversationType: ANSWER_CONVERSATION, conversationId: row.conversation, agentId: from });
  await withAgentThread(home, asker.inbox, (inbox) => push(inbox, { source, type: 'message', content: formatMessageContent(content), idempotency_key: `task-result:${asker.id}:${id}` }), env);
  const ended = withTasks(asker, (store) => store.end(id, state));
  if (ended) await removeWatchdog(home, asker.id, id, env);
  return ended;
}

const ENDINGS = { done: 'finished', failed: 'failed', timed_out: 'timed out' } as const;

function watchdogId(asker: string, id: string): string {
  return `task-${asker}-${id}`.slice(0, 63);
}

async function removeWatchdog(home: string, asker: string, id: string, env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await notifierTimer(home, ['remove', '--id', watchdogId(asker, id)], env);
  } catch {
    // It fires into an ended task, which is nothing.
  }
}

/** `t-1a2b3c4d "label"`. */
function describeTask(row: Pick<TaskRow, 'id' | 'label'>): string {
  return row.label ? `${row.id} "${row.label}"` : row.id;
}

/** One line of `agent tasks` and `/tasks`. */
export function taskLine(row: TaskRow): string {
  const when = row.state === 'running' ? `running since ${row.started_at.slice(11, 19)} UTC` : `${row.state.replace('_', ' ')} at ${(row.ended_at ?? row.started_at).slice(11, 19)} UTC`;
  const what = row.task.length > 60 ? `${row.task.slice(0, 59)}…` : row.task;
  return `${describeTask(row)} at ${row.target}: ${when} - ${what}`;
}

/** The `/tasks` answer: this conversation's running and recent tasks, or `/tasks stop <id>`. */
export async function tasksReply(home: string, dir: AgentDir, conversation: string, argument: string | null, stopId: string | null, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (argument === 'stop') {
    const known = stopId === null ? undefined : withTasks(dir, (store) => store.get(stopId));
    if (known?.conversation !== conversation) return 'Which task? /tasks stop <id>, with an id that /tasks lists.';
    const row = await stopTask(dir, known.id, home, env, conversation);
    return row.state === 'stopped' ? `Stopped task ${describeTask(row)}.` : `Task ${describeTask(row)} had ended already (${row.state.replace('_', ' ')}).`;
  }
  const rows = withTasks(dir, (store) => store.list({ conversation }));
  return rows.length ? ['Tasks of this conversation:', ...rows.map((row) => `- ${taskLine(row)}`), 'Stop one with /tasks stop <id>.'].join('\n') : 'No tasks in this conversation.';
}
