import type { ClientMessage, Delivery, MailboxEntry, MailboxFile, ServerMessage } from '../channels/webchat-protocol.js';
import { FILE_NAME_HEADER, FILE_PATH, INLINE_IMAGE_TYPES, MAX_TEXT_BYTES, PEER_HEADER, UPLOAD_PATH } from '../channels/webchat-protocol.js';
import { byId, pageToken } from './token.js';

/**
 * The web chat page's script (the HTML is webchat-page.ts). Message text is only ever set
 * through text nodes, never `innerHTML`. The protocol is webchat-protocol.ts.
 */

/** How long the dots wait for an answer before the page stops promising one. */
const WAIT_LIMIT_MS = 3 * 60 * 1000;

/** What a message's time is followed by, where no answer is on its way. */
const DELIVERY_NOTES: Record<Delivery, string> = { answering: '', waiting: ' · waits for the agent', not_answered: ' · not answered' };

interface Pending {
  id: string;
  text: string;
  /** The file it carries, uploaded before the message is sent (`uploaded`: its id). */
  file?: File;
  uploading?: Promise<void>;
  uploaded?: string;
  row: HTMLElement | null;
}

type Role = MailboxEntry['role'];
type ConnectionState = 'connecting' | 'online' | 'offline' | 'denied';

const log = byId('log');
const thread = byId('thread');
const empty = byId('empty');
const input = byId<HTMLTextAreaElement>('input');
const sendButton = byId<HTMLButtonElement>('send');
const form = byId<HTMLFormElement>('composer');
const status = byId<HTMLButtonElement>('status');
const fileInput = byId<HTMLInputElement>('file');
const attachButton = byId<HTMLButtonElement>('attach');
const attached = byId('attached');
const attachedName = byId('attached-name');
const statusText = byId('status-text');
const encoder = new TextEncoder();
/** Messages sent but not acknowledged. */
const pending: Pending[] = [];
/** Answers shown as they are written, by the id of the message they answer. */
const drafts = new Map<string, HTMLElement>();
let ws: WebSocket | null = null;
let attempt = 0;
let retryTimer: ReturnType<typeof setTimeout> | undefined;
let waitTimer: ReturnType<typeof setTimeout> | undefined;
const typing = makeTyping();
/** The command the agent runs, under the dots (where the channel shows tool progress). */
const progress = typing.querySelector<HTMLElement>('.progress')!;
const token = pageToken();
// This browser's peer credential, issued by the server on its first connection (a `peer` message)
// and kept by the page (localStorage is this origin's alone), never a cookie. An id the page made
// up itself (older versions did) is not offered: the server would not take it.
let peer = localStorage.getItem('xgw_peer_credential') ?? '';

function newId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function timeOf(iso: string | null): string {
  return (iso ? new Date(iso) : new Date()).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** Text nodes for the text, links for http(s) URLs: never innerHTML. */
function fillText(element: HTMLElement, text: string): void {
  const re = /https?:\/\/[^\s<>"']+/g;
  let last = 0;
  for (let match = re.exec(text); match !== null; match = re.exec(text)) {
    const url = match[0].replace(/[.,;:!?)\]}]+$/, '');
    if (match.index > last) element.append(text.slice(last, match.index));
    const a = document.createElement('a');
    a.href = url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.textContent = url;
    element.append(a);
    last = match.index + url.length;
    re.lastIndex = last;
  }
  if (last < text.length) element.append(text.slice(last));
}

const nearBottom = (): boolean => log.scrollHeight - log.scrollTop - log.clientHeight < 80;
const scrollDown = (): void => {
  log.scrollTop = log.scrollHeight;
};

