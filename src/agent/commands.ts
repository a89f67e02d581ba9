import { printJson, printLines, readStdin } from '../core/cli.js';
import type { ManageRequest } from '../core/manage-requests.js';
import { describeDamage } from './damaged-thread.js';
import { ClawError, usageError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import type { HeartbeatView } from './proactive/heartbeat-setup.js';
import type { AgentStatus } from './lifecycle.js';

// Each command loads only its own modules: `run` and `deliver` are started by notifier for every
// message and every reply, and their start-up is on the path of each answer.
const lifecycle = () => import('./lifecycle.js');

interface Json {
  json?: boolean;
}

/**
 * In a sandboxed turn the runtime carries a management command out (core/manage-requests.ts),
 * and this prints its result: true then. Loaded only there, off the path of `run` and `deliver`.
 */
async function relayed(request: ManageRequest): Promise<boolean> {
  return Boolean(process.env.THECLAW_OUTBOX) && (await import('../core/manage-requests.js')).relayInTurn(request);
}

export async function init(id: string, options: Json & { kind?: 'system' | 'user'; provider?: string; model?: string }): Promise<void> {
  // In a turn, a user agent only.
  if (await relayed({ action: 'agent_init', agent: id, provider: options.provider, model: options.model, json: options.json })) return;
  const dir = await (await lifecycle()).createAgent(resolveHome(), id, options);
  if (options.json) printJson({ id, path: dir.root });
  else printLines([`created agent ${id} in ${dir.root}`, `next: edit ${dir.identity}, then: agent start ${id}`]);
}

export async function start(id: string, options: Json): Promise<void> {
  if (await relayed({ action: 'agent_start', agent: id, json: options.json })) return;
  const home = resolveHome();
  await (await lifecycle()).startAgent(home, id);
  const heartbeat = await heartbeatTimer(home, id);
  if (options.json) printJson({ id, started: true });
  else printLines([`started ${id} (notifier runs it when messages arrive; is notifier running? notifier status)`]);
  if (heartbeat) process.stderr.write(`Warning: ${heartbeat}\n`);
}

/** The heartbeat's timer, set again from the config when it is missing; what went wrong, or null. */
async function heartbeatTimer(home: string, id: string): Promise<string | null> {
  const { loadAgentConfig, requireAgent } = await import('./agent-dir.js');
  if (!loadAgentConfig(requireAgent(home, id)).heartbeat) return null;
  try {
    await (await import('./proactive/heartbeat-setup.js')).syncHeartbeatTimer(home, id);
    return null;
  } catch (error) {
    return `the heartbeat's timer was not set: ${(error as Error).message} - theclaw up sets it again`;
  }
}

export async function stop(id: string, options: Json): Promise<void> {
  if (await relayed({ action: 'agent_stop', agent: id, json: options.json })) return;
  const was = await (await lifecycle()).stopAgent(resolveHome(), id);
  if (options.json) printJson({ id, started: false, was_started: was });
  else printLines([was ? `stopped ${id} (its messages wait until: agent start ${id})` : `${id} was not started`]);
}

export async function status(id: string | undefined, options: Json): Promise<void> {
  if (await relayed({ action: 'agent_status', agent: id, json: options.json })) return;
  const home = resolveHome();
  const { agentStatus, listAgents } = await lifecycle();
  const rows = id ? [await agentStatus(home, id)] : await listAgents(home);
  if (options.json) return printJson(id ? rows[0] : rows);
  printLines(rows.length ? rows.flatMap((a) => [describe(a), ...a.damaged.map((d) => `  DAMAGED ${describeDamage(d)}`)]) : ['no agents yet: agent init <id>']);
}

export async function list(options: Json): Promise<void> {
  if (await relayed({ action: 'agent_list', json: options.json })) return;
  const rows = await (await lifecycle()).listAgents(resolveHome());
  if (options.json) return printJson(rows.map(({ id, kind, started, model }) => ({ id, kind, started, model })));
  printLines(rows.length ? rows.map((a) => `${a.id}  ${a.kind}  ${a.started ? 'started' : 'stopped'}  ${a.model}`) : ['no agents yet: agent init <id>']);
}

function describe(a: AgentStatus): string {
  return `${a.id}  ${a.kind}  ${a.started ? 'started' : 'stopped'}${a.running ? ' (running)' : ''}  pending ${a.pending}  undelivered ${a.undelivered}  threads ${a.threads}  last activity ${a.last_activity ?? 'never'}  model ${a.model}`;
}

export async function configSet(id: string, key: string, value: string, options: Json): Promise<void> {
  if (await relayed({ action: 'agent_config_set', agent: id, key, value, json: options.json })) return;
  const stored = (await import('./agent-settings.js')).setConfigKey(resolveHome(), id, key, value);
  if (options.json) printJson({ id, key, value: stored });
  else printLines([`set ${key} of ${id} to ${JSON.stringify(stored)} (the next turn uses it)`]);
}

export async function identitySet(id: string, options: Json & { text?: string }): Promise<void> {
  const text = options.text ?? (await readStdin(usageError('no identity', 'pass it with --text or on stdin'))).toString('utf8');
  if (await relayed({ action: 'agent_identity_set', agent: id, text, json: options.json })) return;
  const dir = await (await import('./agent-settings.js')).setIdentity(resolveHome(), id, text);
  if (options.json) printJson({ id, path: dir.identity });
  else printLines([`replaced ${dir.identity} (the next turn uses it)`]);
}

export async function identityLink(id: string, name: string, addresses: string[], options: Json): Promise<void> {
  const linked = (await import('./agent-settings.js')).linkIdentity(resolveHome(), id, name, addresses);
  if (options.json) printJson({ id, person: name, addresses: linked });
  else printLines([`${name} of ${id}: ${linked.join(' ')} (one person from the next message: one memory file, the owner if one address is)`]);
}

export async function identityUnlink(id: string, name: string, addresses: string[], options: Json): Promise<void> {
  const left = (await import('./agent-settings.js')).unlinkIdentity(resolveHome(), id, name, addresses);
  if (options.json) printJson({ id, person: name, addresses: left });
  else printLines([left.length > 0 ? `${name} of ${id}: ${left.join(' ')}` : `${id} links no addresses to ${name} now`]);
}

export async function identityList(id: string, options: Json): Promise<void> {
  const { loadAgentConfig, requireAgent } = await import('./agent-dir.js');
  const identities = loadAgentConfig(requireAgent(resolveHome(), id)).identities;
  if (options.json) return printJson(identities);
  const people = Object.entries(identities);
  printLines(people.length > 0 ? people.map(([name, addresses]) => `${name}  ${addresses.join(' ')}`) : [`${id} links no people yet: agent identity link ${id} <name> <address>...`]);
}

export async function send(id: string, options: Json & { text: string; source?: string; idempotencyKey?: string }): Promise<void> {
  // Inside an agent's sandbox (sandbox-sends.ts OUTBOX_ENV), the message is pushed once the command has ended.
  const outbox = process.env.THECLAW_OUTBOX;
  if (outbox) {
    const { queueSend } = await import('./policy/sandbox-sends.js');
    queueSend(resolveHome(), id, options, outbox);
    if (options.json) printJson({ queued: true });
    else printLines([`queued: it goes to ${id} when this command ends`]);
    return;
  }
  const { defaultSource, sendToAgent, whereAnswerGoes } = await import('./send.js');
  const eventId = await sendToAgent(resolveHome(), id, options);
  if (options.json) return printJson({ id: eventId });
  printLines([String(eventId)]);
  // stdout stays the event id alone, for scripts.
  const { daemonHolder } = await import('../core/daemon.js');
  // Kept, not lost: but the person should not wait for an answer nothing is running to give.
  const down = daemonHolder(resolveHome(), 'notifier') ? '' : ' (TheClaw is not running: it is answered after theclaw up)';
  process.stderr.write(`${whereAnswerGoes(id, options.source ?? defaultSource(process.env))}${down}\n`);
}

export async function attach(file: string, options: Json & { name?: string }): Promise<void> {
  const path = (await import('./delivery/reply-files.js')).queueAttachment(resolveHome(), file, options.name);
  if (options.json) printJson({ attached: path });
  else printLines([`attached: ${path} goes with this turn's answer`]);
}

export async function chat(id: string): Promise<void> {
  const { chatWithAgent } = await import('./send.js');
  await chatWithAgent(resolveHome(), id);
}

export async function approvals(id: string, options: Json): Promise<void> {
  const { commands, proposals } = (await import('./owner-decisions.js')).waitingDecisions(resolveHome(), id);
  if (options.json) return printJson([...commands.map((approval) => ({ kind: 'command', ...approval })), ...proposals.map((proposal) => ({ kind: 'proposal', ...proposal }))]);
  printLines([
    ...commands.map((a) => `${a.code}  until ${a.expires_at}  ${a.conversation}  ${a.command}`),
    ...proposals.map((p) => `${p.code}  proposal  ${p.file} (+${p.added} -${p.removed})  ${p.summary}  (${p.path})`),
    ...(commands.length + proposals.length === 0 ? ['nothing waits for approval'] : []),
  ]);
}

export async function decide(id: string, code: string, approved: boolean, options: Json): Promise<void> {
  const { text, kind: _, ...decision } = (await import('./owner-decisions.js')).decideFor(resolveHome(), id, code, approved, 'the owner (agent approve|deny)');
  if (options.json) return printJson(decision);
  printLines([text]);
}

export async function run(id: string, options: Json): Promise<void> {
  const { runAgent } = await import('./run.js');
  const summary = await runAgent(id);
  if (options.json) printJson(summary);
}

export async function deliver(options: Json & { thread?: string; consumer: string; maxAttempts?: number }): Promise<void> {
  const { deliverReplies } = await import('./delivery/deliver.js');
  const summary = await deliverReplies(options);
  // Exit 1 leaves the failed reply unacknowledged for notifier's next, backed-off try; under
  // --json the error object is then stdout's only document.
  if (summary.failed) throw new ClawError('io', 'a reply could not be delivered yet', { suggestion: 'notifier retries it; see the agent log' });
  if (options.json) printJson(summary);
}

export async function memorySearch(id: string, query: string, options: Json & { peer?: string; all?: boolean; limit: number }): Promise<void> {
  const { searchMemoryFromHere } = await import('./memory/memory-door.js');
  const hits = await searchMemoryFromHere(resolveHome(), id, query, options);
  if (options.json) return printJson(hits);
  if (hits.length === 0) return printLines([await nothingFound(id, query, options)]);
  printLines(
    hits.flatMap((hit) => [
      hit.kind === 'memory' ? `${hit.where}:${hit.at}` : `${hit.where} #${hit.at} ${hit.time ?? ''} ${hit.from === 'me' ? 'me' : `from ${hit.from}`}`,
      ...hit.text.split('\n').map((line) => `  ${line}`),
    ]),
  );
}

/** An empty search of the agent's memory says so, and whether every conversation's would find something. */
async function nothingFound(id: string, query: string, options: { peer?: string; all?: boolean }): Promise<string> {
  const inTurn = process.env.THECLAW_AGENT === id;
  if (options.all || options.peer !== undefined || inTurn) return 'nothing found';
  const { searchMemory } = await import('./memory/memory-search.js');
  const elsewhere = await searchMemory(resolveHome(), id, query, { all: true, limit: 1 });
  return elsewhere.length ? "nothing in the agent's memory; --all searches every conversation, and finds something there" : 'nothing found';
}

export async function memoryShow(id: string, options: { peer?: string }): Promise<void> {
  const { memoryFilesOf } = await import('./memory/memory-search.js');
  const files = memoryFilesOf(resolveHome(), id, options.peer).filter(({ text }) => text.trim() !== '');
  if (files.length === 0) {
    const whose = options.peer === undefined ? `${id}'s memory` : `${id}'s memory of ${options.peer}`;
    return printLines([`${whose} is empty: the agent writes what it learns there as it talks; agent memory edit ${id} writes it yourself`]);
  }
  printLines(files.flatMap(({ path, text }) => [`== ${path}`, text.trimEnd(), '']));
}

export async function memoryEdit(id: string, options: { file?: string }): Promise<void> {
  const { editMemory } = await import('./memory/memory-search.js');
  await editMemory(resolveHome(), id, options.file);
}

export async function heartbeat(id: string, options: Json & { every?: string; prompt?: string; model?: string; activeHours?: string; off?: boolean; now?: boolean }): Promise<void> {
  const home = resolveHome();
  const setting = [options.every, options.prompt, options.model, options.activeHours].some((value) => value !== undefined);
  if ([setting, options.off, options.now].filter(Boolean).length > 1) {
    throw usageError('--off, --now and the settings (--every, --prompt, --model, --active-hours) go one at a time', `e.g. agent heartbeat ${id} --every 30m, then agent heartbeat ${id} --now`);
  }
  if (options.now) {
    const outcome = await (await import('./proactive/heartbeat.js')).runHeartbeat(id);
    if (options.json) return printJson(outcome);
    if (outcome.outcome === 'skipped') return printLines([`skipped: ${outcome.reason}`]);
    if (outcome.outcome === 'ok') return printLines([`nothing to report (${outcome.tokens} tokens)`]);
    return printLines([`told the owner (${outcome.tokens} tokens): ${outcome.text}`]);
  }
  const setup = await import('./proactive/heartbeat-setup.js');
  if (options.off) {
    const removed = await setup.removeHeartbeat(home, id);
    if (options.json) return printJson({ agent: id, removed });
    return printLines([removed ? `removed the heartbeat of ${id} and its timer` : `${id} had no heartbeat`]);
  }
  const view = setting ? await setup.setHeartbeat(home, id, options) : await setup.showHeartbeat(home, id);
  if (options.json) return printJson(view);
  printLines(describeHeartbeat(view, setup.DEFAULT_HEARTBEAT_PROMPT));
}

function describeHeartbeat(view: HeartbeatView, defaultPrompt: string): string[] {
  const { agent, heartbeat, timer, last } = view;
  if (!heartbeat) return [`${agent} has no heartbeat (agent heartbeat ${agent} --every 30m sets one)${timer ? `; its timer ${timer.id} is left: agent heartbeat ${agent} --off removes it` : ''}`];
  return [
    `${agent}: a heartbeat every ${heartbeat.every}, on ${heartbeat.model ?? "the agent's model"}, ${heartbeat.active_hours ? `within ${heartbeat.active_hours} (local time)` : 'at any hour'}`,
    `  prompt: ${heartbeat.prompt ?? `(default) ${defaultPrompt}`}`,
    timer
      ? `  timer ${timer.id}: ${timer.schedule}, next ${timer.next_run_at ?? 'never'}, runs ${timer.runs}${timer.last_exit ? `, last ${timer.last_exit}` : ''}`
      : `  timer: none (agent start ${agent} or theclaw up sets it)`,
    last ? `  last beat: ${last.at} ${last.outcome.replace('_', ' ')}, ${last.tokens} tokens` : '  last beat: none yet',
    ...(view.started ? [] : [`  skipped while ${agent} is stopped: agent start ${agent}`]),
    ...(view.owner_chat ? [] : [`  skipped until the owner writes to ${agent} in a direct chat (where a finding goes)`]),
  ];
}
