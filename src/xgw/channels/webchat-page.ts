import { PAGE_SCRIPTS } from './webchat-protocol.js';

/**
 * The web chat page's HTML and CSS; its script is src/xgw/page/chat.ts, bundled by tsup and
 * served by the same server. Nothing loads from elsewhere: the machine may be offline. With
 * `control`, the owner's web chat, its header links to the control page.
 */
export function webchatPage(control: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover, interactive-widget=resizes-content">
<meta name="color-scheme" content="light dark">
<title>TheClaw</title>
<link rel="icon" href="data:,">
<style>
:root {
  --bg: #f4f5f7; --surface: #ffffff; --text: #1c1f24; --muted: #6b7280; --border: #e2e5ea;
  --accent: #2563eb; --accent-text: #ffffff; --agent: #ffffff; --shadow: 0 1px 2px rgba(16, 24, 40, .06);
  --ok: #16a34a; --warn: #d97706; --bad: #dc2626; --field: #f4f5f7;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0f1115; --surface: #171a20; --text: #e6e8eb; --muted: #9aa1ab; --border: #2a2f37;
    --accent: #3b82f6; --agent: #1e232b; --shadow: none; --field: #0f1115;
  }
}
* { box-sizing: border-box; }
html, body { height: 100%; margin: 0; }
body {
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, sans-serif;
  background: var(--bg); color: var(--text); -webkit-text-size-adjust: 100%;
}
.app { display: flex; flex-direction: column; height: 100vh; height: 100dvh; }
.wrap { width: 100%; max-width: 780px; margin: 0 auto; }
header { background: var(--surface); border-bottom: 1px solid var(--border); padding-top: env(safe-area-inset-top); flex: none; }
header .wrap { display: flex; align-items: center; gap: .75rem; padding: .7rem 1rem; }
.logo {
  width: 36px; height: 36px; border-radius: 10px; flex: none; display: grid; place-items: center;
  background: linear-gradient(135deg, #2563eb, #7c3aed); color: #fff; font-weight: 700; font-size: 15px; letter-spacing: .02em;
}
.title { flex: 1; min-width: 0; }
.title h1 { font-size: 1.05rem; margin: 0; line-height: 1.2; }
.title p { margin: 0; color: var(--muted); font-size: .8rem; }
.status {
  display: inline-flex; align-items: center; gap: .45rem; font: inherit; font-size: .8rem; color: var(--muted);
  background: var(--field); border: 1px solid var(--border); border-radius: 999px; padding: .25rem .7rem; cursor: default;
}
.status[data-retry] { cursor: pointer; }
a.nav { font-size: .8rem; color: var(--muted); text-decoration: none; border: 1px solid var(--border); border-radius: 999px; padding: .25rem .7rem; background: var(--field); }
.dot { width: 8px; height: 8px; border-radius: 50%; background: var(--warn); flex: none; }
.status[data-state="online"] .dot { background: var(--ok); }
.status[data-state="connecting"] .dot { animation: pulse 1.2s ease-in-out infinite; }
.status[data-state="offline"] .dot, .status[data-state="denied"] .dot { background: var(--bad); }
#log { flex: 1; overflow-y: auto; overscroll-behavior: contain; -webkit-overflow-scrolling: touch; }
#thread { display: flex; flex-direction: column; gap: .35rem; padding: 1rem 1rem 1.25rem; min-height: 100%; }
.empty { margin: auto; text-align: center; color: var(--muted); padding: 2rem 1rem; }
.empty strong { display: block; color: var(--text); font-size: 1.1rem; margin-bottom: .25rem; }
.row { display: flex; flex-direction: column; max-width: min(82%, 40rem); }
.row + .row { margin-top: .35rem; }
.row.user { align-self: flex-end; align-items: flex-end; }
.row.agent { align-self: flex-start; align-items: flex-start; }
.row.system { align-self: center; align-items: center; max-width: 92%; }
.bubble {
  padding: .55rem .85rem; border-radius: 18px; white-space: pre-wrap; overflow-wrap: anywhere;
  box-shadow: var(--shadow); max-width: 100%;
}
.user .bubble { background: var(--accent); color: var(--accent-text); border-bottom-right-radius: 6px; }
.agent .bubble { background: var(--agent); border: 1px solid var(--border); border-bottom-left-radius: 6px; }
.system .bubble {
  background: transparent; box-shadow: none; color: var(--muted); font-size: .85rem; text-align: center; padding: .25rem .5rem;
}
.bubble a { color: inherit; text-decoration: underline; text-underline-offset: 2px; }
.meta { font-size: .72rem; color: var(--muted); margin: .2rem .4rem 0; }
.pending .bubble { opacity: .6; }
.failed .bubble { background: transparent; color: var(--bad); border: 1px solid var(--bad); }
.failed .meta { color: var(--bad); }
.unanswered .bubble { opacity: .7; }
.draft .meta { font-style: italic; }
.unanswered .meta, .waiting .meta { color: var(--warn); }
.notice .bubble { background: transparent; box-shadow: none; color: var(--muted); font-style: italic; }
.typing .bubble { display: inline-flex; gap: 5px; padding: .8rem .95rem; }
.typing i { width: 7px; height: 7px; border-radius: 50%; background: var(--muted); animation: blink 1.3s infinite ease-in-out; }
.typing i:nth-child(2) { animation-delay: .18s; }
.typing i:nth-child(3) { animation-delay: .36s; }
.typing .progress {
  font: .75rem/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: var(--muted); margin: .25rem .4rem 0;
  max-width: 100%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
}
.typing .progress:empty { display: none; }
footer { background: var(--surface); border-top: 1px solid var(--border); flex: none; padding-bottom: env(safe-area-inset-bottom); }
form { display: flex; align-items: flex-end; gap: .5rem; padding: .65rem .75rem; margin: 0 auto; }
textarea {
  flex: 1; min-width: 0; resize: none; font: inherit; color: inherit; background: var(--field);
  border: 1px solid var(--border); border-radius: 22px; padding: .6rem 1rem; line-height: 1.4;
  max-height: 40vh; height: 44px; outline: none;
}
textarea:focus { border-color: var(--accent); box-shadow: 0 0 0 3px rgba(37, 99, 235, .18); }
button.send {
  flex: none; width: 44px; height: 44px; border-radius: 50%; border: 0; background: var(--accent); color: #fff;
  display: grid; place-items: center; cursor: pointer;
}
button.send:disabled { opacity: .4; cursor: default; }
button.send svg { width: 20px; height: 20px; }
button.attach {
  flex: none; width: 44px; height: 44px; border-radius: 50%; border: 1px solid var(--border); background: var(--field);
  color: var(--muted); display: grid; place-items: center; cursor: pointer;
}
button.attach svg { width: 20px; height: 20px; }
.attached { display: flex; align-items: center; gap: .5rem; padding: .5rem .9rem 0; font-size: .85rem; color: var(--muted); }
.attached[hidden] { display: none; }
.attached button { border: 0; background: none; color: inherit; font-size: 1.1rem; cursor: pointer; }
.file {
  display: block; width: fit-content; max-width: 100%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  font-size: .85rem; border: 1px solid currentColor; border-radius: 8px; padding: .1rem .5rem; margin-bottom: .3rem; opacity: .9;
}
.file + .file { margin-top: .15rem; }
button.file { font: inherit; font-size: .85rem; color: inherit; background: none; cursor: pointer; text-align: left; }
button.file:hover { text-decoration: underline; }
.bubble img.image { display: block; max-width: 100%; max-height: 60vh; border-radius: 12px; margin-bottom: .35rem; }
.hint { text-align: center; color: var(--muted); font-size: .72rem; padding: 0 1rem .5rem; margin-top: -.2rem; }
@media (pointer: coarse), (max-width: 520px) { .hint { display: none; } }
@media (max-width: 520px) { .title p { display: none; } #thread { padding: .75rem .65rem 1rem; } .row { max-width: 86%; } }
@keyframes blink { 0%, 80%, 100% { opacity: .25; transform: translateY(0); } 40% { opacity: 1; transform: translateY(-3px); } }
@keyframes pulse { 0%, 100% { opacity: 1; } 50% { opacity: .3; } }
@media (prefers-reduced-motion: reduce) { .typing i, .dot { animation: none !important; } }
</style>
</head>
<body>
<div class="app">
  <header><div class="wrap">
    <div class="logo" aria-hidden="true">TC</div>
    <div class="title"><h1>TheClaw</h1><p>Chat with your agent</p></div>
    <button type="button" class="status" id="status" data-state="connecting" aria-live="polite">
      <span class="dot"></span><span id="status-text">Connecting…</span>
    </button>${control ? '\n    <a class="nav" id="control-link" href="/control">Control</a>' : ''}
  </div></header>
  <main id="log" aria-live="polite">
    <div id="thread" class="wrap">
      <div class="empty" id="empty"><strong>No messages yet</strong>Say hello to start the conversation.</div>
    </div>
  </main>
  <footer>
    <div id="attached" class="attached wrap" hidden><span id="attached-name"></span><button type="button" id="detach" aria-label="Remove the file">×</button></div>
    <form id="composer" class="wrap" autocomplete="off">
      <input type="file" id="file" hidden>
      <button class="attach" id="attach" type="button" aria-label="Attach a file" title="Attach a file">
        <svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true"><path d="M21 11.5l-8.6 8.6a5.5 5.5 0 0 1-7.8-7.8l8.6-8.6a3.7 3.7 0 0 1 5.2 5.2l-8.6 8.6a1.8 1.8 0 0 1-2.6-2.6l7.9-7.9"/></svg>
      </button>
      <textarea id="input" rows="1" placeholder="Message" enterkeyhint="send" aria-label="Message"></textarea>
      <button class="send" id="send" type="submit" aria-label="Send" disabled>
        <svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true"><path d="M5 12h14M13 6l6 6-6 6"/></svg>
      </button>
    </form>
    <div class="hint wrap">Enter to send · Shift+Enter for a new line</div>
  </footer>
</div>
<script src="${PAGE_SCRIPTS.chat}"></script>
</body>
</html>
`;
}

/** What a browser without the token sees. */
export const UNAUTHORIZED_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>TheClaw - access link needed</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1.25rem;color:#222}code{background:#eee;padding:.1em .35em;border-radius:4px}</style>
</head><body><h1>Access link needed</h1>
<p>This chat is private. Open the URL printed by <code>xgw status</code> on the machine that runs the gateway.</p>
</body></html>
`;