function sizeOf(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

function addRow(role: Role, text: string, createdAt: string | null, extraClass = '', files: readonly MailboxFile[] = []): HTMLElement {
  const stick = nearBottom() || role === 'user';
  const row = document.createElement('div');
  row.className = `row ${role}${extraClass ? ` ${extraClass}` : ''}`;
  const bubble = document.createElement('div');
  bubble.className = 'bubble';
  for (const file of files) {
    // A file the agent sent downloads on a click; one the person sent is only named.
    const chip = document.createElement(file.ref ? 'button' : 'span');
    chip.className = 'file';
    chip.textContent = `${file.name} · ${sizeOf(file.bytes)}`;
    if (file.ref) {
      const ref = file.ref;
      chip.setAttribute('type', 'button');
      chip.title = 'Download';
      chip.addEventListener('click', () => download(ref, file.name));
      if (file.image && INLINE_IMAGE_TYPES.includes(file.image)) bubble.append(shownImage(ref, file.name, file.image));
    }
    bubble.append(chip);
  }
  fillText(bubble, text);
  row.append(bubble);
  if (role !== 'system') {
    const meta = document.createElement('div');
    meta.className = 'meta';
    meta.textContent = extraClass === 'pending' ? 'Sending…' : extraClass === 'draft' ? 'writing…' : timeOf(createdAt);
    row.append(meta);
  }
  thread.insertBefore(row, typing.parentNode ? typing : null);
  empty.hidden = true;
  if (stick) scrollDown();
  return row;
}

function makeTyping(): HTMLElement {
  const row = document.createElement('div');
  row.className = 'row agent typing';
  row.setAttribute('aria-label', 'The agent is working on a reply');
  const bubble = document.createElement('div');
  bubble.className = 'bubble';
  for (let i = 0; i < 3; i++) bubble.append(document.createElement('i'));
  const line = document.createElement('div');
  line.className = 'progress';
  row.append(bubble, line);
  return row;
}

function setWaiting(on: boolean): void {
  clearTimeout(waitTimer);
  if (on) {
    const stick = nearBottom();
    thread.append(typing);
    if (stick) scrollDown();
    waitTimer = setTimeout(() => setWaiting(false), WAIT_LIMIT_MS);
  } else {
    typing.remove();
    progress.textContent = ''; // it was the turn's: the next one starts without it
  }
}

/** The command the agent runs now: a line under the dots (not after its answer, which ends them). */
function showProgress(command: string): void {
  if (drafts.size > 0) return; // a draft shown says it works already: the command came before it
  progress.textContent = `running: ${command}`;
  setWaiting(true);
}

function setStatus(state: ConnectionState, text: string): void {
  status.dataset.state = state;
  statusText.textContent = text;
  if (state === 'offline' || state === 'denied') status.dataset.retry = '';
  else delete status.dataset.retry;
  status.title = state === 'offline' ? 'Reconnect now' : '';
}

function renderHistory(messages: MailboxEntry[]): void {
  for (const row of thread.querySelectorAll('.row')) if (row !== typing) row.remove();
  drafts.clear();
  setWaiting(false);
  empty.hidden = messages.length > 0 || pending.length > 0;
  for (const m of messages) addRow(m.role, m.text, m.created_at, m.notice ? 'notice' : '', m.files);
  for (const p of pending) p.row = addRow('user', p.text, null, 'pending', filesOf(p));
  const lastMessage = messages.at(-1);
  // A question asked moments ago (maybe in another tab), or one the agent said it will answer
  // later, is still waiting for its answer.
  const awaited = lastMessage && (lastMessage.role === 'user' || lastMessage.notice === 'delayed');
  if (awaited && Date.now() - Date.parse(lastMessage.created_at) < WAIT_LIMIT_MS) setWaiting(true);
  scrollDown();
}

/** The answer as it is written: in place of the dots, until the answer itself replaces it. */
function showDraft(replyTo: string, text: string): void {
  let row = drafts.get(replyTo);
  if (text === '') {
    // Withdrawn: the agent went on working (a command) or decided not to answer.
    row?.remove();
    drafts.delete(replyTo);
    setWaiting(true);
    return;
  }
  setWaiting(false);
  const stick = nearBottom();
  if (!row) {
    row = addRow('agent', '', null, 'draft');
    drafts.set(replyTo, row);
  }
  const bubble = row.querySelector<HTMLElement>('.bubble');
  if (bubble) {
    bubble.replaceChildren();
    fillText(bubble, text);
  }
  if (stick) scrollDown();
}

const filesOf = (p: Pending): MailboxFile[] => (p.file ? [{ name: p.file.name, bytes: p.file.size }] : []);

/** Sends the message once its file is uploaded (the upload first, if it is still to do). */
function transmit(p: Pending): void {
  if (p.file && p.uploaded === undefined) {
    // A reconnect meanwhile sends it again: the same upload, and the server takes the id once.
    p.uploading ??= upload(p);
    p.uploading.then(
      () => transmit(p),
      (error: Error) => failed(p, error.message),
    );
    return;
  }
  const message: ClientMessage = { type: 'message', id: p.id, text: p.text, ...(p.uploaded ? { files: [{ id: p.uploaded }] } : {}) };
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
}

/** A file the agent sent, fetched with the token (a header, so not a plain link). */
function fetchFile(ref: string): Promise<Response> {
  return fetch(`${FILE_PATH}?ref=${encodeURIComponent(ref)}`, { headers: { Authorization: `Bearer ${token}`, [PEER_HEADER]: peer } });
}

/**
 * An image the agent sent, shown in its message: fetched as any file, then given its image type
 * (the server sends every file as application/octet-stream, nosniff).
 */
function shownImage(ref: string, name: string, type: string): HTMLImageElement {
  const image = document.createElement('img');
  image.className = 'image';
  image.alt = name;
  // It takes its height when it loads: a thread read at the bottom (before that height) stays there.
  image.addEventListener('load', () => {
    if (log.scrollHeight - log.scrollTop - log.clientHeight < image.height + 80) scrollDown();
  });
  void fetchFile(ref).then(
    async (response) => {
      if (!response.ok) return void image.remove();
      image.src = URL.createObjectURL(new Blob([await response.arrayBuffer()], { type }));
    },
    () => image.remove(),
  );
  return image;
}

/** Fetches a file the agent sent and saves it. */
async function download(ref: string, name: string): Promise<void> {
  const response = await fetchFile(ref);
  if (!response.ok) {
    notice(`${name} could not be downloaded: ${(await response.text()).trim() || `HTTP ${response.status}`}`);
    return;
  }
  const link = document.createElement('a');
  link.href = URL.createObjectURL(await response.blob());
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}

async function upload(p: Pending): Promise<void> {
  const file = p.file!;
  const response = await fetch(UPLOAD_PATH, {
    method: 'POST',
    body: file,
    headers: { Authorization: `Bearer ${token}`, [PEER_HEADER]: peer, [FILE_NAME_HEADER]: encodeURIComponent(file.name), 'Content-Type': file.type || 'application/octet-stream' },
  });
  const body = (await response.json().catch(() => ({}))) as { id?: string; error?: string };
  if (response.status === 413) throw new Error(`That file is too large to send (${sizeOf(file.size)}).`);
  if (!response.ok || !body.id) throw new Error(`The file could not be sent${body.error ? `: ${body.error}` : ''}. Try again.`);
  p.uploaded = body.id;
}

/** The message is not sent, and will not be: marked so, and why. */
function failed(p: Pending, why: string): void {
  takePending(p.id);
  p.row?.classList.replace('pending', 'failed');
  const meta = p.row?.querySelector('.meta');
  if (meta) meta.textContent = 'Not sent';
  setWaiting(false);
  notice(why);
}

function attach(file: File | undefined): void {
  attached.hidden = !file;
  attachedName.textContent = file ? `${file.name} · ${sizeOf(file.size)}` : '';
  if (!file) fileInput.value = '';
  resize();
}

function notice(text: string): void {
  addRow('system', text, null);
}

function send(): void {
  const text = input.value;
  const file = fileInput.files?.[0];
  if (!text.trim() && !file) return;
  if (encoder.encode(text).length > MAX_TEXT_BYTES) {
    notice(`That message is too long (the limit is ${MAX_TEXT_BYTES / 1024} KB). Split it or shorten it.`);
    return;
  }
  const p: Pending = { id: newId(), text, row: null, ...(file ? { file } : {}) };
  p.row = addRow('user', text, null, 'pending', filesOf(p));
  pending.push(p);
  input.value = '';
  attach(undefined);
  resize();
  transmit(p);
}

function takePending(id: string): Pending | undefined {
  const index = pending.findIndex((p) => p.id === id);
  return index < 0 ? undefined : pending.splice(index, 1)[0];
}

function onServerMessage(event: MessageEvent<string>): void {
  let data: ServerMessage;
  try {
    data = JSON.parse(event.data) as ServerMessage;
  } catch {
    return;
  }
  switch (data.type) {
    case 'peer':
      peer = data.credential;
      localStorage.setItem('xgw_peer_credential', peer);
      return;
    case 'history':
      renderHistory(data.messages ?? []);
      return;
    case 'message': {
      const m = data.message;
      if (m.role === 'agent' && m.reply_to !== null) {
        drafts.get(m.reply_to)?.remove();
        drafts.delete(m.reply_to);
      }
      // A notice that the answer is delayed is no answer: the dots go on (an error notice ends them).
      if (m.role !== 'user') setWaiting(m.notice === 'delayed');
      addRow(m.role, m.text, m.created_at, m.notice ? 'notice' : '', m.files);
      return;
    }
    case 'ack': {
      const acked = takePending(data.id);
      if (acked?.row) {
        acked.row.classList.remove('pending');
        if (data.delivery !== 'answering') acked.row.classList.add(data.delivery === 'waiting' ? 'waiting' : 'unanswered');
        const meta = acked.row.querySelector('.meta');
        if (meta) meta.textContent = `${timeOf(null)}${DELIVERY_NOTES[data.delivery]}`;
        // The agent works on a reply only when it has the message; otherwise the notice that follows says why not.
        setWaiting(data.delivery === 'answering');
      }
      return;
    }
    case 'typing':
      // Also after a reload, or in a tab opened while the agent works; a draft shown says it already.
      if (drafts.size === 0) setWaiting(true);
      return;
    case 'draft':
      showDraft(data.reply_to, data.text);
      return;
    case 'tool_progress':
      showProgress(data.command);
      return;
    case 'error': {
      const refused = data.id ? pending.find((p) => p.id === data.id) : undefined;
      if (refused) failed(refused, data.text || 'Something went wrong.');
      else {
        setWaiting(false);
        notice(data.text || 'Something went wrong.');
      }
    }
  }
}

function connect(): void {
  clearTimeout(retryTimer);
  retryTimer = undefined;
  if (ws) return;
  if (!token) {
    setStatus('denied', 'Open the link from xgw status');
    return;
  }
  setStatus('connecting', attempt === 0 ? 'Connecting…' : 'Reconnecting…');
  const socket = new WebSocket(`${location.protocol === 'https:' ? 'wss://' : 'ws://'}${location.host}/ws`, ['xgw', `xgw-token.${token}`, ...(peer ? [`xgw-peer.${peer}`] : [])]);
  ws = socket;
  socket.onopen = () => {
    attempt = 0;
    setStatus('online', 'Connected');
    pending.forEach(transmit); // written while offline, or not acknowledged before a drop
  };
  socket.onmessage = onServerMessage;
  socket.onclose = () => {
    if (ws !== socket) return;
    ws = null;
    scheduleReconnect();
    checkAccess();
  };
}

function scheduleReconnect(): void {
  const delay = Math.min(15_000, 500 * 2 ** attempt) * (0.75 + Math.random() * 0.5);
  attempt++;
  setStatus('offline', 'Offline · retrying');
  retryTimer = setTimeout(connect, delay);
}

/** A refused WebSocket says nothing about why; a plain request to /ws answers 401 to a wrong token. */
function checkAccess(): void {
  fetch('/ws', { cache: 'no-store', headers: { Authorization: `Bearer ${token}` } }).then(
    (response) => {
      if (response.status === 401) setStatus('denied', 'Open the link from xgw status');
    },
    () => {},
  );
}

function resize(): void {
  input.style.height = 'auto';
  input.style.height = `${Math.max(44, input.scrollHeight + 2)}px`;
  sendButton.disabled = !input.value.trim() && !fileInput.files?.length;
}

input.addEventListener('input', resize);
attachButton.addEventListener('click', () => fileInput.click());
fileInput.addEventListener('change', () => attach(fileInput.files?.[0]));
byId('detach').addEventListener('click', () => attach(undefined));
input.addEventListener('keydown', (event) => {
  // 229: a key that an input method is still composing (Safari reports no isComposing there).
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
    event.preventDefault();
    send();
  }
});
form.addEventListener('submit', (event) => {
  event.preventDefault();
  send();
  input.focus();
});
status.addEventListener('click', () => {
  if (!ws) {
    attempt = 0;
    connect();
  }
});
window.addEventListener('online', () => {
  if (!ws) connect();
});
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && !ws) connect();
});

connect();
if (window.matchMedia('(pointer: fine)').matches) input.focus();
