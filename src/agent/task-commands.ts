import { printJson, printLines } from '../core/cli.js';
import { usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { requireAgent } from './agent-dir.js';
import { withTasks } from './task-store.js';
import { askingTurnOf, expireTask, queueTask, startTask, stopTask, taskLine, taskRequest } from './tasks.js';

/** `agent delegate` and `agent tasks` (tasks.ts). */
interface Json {
  json?: boolean;
}

export async function delegate(to: string, options: Json & { task: string; label?: string }): Promise<void> {
  const home = resolveHome();
  const turn = askingTurnOf(process.env);
  if (!turn)
    throw usageError("agent delegate runs in an agent's turn (its bash_exec), whose conversation gets the result", 'ask the agent in a chat, or send it a message: agent send <id> --text "…"');
  const request = taskRequest(home, to, options.task, options.label, turn.agent);
  const target = to === 'self' ? 'myself, in a conversation of its own' : to;
  // Inside the sandbox (THECLAW_OUTBOX), the runtime starts it once this command has ended.
  const outbox = process.env.THECLAW_OUTBOX;
  if (outbox) queueTask(outbox, request);
  else await startTask(home, turn, request);
  if (options.json) return printJson({ task: request.id, state: outbox ? 'queued' : 'running' });
  printLines([`task ${request.id} ${outbox ? 'starts when this command ends' : 'started'} at ${target}; its result comes back into this conversation (see: /tasks)`]);
}

export async function tasks(id: string, options: Json & { stop?: string; expire?: string }): Promise<void> {
  const home = resolveHome();
  const dir = requireAgent(home, id);
  if (options.expire) {
    const ended = await expireTask(home, id, options.expire);
    if (options.json) return printJson({ task: options.expire, timed_out: ended });
    return printLines([ended ? `task ${options.expire} timed out; its conversation is told` : `task ${options.expire} had ended already`]);
  }
  if (options.stop) {
    const row = await stopTask(dir, options.stop, home);
    if (options.json) return printJson(row);
    return printLines([row.state === 'stopped' ? `stopped task ${row.id}` : `task ${row.id} had ended already (${row.state})`]);
  }
  const rows = withTasks(dir, (store) => store.list({ recent: 20 }));
  if (options.json) return printJson(rows);
  printLines(rows.length ? rows.map((row) => `${taskLine(row)}  (conversation ${row.conversation})`) : [`${id} has no tasks: agent delegate, in one of its turns, starts one`]);
}
