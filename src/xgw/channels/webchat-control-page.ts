import { STATUS_STYLE } from './webchat-status-page.js';
import { PAGE_SCRIPTS } from './webchat-protocol.js';

/**
 * The owner's control page (`/control`, served by the owner's web chat only: webchat-control.ts):
 * its HTML and CSS, in the status page's look. Its script, src/xgw/page/control.ts, reads
 * `/control.json` and sends the owner's actions; every section is filled by it.
 */
export const CONTROL_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>TheClaw control</title>
<link rel="icon" href="data:,">
<style>
${STATUS_STYLE}
:root { --accent: #2563eb; --ok-bg: #dcfce7; }
@media (prefers-color-scheme: dark) { :root { --accent: #3b82f6; --ok-bg: #12301c; } }
.item { display: flex; flex-wrap: wrap; align-items: center; gap: .35rem .75rem; padding: .6rem .8rem; border-top: 1px solid var(--border); }
.item:first-child { border-top: none; }
.item .name { font-weight: 600; overflow-wrap: anywhere; }
.item .detail { color: var(--muted); font-size: .8rem; flex: 1 1 14rem; min-width: 0; overflow-wrap: anywhere; }
.item .actions { display: flex; gap: .4rem; margin-left: auto; }
button { font: inherit; font-size: .85rem; min-height: 36px; padding: .3rem .85rem; border-radius: 8px; border: 1px solid var(--border); background: var(--surface); color: var(--text); cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--bad); border-color: currentColor; }
button:disabled { opacity: .5; cursor: default; }
form.create { display: flex; flex-wrap: wrap; gap: .5rem; padding: .7rem .8rem; border-top: 1px solid var(--border); margin: 0; }
form.create input { font: inherit; min-height: 36px; padding: .3rem .6rem; border: 1px solid var(--border); border-radius: 8px; background: var(--bg); color: var(--text); min-width: 0; }
#new-name { flex: 1 1 8rem; }
#new-purpose { flex: 3 1 14rem; }
#notice { display: none; margin: 1rem 0; padding: .6rem .8rem; border-radius: 10px; background: var(--ok-bg); color: var(--ok); }
#notice[data-shown] { display: block; }
#notice[data-tone="bad"] { background: var(--bad-bg); color: var(--bad); }
.chart { padding: .6rem .8rem; }
.chart svg { display: block; max-width: 100%; height: auto; }
.chart .axis { stroke: var(--border); }
.chart .label { fill: var(--muted); font-size: 13px; }
.legend { display: flex; flex-wrap: wrap; gap: .3rem 1rem; margin-top: .4rem; font-size: .8rem; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: .35rem; }
#budgets { border-top: 1px solid var(--border); }
.fix { flex-basis: 100%; font-size: .85rem; }
.last { flex-basis: 100%; }
.msg { display: flex; flex-direction: column; padding: .25rem .6rem; margin-top: .3rem; border-left: 3px solid var(--border); }
.msg.agent { border-left-color: var(--accent); }
.msg .who { font-size: .75rem; color: var(--muted); }
.msg .text { white-space: pre-wrap; overflow-wrap: anywhere; }
.last .msg .text { display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; overflow: hidden; }
#conversation { display: none; }
#conversation[data-shown] { display: block; }
#conversation .messages { padding: 0 .8rem .8rem; max-height: 70vh; overflow-y: auto; }
</style>
</head>
<body>
<header><div class="wrap"><div class="logo">TC</div><h1>TheClaw control</h1><span id="updated">loading…</span><a href="/">chat</a><a href="/status">status</a></div></header>
<main class="wrap">
<div id="problem" role="alert"></div>
<div id="notice" role="status" aria-live="polite"></div>
<section><h2>Problems</h2><div id="problems"></div></section>
<section><h2>Waiting for you</h2><div id="waiting"></div></section>
<section><h2>Agents</h2><div id="agents"></div>
<form class="create" id="create" autocomplete="off">
<input id="new-name" name="name" placeholder="new agent's name" aria-label="New agent's name" required pattern="[a-z0-9][a-z0-9_\\-]{0,62}" title="lower-case letters, digits, _ and -">
<input id="new-purpose" name="purpose" placeholder="its purpose, in one line" aria-label="Its purpose" required maxlength="300">
<button type="submit" class="primary" id="create-button">Create</button>
</form></section>
<section><h2>Spend: tokens per day, last 30 days</h2><div id="spend"></div><div id="budgets"></div></section>
<section id="conversation" aria-live="polite"></section>
<section><h2>Conversations</h2><div id="conversations"></div></section>
</main>
<script src="${PAGE_SCRIPTS.control}"></script>
</body>
</html>
`;
