import {
  CONTROL_ACTION_PATH,
  CONTROL_CONVERSATION_PATH,
  CONTROL_DATA_PATH,
  type ControlAction,
  type ControlAgent,
  type ControlOutcome,
  type ControlView,
  type ConversationMessage,
  type ConversationSummary,
  type ConversationView,
  type Problem,
  type Spend,
  type WaitingItem,
} from '../channels/control-protocol.js';
import { el, pill, when } from './dom.js';
import { spendChart } from './spend-chart.js';
import { byId, pageToken } from './token.js';

/**
 * The owner's control page's script (the HTML is webchat-control-page.ts): reads
 * `/control.json`, renders each section, and sends the owner's actions as POSTs with the token in
 * `Authorization` (control-protocol.ts). After an action, and every few seconds, it reads again.
 */

const REFRESH_MS = 5_000;

const token = pageToken();
const updated = byId('updated');
const problem = byId('problem');
const notice = byId('notice');

function button(text: string, action: ControlAction, className = ''): HTMLButtonElement {
  const b = el('button', className, text) as HTMLButtonElement;
  b.type = 'button';
  b.addEventListener('click', () => void act(action, b));
  return b;
}

function item(name: string, state: Node | null, detail: string, actions: Node[]): HTMLElement {
  const row = el('div', 'item');
  row.append(el('span', 'name', name));
  if (state) row.append(state);
  row.append(el('span', 'detail', detail));
  const box = el('span', 'actions');
  box.append(...actions);
  row.append(box);
  return row;
}

function fill(id: string, rows: HTMLElement[], emptyText: string): void {
  byId(id).replaceChildren(...(rows.length ? rows : [el('div', 'empty', emptyText)]));
}

function agentState(a: ControlAgent): HTMLElement {
  switch (a.state) {
    case 'running':
      return pill('running', 'ok');
    case 'started':
      return pill('started', 'ok');
    case 'stopped':
      return pill('stopped', 'warn');
    case 'broken':
      return pill('broken', 'bad');
  }
}

function renderAgents(agents: ControlAgent[]): void {
  fill(
    'agents',
    agents.map((a) => {
      const row = item(
        a.id,
        agentState(a),
        a.error ?? `${a.model} · last activity ${when(a.last_activity)}${a.pending ? ` · ${a.pending} waiting` : ''}`,
        a.state === 'broken' ? [] : [a.state === 'stopped' ? button('Start', { action: 'agent_start', agent: a.id }, 'primary') : button('Stop', { action: 'agent_stop', agent: a.id }, 'danger')],
      );
      row.dataset.agent = a.id;
      return row;
    }),
    'no agents yet: theclaw up creates them',
  );
}

/** Each waiting item's name, what it is, and the action its buttons send (approve or not). */
function describeWaiting(w: WaitingItem): { name: string; kind: string; detail: string; decide: (approve: boolean) => ControlAction } {
  switch (w.kind) {
    case 'command':
      return {
        name: w.agent,
        kind: 'command',
        detail: `${w.command} · for ${w.conversation} · until ${when(w.expires_at)}`,
        decide: (approve) => ({ action: 'decide', agent: w.agent, code: w.code, approve }),
      };
    case 'proposal':
      return {
        name: w.agent,
        kind: `change of ${w.file}`,
        detail: `${w.summary} (+${w.added} -${w.removed} lines)`,
        decide: (approve) => ({ action: 'decide', agent: w.agent, code: w.code, approve }),
      };
    case 'pairing':
      return {
        name: w.peer_name ? `${w.peer_name} (${w.peer})` : w.peer,
        kind: 'pairing',
        detail: `asks to talk on ${w.channel} · code ${w.code} · until ${when(w.expires_at)}`,
        decide: (approve) => ({ action: 'pairing_decide', code: w.code, approve }),
      };
  }
}

function renderWaiting(waiting: WaitingItem[]): void {
  fill(
    'waiting',
    waiting.map((w) => {
      const { name, kind, detail, decide } = describeWaiting(w);
      const row = item(name, pill(kind, 'warn'), detail, [button('Approve', decide(true), 'primary'), button('Deny', decide(false), 'danger')]);
      row.dataset.code = w.code;
      return row;
    }),
    'nothing waits for you',
  );
}

function renderSpend(spend: Spend): void {
  byId('spend').replaceChildren(spendChart(spend));
  fill(
    'budgets',
    spend.budgets.map((b) => {
      const left = Math.max(0, b.daily_tokens - b.used_today);
      const row = item(
        b.agent,
        pill(left > 0 ? 'within budget' : 'budget used up', left > 0 ? 'ok' : 'bad'),
        `${left.toLocaleString('en')} of ${b.daily_tokens.toLocaleString('en')} tokens left today (UTC)`,
        [],
      );
      row.dataset.agent = b.agent;
      return row;
    }),
    "no agent has a daily cap: set budget.daily_tokens in an agent's config.yaml",
  );
}

