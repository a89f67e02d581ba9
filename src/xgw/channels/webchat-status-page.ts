import { PAGE_SCRIPTS } from './webchat-protocol.js';

/** The status page's look, which the control page shares (webchat-control-page.ts). */
export const STATUS_STYLE = `:root {
  --bg: #f4f5f7; --surface: #ffffff; --text: #1c1f24; --muted: #6b7280; --border: #e2e5ea;
  --ok: #16a34a; --warn: #d97706; --bad: #dc2626; --bad-bg: #fee2e2; --head: #f9fafb;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #0f1115; --surface: #171a20; --text: #e6e8eb; --muted: #9aa1ab; --border: #2a2f37; --bad-bg: #3b1517; --head: #1c2027; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", Arial, sans-serif; background: var(--bg); color: var(--text); }
header { background: var(--surface); border-bottom: 1px solid var(--border); }
.wrap { max-width: 1100px; margin: 0 auto; padding: .8rem 1rem; }
header .wrap { display: flex; flex-wrap: wrap; align-items: center; gap: .75rem; }
.logo { width: 32px; height: 32px; border-radius: 9px; display: grid; place-items: center; background: linear-gradient(135deg, #2563eb, #7c3aed); color: #fff; font-weight: 700; font-size: 13px; }
h1 { font-size: 1.05rem; margin: 0; flex: 1; }
#updated { color: var(--muted); font-size: .8rem; }
#updated[data-state="stale"] { color: var(--bad); }
a { color: inherit; }
section { background: var(--surface); border: 1px solid var(--border); border-radius: 10px; margin: 1rem 0; overflow: hidden; }
h2 { font-size: .9rem; margin: 0; padding: .55rem .8rem; background: var(--head); border-bottom: 1px solid var(--border); }
h3 { font-size: .85rem; margin: 0; padding: .5rem .8rem; border-top: 1px solid var(--border); color: var(--muted); font-weight: 600; }
.scroll { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: .35rem .8rem; border-top: 1px solid var(--border); vertical-align: top; white-space: nowrap; }
th { font-weight: 600; color: var(--muted); font-size: .78rem; border-top: none; }
td.text { white-space: normal; word-break: break-word; min-width: 16rem; }
td.clip { max-width: 14rem; overflow: hidden; text-overflow: ellipsis; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.empty { padding: .6rem .8rem; color: var(--muted); }
.pill { display: inline-block; padding: 0 .5rem; border-radius: 999px; font-size: .78rem; border: 1px solid currentColor; }
.ok { color: var(--ok); } .warn { color: var(--warn); } .bad { color: var(--bad); }
tr.error td { background: var(--bad-bg); }
tr.error td.kind { color: var(--bad); font-weight: 600; }
#problem { display: none; margin: 1rem 0; padding: .6rem .8rem; border-radius: 10px; background: var(--bad-bg); color: var(--bad); }
#problem[data-shown] { display: block; }
header a { white-space: nowrap; }`;

/**
 * The status page the web chat serves at `/status` (same token as the chat): its HTML and CSS.
 * Its script (src/xgw/page/status.ts) fetches `/status.json` (`theclaw status --json --recent N`)
 * every few seconds and renders components, channels, agents, queues, usage per agent per day
 * and the newest events of every thread, errors highlighted. With `control` (the owner's web
 * chat), its header links to the control page.
 */
export function statusPage(control: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>TheClaw status</title>
<link rel="icon" href="data:,">
<style>
${STATUS_STYLE}
</style>
</head>
<body>
<header><div class="wrap"><div class="logo">TC</div><h1>TheClaw status</h1><span id="model"></span><span id="updated">loading…</span><a href="/">chat</a>${control ? '<a href="/control">control</a>' : ''}</div></header>
<main class="wrap">
<div id="problem" role="alert"></div>
<section><h2>Components</h2><div class="scroll" id="components"></div></section>
<section><h2>Channels</h2><div class="scroll" id="channels"></div></section>
<section><h2>Agents</h2><div class="scroll" id="agents"></div></section>
<section><h2>Delivery queues</h2><div class="scroll" id="queues"></div></section>
<section><h2>Usage and cost per agent per day</h2><div class="scroll" id="usage"></div></section>
<section><h2>Recent events (newest first)</h2><div id="events"></div></section>
</main>
<script src="${PAGE_SCRIPTS.status}"></script>
</body>
</html>
`;
}
