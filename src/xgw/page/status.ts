import { el, pill, when } from './dom.js';
import { byId, pageToken } from './token.js';

/**
 * The status page's script (the HTML is webchat-status-page.ts): fetches `/status.json`
 * (`theclaw status --json --recent N`) every few seconds and renders it. Data is only ever set
 * through `textContent`, never `innerHTML`. The types below are what the page reads of
 * `theclaw status --json`; the page shows what is there and leaves out what is not.
 */

const REFRESH_MS = 3_000;

interface Component {
  name: string;
  running: boolean;
  answering?: boolean;
  pid?: number | null;
  uptime_seconds?: number | null;
  rss_bytes?: number | null;
}
interface Channel {
  id: string;
  state: string;
  detail?: string;
}
interface Agent {
  id: string;
  error?: string;
  started?: boolean;
  running?: boolean;
  pending: number;
  undelivered: number;
  threads: number;
  last_activity: string | null;
  model?: string;
}
interface Queue {
  thread: string;
  consumer: string;
  pending: number;
  state: string;
  last_error?: string | null;
}
interface Usage {
  day: string;
  agent: string;
  calls: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
}
interface ThreadEvents {
  agent: string;
  thread: string;
  events: { id: number; created_at: string; type: string; subtype?: string | null; source: string; summary: string; error?: boolean }[];
}
interface SystemStatus {
  checked_at: string;
  components: Component[];
  channels: Channel[];
  agents: Agent[];
  model: { offline: boolean; provider: string; model?: string | null; problem?: string };
  queues: Queue[];
  details?: { usage: Usage[]; threads: ThreadEvents[]; days: number };
}

type Cell = string | number | null | undefined | Node;
/** A column: its title, its cell of a row, and the cell's class. */
type Column<T> = [title: string, cell: (row: T) => Cell, className?: string];

const token = pageToken();

const megabytes = (bytes: number | null | undefined): string => (bytes === null || bytes === undefined ? '' : `${Math.round(bytes / 1048576)} MB`);
function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '';
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

function table<T>(columns: Column<T>[], rows: T[], rowClass?: (row: T) => string): HTMLElement {
  const t = el('table');
  const head = el('tr');
  for (const [title, , className] of columns) head.append(el('th', className, title));
  t.append(head);
  for (const row of rows) {
    const tr = el('tr', rowClass?.(row));
    for (const [, cell, className] of columns) {
      const value = cell(row);
      const td = el('td', className);
      if (value instanceof Node) td.append(value);
      else td.textContent = value === undefined || value === null ? '' : String(value);
      if (className === 'clip') td.title = td.textContent; // cut short on screen, whole on hover
      tr.append(td);
    }
    t.append(tr);
  }
  return t;
}

function fill<T>(id: string, rows: T[], columns: Column<T>[], emptyText: string, rowClass?: (row: T) => string): void {
  byId(id).replaceChildren(rows.length ? table(columns, rows, rowClass) : el('div', 'empty', emptyText));
}

function render(s: SystemStatus): void {
  fill<Component>(
    'components',
    s.components,
    [
      ['component', (c) => c.name],
      ['state', (c) => (!c.running ? pill('stopped', 'bad') : c.answering ? pill('running', 'ok') : pill('not answering', 'bad'))],
      ['pid', (c) => c.pid, 'num'],
      ['uptime', (c) => duration(c.uptime_seconds), 'num'],
      ['memory', (c) => megabytes(c.rss_bytes), 'num'],
    ],
    'no components',
  );
  fill<Channel>(
    'channels',
    s.channels,
    [
      ['channel', (c) => c.id],
      ['state', (c) => pill(c.state, c.state === 'running' ? 'ok' : c.state === 'stopped' ? 'warn' : 'bad')],
      ['detail', (c) => c.detail ?? '', 'text'],
    ],
    'no channels are configured',
  );
  fill<Agent>(
    'agents',
    s.agents,
    [
      ['agent', (a) => a.id],
      ['state', (a) => (a.error ? pill('broken', 'bad') : a.started ? pill(a.running ? 'running' : 'started', 'ok') : pill('stopped', 'warn'))],
      ['pending', (a) => a.pending, 'num'],
      ['undelivered', (a) => a.undelivered, 'num'],
      ['threads', (a) => a.threads, 'num'],
      ['last activity', (a) => when(a.last_activity)],
      ['model', (a) => a.error ?? a.model, 'text'],
    ],
    'no agents yet: theclaw up creates them',
    (a) => (a.error ? 'error' : ''),
  );
  byId('model').replaceChildren(
    s.model.problem
      ? pill(`model: ${s.model.problem}`, 'bad')
      : s.model.offline
        ? pill('model: offline mock (no provider key)', 'warn')
        : pill(`model: ${s.model.provider}/${s.model.model || 'default'}`, 'ok'),
  );
  fill<Queue>(
    'queues',
    s.queues,
    [
      ['thread', (q) => q.thread],
      ['consumer', (q) => q.consumer],
      ['pending', (q) => q.pending, 'num'],
      ['state', (q) => pill(q.state, q.state === 'failing' ? 'bad' : 'ok')],
      ['last error', (q) => q.last_error ?? '', 'text'],
    ],
    'nothing is waiting to be handled or delivered',
    (q) => (q.state === 'failing' ? 'error' : ''),
  );
  const details = s.details ?? { usage: [], threads: [], days: 7 };
  fill<Usage>(
    'usage',
    details.usage,
    [
      ['day', (u) => u.day],
      ['agent', (u) => u.agent],
      ['calls', (u) => u.calls, 'num'],
      ['input tokens', (u) => u.input_tokens, 'num'],
      ['output tokens', (u) => u.output_tokens, 'num'],
      ['cost (USD)', (u) => u.cost.toFixed(4), 'num'],
    ],
    `no model calls in the last ${details.days} days`,
  );
  const events = byId('events');
  events.replaceChildren();
  if (!details.threads.length) events.append(el('div', 'empty', 'no events yet'));
  for (const t of details.threads) {
    events.append(el('h3', '', `${t.agent} / ${t.thread}`));
    const box = el('div', 'scroll');
    box.append(
      table<ThreadEvents['events'][number]>(
        [
          ['#', (e) => e.id, 'num'],
          ['time', (e) => new Date(e.created_at).toLocaleTimeString()],
          ['type', (e) => (e.subtype ? `${e.type}/${e.subtype}` : e.type), 'kind'],
          ['source', (e) => e.source, 'clip'],
          ['content', (e) => e.summary, 'text'],
        ],
        t.events,
        (e) => (e.error ? 'error' : ''),
      ),
    );
    events.append(box);
  }
}

const updated = byId('updated');
const problem = byId('problem');

async function readStatus(): Promise<SystemStatus> {
  const response = await fetch('/status.json', { cache: 'no-store', headers: { Authorization: `Bearer ${token}` } });
  if (response.status === 401) throw new Error('this page needs its access link: open the URL printed by xgw status');
  const body = (await response.json()) as SystemStatus & { error?: string };
  if (!response.ok) throw new Error(body?.error ?? `HTTP ${response.status}`);
  return body;
}

async function refresh(): Promise<void> {
  try {
    const status = await readStatus();
    render(status);
    problem.removeAttribute('data-shown');
    updated.removeAttribute('data-state');
    updated.textContent = `updated ${new Date(status.checked_at).toLocaleTimeString()}`;
  } catch (error) {
    problem.textContent = `Could not read the status: ${(error as Error).message}`;
    problem.setAttribute('data-shown', '');
    updated.setAttribute('data-state', 'stale');
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

void refresh();
