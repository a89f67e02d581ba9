import type { Spend } from '../channels/control-protocol.js';
import { el } from './dom.js';

/**
 * The control page's spend: tokens per day as bars, each stacked by agent, over the days the
 * view gives (today last), drawn as inline SVG by this script (nothing loads from elsewhere),
 * with a legend of each agent's tokens and cost over those days. Each bar's part names its day,
 * agent and figures in a <title> (shown on hover) and in data attributes.
 */

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 600;
const HEIGHT = 180;
/** Room for the axis labels: left (the top figure), bottom (dates). */
const LEFT = 44;
const BOTTOM = 20;
const PALETTE = ['#2563eb', '#16a34a', '#d97706', '#7c3aed', '#db2777', '#0891b2', '#65a30d', '#dc2626'];

function svg(tag: string, attributes: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const tokens = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k` : String(n));
const money = (n: number): string => `$${n.toFixed(n > 0 && n < 0.01 ? 4 : 2)}`;

/** The chart and its legend; an empty note where no call was made in those days. */
export function spendChart(spend: Spend): HTMLElement {
  const box = el('div', 'chart');
  if (spend.usage.length === 0) {
    box.append(el('div', 'empty', `no model calls in the last ${spend.days.length} days`));
    return box;
  }
  // Agents by their total, largest first: the same colour in every bar and in the legend.
  const totals = new Map<string, { tokens: number; cost: number }>();
  for (const u of spend.usage) {
    const t = totals.get(u.agent) ?? { tokens: 0, cost: 0 };
    totals.set(u.agent, { tokens: t.tokens + u.input_tokens + u.output_tokens, cost: t.cost + u.cost });
  }
  const agents = [...totals].sort((a, b) => b[1].tokens - a[1].tokens).map(([agent]) => agent);
  const colour = (agent: string) => PALETTE[agents.indexOf(agent) % PALETTE.length]!;
  const perDay = spend.days.map((day) => spend.usage.filter((u) => u.day === day).sort((a, b) => agents.indexOf(a.agent) - agents.indexOf(b.agent)));
  const top = Math.max(1, ...perDay.map((parts) => parts.reduce((sum, u) => sum + u.input_tokens + u.output_tokens, 0)));

  const chart = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, role: 'img', 'aria-label': `tokens per day over the last ${spend.days.length} days` });
  const plotHeight = HEIGHT - BOTTOM - 6;
  const slot = (WIDTH - LEFT) / spend.days.length;
  chart.append(
    svg('line', { x1: LEFT, x2: WIDTH, y1: HEIGHT - BOTTOM, y2: HEIGHT - BOTTOM, class: 'axis' }),
    svg('text', { x: LEFT - 6, y: 14, 'text-anchor': 'end', class: 'label' }, tokens(top)),
    svg('text', { x: LEFT - 6, y: HEIGHT - BOTTOM, 'text-anchor': 'end', class: 'label' }, '0'),
  );
  perDay.forEach((parts, i) => {
    const day = spend.days[i]!;
    let y = HEIGHT - BOTTOM;
    for (const u of parts) {
      const used = u.input_tokens + u.output_tokens;
      const height = Math.max(1, (used / top) * plotHeight);
      y -= height;
      const bar = svg('rect', { x: LEFT + i * slot + slot * 0.15, y, width: slot * 0.7, height, fill: colour(u.agent), 'data-day': day, 'data-agent': u.agent, 'data-tokens': used });
      bar.append(
        svg(
          'title',
          {},
          `${day} ${u.agent}: ${used.toLocaleString('en')} tokens (${u.input_tokens.toLocaleString('en')} in, ${u.output_tokens.toLocaleString('en')} out), ${u.calls} calls, ${money(u.cost)}`,
        ),
      );
      chart.append(bar);
    }
    // Today and every seventh day back from it; today's label ends at the edge.
    const back = spend.days.length - 1 - i;
    if (back % 7 === 0) chart.append(svg('text', { x: back === 0 ? WIDTH : LEFT + (i + 0.5) * slot, y: HEIGHT - 5, 'text-anchor': back === 0 ? 'end' : 'middle', class: 'label' }, day.slice(5)));
  });
  box.append(chart);

  const legend = el('div', 'legend');
  for (const agent of agents) {
    const t = totals.get(agent)!;
    const entry = el('span', 'key');
    const swatch = el('i');
    swatch.style.background = colour(agent);
    entry.dataset.agent = agent;
    entry.append(swatch, `${agent}: ${t.tokens.toLocaleString('en')} tokens, ${money(t.cost)}`);
    legend.append(entry);
  }
  box.append(legend);
  return box;
}
