import { printJson, printLines } from '../core/cli.js';
import { ClawError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { agentStatus, initAgent, listAgents, startAgent, stopAgent, type AgentStatus } from './lifecycle.js';
import { sendToAgent } from './send.js';

// `run` and `deliver` are what notifier starts for every message and reply: each loads only its
// own module (run brings pai; deliver must not pay for it).

interface Json {
  json?: boolean;
}

export function init(id: string, options: Json & { kind?: 'system' | 'user'; provider?: string; model?: string }): void {
  const dir = initAgent(resolveHome(), id, options);
  if (options.json) printJson({ id, path: dir.root });
  else printLines([`created agent ${id} in ${dir.root}`, `next: edit ${dir.identity}, then: agent start ${id}`]);
}

export function start(id: string, options: Json): void {
  startAgent(resolveHome(), id);
  if (options.json) printJson({ id, started: true });
  else printLines([`started ${id} (notifier runs it when messages arrive; is notifier running? notifier status)`]);
}

export function stop(id: string, options: Json): void {
  const was = stopAgent(resolveHome(), id);
  if (options.json) printJson({ id, started: false, was_started: was });
  else printLines([was ? `stopped ${id} (its messages wait until: agent start ${id})` : `${id} was not started`]);
}

export function status(id: string | undefined, options: Json): void {
  const home = resolveHome();
  const rows = id ? [agentStatus(home, id)] : listAgents(home);
  if (options.json) return printJson(id ? rows[0] : rows);
  printLines(rows.length ? rows.map(describe) : ['no agents yet: agent init <id>']);
}

export function list(options: Json): void {
  const rows = listAgents(resolveHome());
  if (options.json) return printJson(rows.map(({ id, kind, started, model }) => ({ id, kind, started, model })));
  printLines(rows.length ? rows.map((a) => `${a.id}  ${a.kind}  ${a.started ? 'started' : 'stopped'}  ${a.model}`) : ['no agents yet: agent init <id>']);
}

function describe(a: AgentStatus): string {
  return `${a.id}  ${a.kind}  ${a.started ? 'started' : 'stopped'}${a.running ? ' (running)' : ''}  pending ${a.pending}  undelivered ${a.undelivered}  threads ${a.threads}  last activity ${a.last_activity ?? 'never'}  model ${a.model}`;
}

export function send(id: string, options: Json & { text: string; source?: string; idempotencyKey?: string }): void {
  const eventId = sendToAgent(resolveHome(), id, options);
  if (options.json) printJson({ id: eventId });
  else printLines([String(eventId)]);
}

export async function chat(id: string): Promise<void> {
  const { chatWithAgent } = await import('./send.js');
  await chatWithAgent(resolveHome(), id);
}

export async function run(id: string, options: Json): Promise<void> {
  const { runAgent } = await import('./run.js');
  const summary = await runAgent(id);
  if (options.json) printJson(summary);
}

export async function deliver(options: Json & { thread: string; consumer: string }): Promise<void> {
  const { deliverReplies } = await import('./deliver.js');
  const summary = await deliverReplies(options);
  // Exit 1 leaves the failed reply unacknowledged for notifier's next, backed-off try; under
  // --json the error object is then stdout's only document.
  if (summary.failed) throw new ClawError('io', 'a reply could not be delivered yet', { suggestion: 'notifier retries it; see the agent log' });
  if (options.json) printJson(summary);
}