/** A message as the conversations show it: who, when, and the text (as text: never as HTML). */
function messageBlock(m: ConversationMessage): HTMLElement {
  const block = el('div', `msg ${m.from}`);
  block.append(el('span', 'who', `${m.from === 'agent' ? 'agent' : m.source} · ${when(m.at)}`), el('span', 'text', m.text));
  return block;
}

function renderConversations(conversations: ConversationSummary[]): void {
  fill(
    'conversations',
    conversations.map((c) => {
      const row = el('div', 'item');
      row.dataset.thread = `${c.agent}/${c.thread}`;
      const open = el('button', '', 'Open') as HTMLButtonElement;
      open.type = 'button';
      open.addEventListener('click', () => void openConversation(c.agent, c.thread));
      const actions = el('span', 'actions');
      actions.append(open);
      const last = el('div', 'last');
      last.append(...c.last.map(messageBlock));
      row.append(el('span', 'name', c.agent), el('span', 'detail', c.thread), actions, last);
      return row;
    }),
    'no conversations yet',
  );
}

/** Shows one conversation, read-only, above the list, until it is closed. */
async function openConversation(agent: string, thread: string): Promise<void> {
  const panel = byId('conversation');
  try {
    const view = await request<ConversationView>(`${CONTROL_CONVERSATION_PATH}?${new URLSearchParams({ agent, thread })}`);
    const close = el('button', '', 'Close') as HTMLButtonElement;
    close.type = 'button';
    close.addEventListener('click', () => {
      panel.replaceChildren();
      panel.removeAttribute('data-shown');
    });
    const head = el('div', 'item');
    head.append(el('span', 'name', view.agent), el('span', 'detail', `${view.thread} · read-only`), el('span', 'actions'));
    head.lastElementChild!.append(close);
    const messages = el('div', 'messages');
    messages.append(...view.messages.map(messageBlock));
    panel.replaceChildren(head, messages);
    panel.setAttribute('data-shown', '');
    panel.scrollIntoView({ block: 'nearest' });
  } catch (error) {
    say((error as Error).message, 'bad');
  }
}

function renderProblems(problems: Problem[]): void {
  fill(
    'problems',
    problems.map((p) => {
      const row = item(p.from, pill(p.at ? when(p.at) : 'now', 'bad'), p.text, []);
      if (p.fix) row.append(el('div', 'fix', `Fix: ${p.fix}`));
      return row;
    }),
    'nothing is wrong',
  );
}

function render(view: ControlView): void {
  renderProblems(view.problems);
  renderWaiting(view.waiting);
  renderAgents(view.agents);
  renderSpend(view.spend);
  renderConversations(view.conversations);
}

function say(text: string, tone: 'ok' | 'bad'): void {
  notice.textContent = text;
  notice.dataset.tone = tone;
  notice.setAttribute('data-shown', '');
}

async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(path, { cache: 'no-store', ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } });
  if (response.status === 401) throw new Error('this page needs its access link: open the URL printed by xgw status');
  const body = (await response.json().catch(() => ({ error: `HTTP ${response.status}` }))) as T & { error?: string; suggestion?: string };
  if (!response.ok) throw new Error(body.suggestion ? `${body.error} - ${body.suggestion}` : (body.error ?? `HTTP ${response.status}`));
  return body;
}

/** Counts the actions sent: a read that began before one is out of date when it ends. */
let actions = 0;

async function act(action: ControlAction, trigger?: HTMLButtonElement): Promise<boolean> {
  actions += 1;
  if (trigger) trigger.disabled = true;
  try {
    const outcome = await request<ControlOutcome>(CONTROL_ACTION_PATH, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(action) });
    say(outcome.text, 'ok');
    show(outcome.view);
    return true;
  } catch (error) {
    say((error as Error).message, 'bad');
    await refresh();
    return false;
  } finally {
    if (trigger) trigger.disabled = false;
  }
}

let timer: ReturnType<typeof setTimeout> | undefined;

/** Renders the page's data, and reads it again in a while. */
function show(view: ControlView): void {
  render(view);
  problem.removeAttribute('data-shown');
  updated.removeAttribute('data-state');
  updated.textContent = `updated ${new Date(view.checked_at).toLocaleTimeString()}`;
  clearTimeout(timer);
  timer = setTimeout(refresh, REFRESH_MS);
}

async function refresh(): Promise<void> {
  clearTimeout(timer);
  const before = actions;
  try {
    const view = await request<ControlView>(CONTROL_DATA_PATH);
    if (actions === before) show(view);
  } catch (error) {
    problem.textContent = `Could not read the control page's data: ${(error as Error).message}`;
    problem.setAttribute('data-shown', '');
    updated.setAttribute('data-state', 'stale');
    timer = setTimeout(refresh, REFRESH_MS);
  }
}

const create = byId<HTMLFormElement>('create');
create.addEventListener('submit', (event) => {
  event.preventDefault();
  const name = byId<HTMLInputElement>('new-name');
  const purpose = byId<HTMLInputElement>('new-purpose');
  void act({ action: 'agent_create', agent: name.value.trim(), purpose: purpose.value.trim() }, byId<HTMLButtonElement>('create-button')).then((done) => {
    if (done) create.reset();
  });
});

void refresh();
