import { PAGE_TOKEN_SCRIPT } from './webchat-page-token.js';

/** How often the status page asks again. */
export const STATUS_REFRESH_MS = 3_000;

/**
 * The status page the web chat serves at `/status` (same token as the chat): one self-contained
 * HTML document that fetches `/status.json` (`theclaw status --json --recent N`) every few
 * seconds and renders components, channels, agents, queues, usage per agent per day and the
 * newest events of every thread, errors highlighted. Data is only ever set through
 * `textContent`, never `innerHTML`.
 *
 * Written as `String.raw`, so the script uses no template literals (no backticks, no `${`).
 */
export const STATUS_PAGE =
  String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>TheClaw status</title>
<link rel="icon" href="data:,">
<style>
:root {
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
header .wrap { display: flex; align-items: center; gap: .75rem; }
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
</style>
</head>
<body>
<header><div class="wrap"><div class="logo">TC</div><h1>TheClaw status</h1><span id="model"></span><span id="updated">loading…</span><a href="/">chat</a></div></header>
<main class="wrap">
<div id="problem" role="alert"></div>
<section><h2>Components</h2><div class="scroll" id="components"></div></section>
<section><h2>Channels</h2><div class="scroll" id="channels"></div></section>
<section><h2>Agents</h2><div class="scroll" id="agents"></div></section>
<section><h2>Delivery queues</h2><div class="scroll" id="queues"></div></section>
<section><h2>Usage and cost per agent per day</h2><div class="scroll" id="usage"></div></section>
<section><h2>Recent events (newest first)</h2><div id="events"></div></section>
</main>
<script>
"use strict";
var REFRESH_MS = ` +
  String(STATUS_REFRESH_MS) +
  PAGE_TOKEN_SCRIPT +
  String.raw`
var token = pageToken();

function el(tag, className, text) {
  var node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}
function pill(text, tone) { return el("span", "pill " + tone, text); }
function megabytes(bytes) { return bytes === null || bytes === undefined ? "" : Math.round(bytes / 1048576) + " MB"; }
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return seconds + "s";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m " + (seconds % 60) + "s";
  return Math.floor(seconds / 3600) + "h " + Math.floor((seconds % 3600) / 60) + "m";
}
function when(iso) { return iso ? new Date(iso).toLocaleString() : "never"; }

/** A table: columns are [title, cell(row) -> string | Node, className?]. */
function table(columns, rows, rowClass) {
  var t = el("table");
  var head = el("tr");
  columns.forEach(function (c) { head.appendChild(el("th", c[2] || "", c[0])); });
  t.appendChild(head);
  rows.forEach(function (row) {
    var tr = el("tr", rowClass ? rowClass(row) : "");
    columns.forEach(function (c) {
      var value = c[1](row);
      var td = el("td", c[2] || "");
      if (value instanceof Node) td.appendChild(value); else td.textContent = value === undefined || value === null ? "" : String(value);
      if (c[2] === "clip") td.title = td.textContent; // cut short on screen, whole on hover
      tr.appendChild(td);
    });
    t.appendChild(tr);
  });
  return t;
}
function fill(id, rows, columns, emptyText, rowClass) {
  var box = document.getElementById(id);
  box.replaceChildren(rows.length ? table(columns, rows, rowClass) : el("div", "empty", emptyText));
}

