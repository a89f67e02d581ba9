import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ClawError } from '../core/errors.js';
import { socketPath } from '../core/home.js';
import { subscribe } from '../core/ipc.js';
import { askXgw, xgwUnavailable } from './client.js';
import { noticeFor } from './notices.js';
import type { InboundOutcome, MailboxEntry, XgwRequest } from './protocol.js';
import { requireAgentId } from './route.js';

export interface TerminalChatOptions {
  home: string;
  /** The agent to talk to (over the routes). */
  agent?: string;
  /** Default: `terminal:local`. */
  channel?: string;
  input?: NodeJS.ReadableStream;
  output?: NodeJS.WritableStream;
  /** Where the spinner goes; it is shown only when this is a TTY. Default: stderr. */
  status?: NodeJS.WriteStream;
  /** After the input ends, wait this long for outstanding replies. Default: 120. */
  waitSeconds?: number;
  /** Said on the status stream once xgw took the chat (who this is a chat with, how to leave). */
  banner?: string;
  /**
   * Watches for why answers are late, where the caller can tell (the agent's model is
   * unavailable). Contract: called once the chat is open; calls `tell` with a one-line reason
   * whenever it finds one (again and again is fine: each reason is shown once, and only while an
   * answer is awaited); returns what ends the watch. Once the input has ended, a reason ends the
   * chat (exit 1, the answer kept) instead of a wait of `waitSeconds`.
   */
  watchDelays?: (tell: (reason: string) => void) => () => void;
  signal?: AbortSignal;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A line-based conversation through the real pipeline: each line goes to the gateway (and so to
 * the agent's inbox), replies come back over a stream from the daemon. While a reply is awaited
 * a spinner turns on the terminal. Resolves when the input ends and no reply or notice is
 * outstanding. The agent's error notice (a message that gets no answer) is shown and counts as
 * its reply, a delayed notice is shown and the answer still awaited; the chat then fails
 * (exit 1) when a message got an error notice, or no reply within `waitSeconds` (or before xgw
 * went away), or at once when the caller's watch says why the reply is late (`watchDelays`).
 */
export async function runTerminalChat(options: TerminalChatOptions): Promise<void> {
  const channel = options.channel ?? 'terminal:local';
  const waitSeconds = options.waitSeconds ?? 120;
  if (options.agent !== undefined) requireAgentId(options.agent);
  const output = options.output ?? process.stdout;
  const status = options.status ?? process.stderr;
  const spinner = createSpinner(status);
  // Said once xgw took the chat (a chat that cannot start says only why), before anything it shows.
  let bannerShown = false;
  const showBanner = () => {
    if (!bannerShown && options.banner) status.write(`${options.banner}\n`);
    bannerShown = true;
  };
  // The messages sent whose answer is awaited, by the id this client gave them. An id is added
  // before the message is sent: its answer may come over the stream before xgw's reply to the send.
  const awaiting = new Set<string>();
  let refused = 0;
  /** Why the awaited answers are late, once the watch said. */
  let late: string | undefined;
  // Notices (no route, missing agent, pairing) come over the stream, another connection than the
  // answer that announces them, so either may come first: each text counts +1 when announced and
  // -1 when shown, and the chat waits while a count is above 0.
  const notices = new Map<string, number>();
  const countNotice = (text: string, by: number) => {
    const count = (notices.get(text) ?? 0) + by;
    if (count === 0) notices.delete(text);
    else notices.set(text, count);
  };
  const noticesDue = () => [...notices.values()].some((count) => count > 0);
  /** Takes the message an answer names off `awaiting` (one that names none, the oldest); whether it was awaited. */
  const answered = (replyTo: string | null): boolean => awaiting.delete(replyTo ?? awaiting.values().next().value ?? '');
  let settle: (() => void) | undefined;
  let lines: ReturnType<typeof createInterface> | undefined;
  // At a terminal: line editing and history (readline's), and a prompt; piped input is read as it is.
  const input = options.input ?? process.stdin;
  const terminal = (input as { isTTY?: boolean }).isTTY === true && (output as { isTTY?: boolean }).isTTY === true;
  const closed = new AbortController();
  options.signal?.addEventListener('abort', () => closed.abort(), { once: true });

  try {
    await subscribe(
      socketPath(options.home, 'xgw'),
      { op: 'chat_attach', channel, ...(options.agent !== undefined ? { agent: options.agent } : {}) } satisfies XgwRequest,
      {
        onMessage(message) {
          const entry = message as MailboxEntry;
          showBanner();
          spinner.stop();
          // An answer that came while no chat was open says what it answers.
          if (entry.question !== undefined) output.write(`(earlier) you: ${entry.question}\n`);
          output.write(`${entry.role === 'system' ? '(xgw) ' : ''}${entry.text}\n`);
          for (const file of entry.files ?? []) if (file.ref) output.write(`(file) ${file.name}: ${join(options.home, file.ref)}\n`);
          if (terminal) lines?.prompt(true);
          // A delayed notice announces the answer, an approval request is not one; an error notice takes its place.
          if (entry.role === 'agent' && entry.notice !== 'delayed' && entry.notice !== 'approval' && answered(entry.reply_to)) {
            if (entry.notice === 'error') refused++;
          }
          if (entry.role === 'system') countNotice(entry.text, -1);
          if (awaiting.size > 0) spinner.start();
          else if (!noticesDue()) settle?.();
        },
        onClose() {
          spinner.stop();
          settle?.();
        },
      },
      closed.signal,
    );
  } catch (error) {
    throw xgwUnavailable(options.home, error);
  }
  showBanner();
  const unwatch = options.watchDelays?.((reason) => {
    if (awaiting.size === 0 || reason === late) return;
    late = reason;
    spinner.stop();
    status.write(`(${reason})\n`);
    spinner.start();
    settle?.(); // only set once the input has ended
  });

  lines = createInterface({ input, ...(terminal ? { output, prompt: 'you> ', terminal: true } : { terminal: false }) });
  if (terminal) lines.prompt();
  try {
    for await (const line of lines) {
      const text = line.trim();
      if (text === '') continue;
      if (text === '/quit' || text === '/exit') break;
      const messageId = randomUUID();
      awaiting.add(messageId);
      const outcome = await askXgw<InboundOutcome>(options.home, { op: 'chat_message', channel, agent: options.agent, message_id: messageId, text });
      if (outcome.kind !== 'accepted') awaiting.delete(messageId);
      else if (awaiting.has(messageId)) spinner.start();
      const notice = noticeFor(outcome);
      if (notice !== null) countNotice(notice, +1);
    }
    if ((awaiting.size > 0 && late === undefined) || noticesDue()) {
      await new Promise<void>((resolve) => {
        settle = resolve;
        setTimeout(resolve, waitSeconds * 1000).unref();
      });
    }
    if (refused > 0) {
      throw new ClawError('upstream', `${refused} message(s) got no answer (the notice above says why)`, {
        suggestion: 'the owner sees the error in theclaw status and the agent log',
      });
    }
    if (awaiting.size > 0 && late !== undefined) {
      throw new ClawError('upstream', `no answer yet to ${awaiting.size} message(s): ${late}`, { suggestion: 'the answer is kept: it is shown the next time this chat is opened' });
    }
    if (awaiting.size > 0) {
      throw new ClawError('timeout', `no answer yet to ${awaiting.size} message(s) (waited up to ${waitSeconds} s)`, {
        suggestion: 'the answer is kept: it is shown the next time this chat is opened',
      });
    }
  } finally {
    unwatch?.();
    spinner.stop();
    lines.close();
    closed.abort();
  }
}

function createSpinner(stream: NodeJS.WriteStream) {
  let timer: NodeJS.Timeout | undefined;
  let frame = 0;
  return {
    start() {
      if (timer || !stream.isTTY) return;
      timer = setInterval(() => stream.write(`\r${FRAMES[frame++ % FRAMES.length]} waiting for the agent…`), 80);
    },
    stop() {
      if (!timer) return;
      clearInterval(timer);
      timer = undefined;
      stream.write('\r\x1b[2K');
    },
  };
}
