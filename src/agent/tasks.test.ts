import { appendFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseMessageContent } from '../core/message.js';
import { createTestHome, runTool, threadEvents, type TestHome } from '../testing/index.js';
import { openThread } from '../thread/index.js';
import type { AgentDir } from './agent-dir.js';
import { initAgent } from './lifecycle.js';
import { routeMessage } from './router.js';
import { withTasks } from './task-store.js';
import { deliverTaskResult, expireTask, startTask, tasksReply, type AskingTurn } from './tasks.js';

// The task lifecycle against real state.db and inbox threads in a temp home; each start sets its
// timer with the built notifier CLI (no daemon needed). The end-to-end path is src/e2e/tasks.test.ts.

let t: TestHome;
let asker: AgentDir;
let helper: AgentDir;
const turn: AskingTurn = { agent: 'asker', conversation: 'peer-terminal.local.ann', askingEvent: 7 };
let n = 0;
const request = (to = 'helper') => ({ id: `t-${(++n).toString(16).padStart(8, '0')}`, to, task: `job ${n}` });
const answer = (text: string, notice?: 'error') => ({ text, attachments: [], ...(notice ? { notice } : {}) });

beforeEach(async () => {
  t = createTestHome();
  asker = await initAgent(t.home, 'asker');
  helper = await initAgent(t.home, 'helper');
});

afterEach(() => t.cleanup());

/** The task results in the asker's inbox: [source, text]. */
function results(): [string, string][] {
  return threadEvents(t.home, asker.inbox).map((e) => [e.source, parseMessageContent(e.content).text]);
}

describe('background tasks', () => {
  it('refuses a task past tasks.max_running (3) with a conflict, and takes one again once one has ended', async () => {
    const first = await startTask(t.home, turn, request(), t.env);
    await startTask(t.home, turn, request(), t.env);
    await startTask(t.home, turn, request(), t.env);
    await expect(startTask(t.home, turn, request(), t.env)).rejects.toThrow(expect.objectContaining({ kind: 'conflict', message: 'asker has 3 tasks running already (tasks.max_running)' }));
    // Each has a timer that ends it as timed out; an ended task's timer is removed.
    const timers = async () => JSON.parse((await runTool('notifier', ['timer', 'list', '--json'], t.env)).stdout) as { id: string; command: string; schedule: string }[];
    expect((await timers()).find((timer) => timer.id === `task-asker-${first.id}`)?.command).toMatch(new RegExp(`dist/agent/cli\\.js tasks asker --expire ${first.id}$`));
    await deliverTaskResult(t.home, helper, 'asker', first.id, answer('done'), t.env);
    expect((await timers()).map((timer) => timer.id)).not.toContain(`task-asker-${first.id}`);
    expect((await startTask(t.home, turn, request(), t.env)).state).toBe('running');
    // Each task is a message of its own conversation at helper, put there once.
    const tasks = threadEvents(t.home, helper.inbox);
    expect(tasks).toHaveLength(4);
    expect(new Set(tasks.map((e) => e.source)).size).toBe(4);
    expect(tasks[0]!.source).toBe(`internal:task:${first.id}:asker`);
  });

  it('tells the asking conversation of a failed and a timed-out task once each, for the message that asked, and drops what comes after the end', async () => {
    const failed = await startTask(t.home, turn, request(), t.env);
    const slow = await startTask(t.home, turn, { ...request(), label: 'slow one' }, t.env);
    await deliverTaskResult(t.home, helper, 'asker', failed.id, answer('I could not answer: the model refused the request (401).', 'error'), t.env);
    await deliverTaskResult(t.home, helper, 'asker', failed.id, answer('I could not answer: the model refused the request (401).', 'error'), t.env);
    expect(await expireTask(t.home, 'asker', slow.id, t.env)).toBe(true);
    expect(await expireTask(t.home, 'asker', slow.id, t.env)).toBe(false);
    await deliverTaskResult(t.home, helper, 'asker', slow.id, answer('late'), t.env);

    expect(results()).toEqual([
      ['internal:reply:peer-terminal.local.ann:helper', `[Task ${failed.id} at helper failed] I could not answer: the model refused the request (401).`],
      ['internal:reply:peer-terminal.local.ann:helper', `[Task ${slow.id} "slow one" at helper timed out] It did not finish within 1800 s (tasks.timeout_seconds); it was given up.`],
    ]);
    const [first] = threadEvents(t.home, asker.inbox);
    expect(parseMessageContent(first!.content).reply_context).toEqual({ kind: 'internal', conversation_type: 'reply', conversation_id: turn.conversation, agent_id: 'helper', asking_event_id: 7 });
    expect(withTasks(asker, (store) => store.list().map((row) => [row.id, row.state]))).toEqual(
      expect.arrayContaining([
        [failed.id, 'failed'],
        [slow.id, 'timed_out'],
      ]),
    );
  });

  it('lets /tasks stop a task of its own conversation only, and drops its result', async () => {
    const task = await startTask(t.home, turn, request('self'), t.env);
    expect(task.target).toBe('asker');
    expect(await tasksReply(t.home, asker, 'peer-telegram.main.99', 'stop', task.id, t.env)).toBe('Which task? /tasks stop <id>, with an id that /tasks lists.');
    expect(await tasksReply(t.home, asker, turn.conversation, null, null, t.env)).toMatch(new RegExp(`^Tasks of this conversation:\\n- ${task.id} at asker: running since `));
    expect(await tasksReply(t.home, asker, turn.conversation, 'stop', task.id, t.env)).toBe(`Stopped task ${task.id}.`);
    await deliverTaskResult(t.home, asker, 'asker', task.id, answer('too late'), t.env);
    // Its inbox has the task (a self task is its own), and no result.
    expect(results()).toEqual([[`internal:task:${task.id}:asker`, expect.stringMatching(new RegExp(`^\\[Task ${task.id} from myself, in another conversation\\] job`))]]);
    expect(await tasksReply(t.home, asker, turn.conversation, null, null, t.env)).toMatch(new RegExp(`^Tasks of this conversation:\\n- ${task.id} at asker: stopped at `));
    expect(await tasksReply(t.home, asker, 'peer-telegram.main.99', null, null, t.env)).toBe('No tasks in this conversation.');
  });

  it("refuses a task from a task's own conversation (tasks.max_depth 1), and allows it at depth 2 when max_depth is 2", async () => {
    const task = await startTask(t.home, turn, request(), t.env);
    // helper's conversation of the task, as its router makes it for the task's message.
    const [message] = threadEvents(t.home, helper.inbox);
    const route = routeMessage(helper, 'per-peer', message!.source);
    const thread = openThread(route.path, { home: t.home, create: true });
    thread.push({ source: message!.source, type: 'message', content: message!.content });
    thread.close();
    const fromTask: AskingTurn = { agent: 'helper', conversation: route.threadId, askingEvent: 1 };

    await expect(startTask(t.home, fromTask, request('self'), t.env)).rejects.toThrow(
      expect.objectContaining({ kind: 'conflict', message: 'a task may not start another task (tasks.max_depth of helper is 1)' }),
    );
    appendFileSync(helper.config, 'tasks: { max_depth: 2 }\n');
    expect(await startTask(t.home, fromTask, request('self'), t.env)).toMatchObject({ depth: 2, conversation: route.threadId });
    expect(task.depth).toBe(1);
  });
});