function render(s) {
  fill("components", s.components, [
    ["component", function (c) { return c.name; }],
    ["state", function (c) { return !c.running ? pill("stopped", "bad") : c.answering ? pill("running", "ok") : pill("not answering", "bad"); }],
    ["pid", function (c) { return c.pid; }, "num"],
    ["uptime", function (c) { return duration(c.uptime_seconds); }, "num"],
    ["memory", function (c) { return megabytes(c.rss_bytes); }, "num"]
  ], "no components");
  fill("channels", s.channels, [
    ["channel", function (c) { return c.id; }],
    ["state", function (c) { return pill(c.state, c.state === "running" ? "ok" : c.state === "stopped" ? "warn" : "bad"); }],
    ["detail", function (c) { return c.detail || ""; }, "text"]
  ], "no channels are configured");
  fill("agents", s.agents, [
    ["agent", function (a) { return a.id; }],
    ["state", function (a) { return a.error ? pill("broken", "bad") : a.started ? pill(a.running ? "running" : "started", "ok") : pill("stopped", "warn"); }],
    ["pending", function (a) { return a.pending; }, "num"],
    ["undelivered", function (a) { return a.undelivered; }, "num"],
    ["threads", function (a) { return a.threads; }, "num"],
    ["last activity", function (a) { return when(a.last_activity); }],
    ["model", function (a) { return a.error || a.model; }, "text"]
  ], "no agents yet: theclaw up creates them", function (a) { return a.error ? "error" : ""; });
  var model = document.getElementById("model");
  model.replaceChildren(s.model.offline
    ? pill("model: offline mock (no provider key)", "warn")
    : pill("model: " + s.model.provider + "/" + (s.model.model || "default"), "ok"));
  fill("queues", s.queues, [
    ["thread", function (q) { return q.thread; }],
    ["consumer", function (q) { return q.consumer; }],
    ["pending", function (q) { return q.pending; }, "num"],
    ["state", function (q) { return pill(q.state, q.state === "failing" ? "bad" : "ok"); }],
    ["last error", function (q) { return q.last_error || ""; }, "text"]
  ], "nothing is waiting to be handled or delivered", function (q) { return q.state === "failing" ? "error" : ""; });
  var details = s.details || { usage: [], threads: [], days: 7 };
  fill("usage", details.usage, [
    ["day", function (u) { return u.day; }],
    ["agent", function (u) { return u.agent; }],
    ["calls", function (u) { return u.calls; }, "num"],
    ["input tokens", function (u) { return u.input_tokens; }, "num"],
    ["output tokens", function (u) { return u.output_tokens; }, "num"],
    ["cost (USD)", function (u) { return u.cost.toFixed(4); }, "num"]
  ], "no model calls in the last " + details.days + " days");
  var events = document.getElementById("events");
  events.replaceChildren();
  if (!details.threads.length) events.appendChild(el("div", "empty", "no events yet"));
  details.threads.forEach(function (t) {
    events.appendChild(el("h3", "", t.agent + " / " + t.thread));
    var box = el("div", "scroll");
    box.appendChild(table([
      ["#", function (e) { return e.id; }, "num"],
      ["time", function (e) { return new Date(e.created_at).toLocaleTimeString(); }],
      ["type", function (e) { return e.subtype ? e.type + "/" + e.subtype : e.type; }, "kind"],
      ["source", function (e) { return e.source; }, "clip"],
      ["content", function (e) { return e.summary; }, "text"]
    ], t.events, function (e) { return e.error ? "error" : ""; }));
    events.appendChild(box);
  });
}

var updated = document.getElementById("updated");
var problem = document.getElementById("problem");
function refresh() {
  fetch("/status.json", { cache: "no-store", headers: { Authorization: "Bearer " + token } }).then(function (response) {
    if (response.status === 401) throw new Error("this page needs its access link: open the URL printed by xgw status");
    return response.json().then(function (body) {
      if (!response.ok) throw new Error(body && body.error ? body.error : "HTTP " + response.status);
      return body;
    });
  }).then(function (status) {
    render(status);
    problem.removeAttribute("data-shown");
    updated.removeAttribute("data-state");
    updated.textContent = "updated " + new Date(status.checked_at).toLocaleTimeString();
  }).catch(function (error) {
    problem.textContent = "Could not read the status: " + error.message;
    problem.setAttribute("data-shown", "");
    updated.setAttribute("data-state", "stale");
  }).finally(function () {
    setTimeout(refresh, REFRESH_MS);
  });
}
refresh();
</script>
</body>
</html>
`;
