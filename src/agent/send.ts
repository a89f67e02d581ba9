import { userInfo } from 'node:os';
import { formatAddress, parseAddress, type SourceAddress } from '../core/address.js';
import { ClawError } from '../core/errors.js';
import { formatMessageContent, type ReplyContext } from '../core/message.js';
import { runTerminalChat } from '../xgw/chat-client.js';
import { routeFor } from './router.js';
import { agentDir, loadAgentConfig, type AgentDir } from './agent-dir.js';
import { requireAgentHere } from './placement.js';
import { readOutage } from './turn/outage.js';
import { hasAgentThread, push, withAgentThread } from './threads.js';

/**
 * The source `agent send` uses when none is given: inside an agent's bash_exec (THECLAW_AGENT
 * set) it is that agent, in the conversation that runs the command, so the answer comes back
 * there; otherwise the terminal channel as the OS user, so replies come back through xgw.
 */
export function defaultSource(env: NodeJS.ProcessEnv): string {
  if (env.THECLAW_AGENT) {
    return formatAddress({ kind: 'internal', conversationType: 'dm', conversationId: env.THECLAW_CONVERSATION || 'default', agentId: env.THECLAW_AGENT });
  }
  const user = userInfo().username;
  return formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: user, peerId: user });
}

/**
 * Where the answer to a message `agent send` pushed as `source` will appear, for the person who
 * sent it: the terminal's chat with that agent (which shows an answer that came while it was
 * closed), the channel conversation named, or the asking agent's conversation.
 */
export function whereAnswerGoes(id: string, source: string): string {
  const address = parseAddress(source);
  if (address.kind === 'external' && address.channelType === 'terminal') return `the answer appears in the terminal chat: agent chat ${id}`;
  if (address.kind === 'external') return `the answer goes to ${address.channelType}:${address.instance}, ${address.conversationType} ${address.conversationId}`;
  if (address.kind === 'internal') return `the answer comes back to agent ${address.agentId}'s conversation ${address.conversationId}`;
  return `the answer stays in ${id}'s own thread`;
}

/**
 * The message a question from inside an agent's bash_exec is asked for (THECLAW_ASKING_EVENT, set
 * by agent run), when the question comes from that agent's conversation: the answer is passed on
 * to that message, not to whoever wrote in the conversation last.
 */
function askingEvent(env: NodeJS.ProcessEnv, address: SourceAddress): number | undefined {
  if (address.kind !== 'internal' || address.agentId !== env.THECLAW_AGENT || address.conversationId !== env.THECLAW_CONVERSATION) return undefined;
  const id = Number(env.THECLAW_ASKING_EVENT);
  return Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

export interface SendOptions {
  text: string;
  source?: string;
  idempotencyKey?: string;
  env?: NodeJS.ProcessEnv;
}

/** `agent send`: pushes a message into an agent's inbox; returns its event id. */
export async function sendToAgent(home: string, id: string, options: SendOptions): Promise<number> {
  const dir = await requireAgentHere(home, id, options.env);
  const source = options.source ?? defaultSource(options.env ?? process.env);
  const address = parseAddress(source);
  if (address.kind === 'self') throw new ClawError('usage', 'the source of a message cannot be self', { suggestion: 'leave --source out, or give an external: or internal: address' });
  if (address.kind === 'internal' && address.agentId === id) {
    throw new ClawError('usage', `agent ${id} cannot send to itself`, { suggestion: 'send to another agent' });
  }
  const asking = askingEvent(options.env ?? process.env, address);
  const reply_context: ReplyContext =
    address.kind === 'external'
      ? { kind: 'external', channel_id: `${address.channelType}:${address.instance}`, conversation_type: address.conversationType, conversation_id: address.conversationId, peer_id: address.peerId }
      : { kind: 'internal', conversation_type: address.conversationType, conversation_id: address.conversationId, agent_id: address.agentId, ...(asking ? { asking_event_id: asking } : {}) };
  const content = formatMessageContent({ text: options.text, attachments: [], reply_context });
  return withAgentThread(home, dir.inbox, (inbox) => push(inbox, { source, type: 'message', content, idempotency_key: options.idempotencyKey }), options.env);
}

/** How often `agent chat` looks whether the agent's model became unavailable. */
const OUTAGE_POLL_MS = 250;

/**
 * Tells `agent chat` that the agent's model is unavailable, from the outage a run noted since the
 * chat opened (turn/outage.ts): a failed run says so within seconds, long before the delayed
 * notice (`notices.delayed_after_seconds`, counted from the message) is due.
 */
function watchOutage(dir: AgentDir, tell: (reason: string) => void): () => void {
  const opened = new Date().toISOString();
  const timer = setInterval(() => {
    const outage = readOutage(dir);
    if (outage && outage.last_at >= opened) tell(`${outage.error}; the message waits and is answered once the model is back (theclaw retry tries again now)`);
  }, OUTAGE_POLL_MS);
  return () => clearInterval(timer);
}

/**
 * `agent chat`: a terminal conversation through the real pipeline (xgw's terminal channel →
 * inbox → run → deliver → back), with the agent's tool calls shown as they happen.
 */
export async function chatWithAgent(home: string, id: string, options: { input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream } = {}): Promise<void> {
  const dir = await requireAgentHere(home, id);
  const route = routeFor(agentDir(home, id), loadAgentConfig(dir), defaultSource({}));
  let seen = -1;
  let looking = false;
  const showNewToolCalls = async () => {
    if (!(await hasAgentThread(home, route.path))) return;
    await withAgentThread(home, route.path, async (thread) => {
      if (seen < 0) seen = (await thread.info()).last_id; // only what this chat causes
      for (const event of await thread.peek({ afterId: seen, filter: "type = 'record' AND subtype = 'toolcall'" })) {
        seen = event.id;
        const { command, exit_code } = JSON.parse(event.content) as { command: string; exit_code: number };
        process.stderr.write(`\r\x1b[2K  $ ${command.split('\n')[0]}  (exit ${exit_code})\n`);
      }
    });
  };
  const showToolCalls = setInterval(() => {
    if (looking) return;
    looking = true;
    // A failure here would end the chat: the thread may be half-created by the run at this moment.
    showNewToolCalls()
      .catch(() => {}) // shown on the next tick
      .finally(() => {
        looking = false;
      });
  }, 200);
  try {
    // Loaded here, not with the module: `agent send` (in every sandboxed turn) needs none of it.
    const { agentModel } = await import('./window-check.js');
    const model = await agentModel(home, loadAgentConfig(dir), process.env).catch(() => null);
    const banner = `Chat with ${id} (${model ? `${model.provider}/${model.model}` : "the model of notifier's environment"}) through xgw. /quit or Ctrl-D leaves; /help lists the chat commands.`;
    await runTerminalChat({ home, agent: id, input: options.input, output: options.output, banner, watchDelays: (tell) => watchOutage(agentDir(home, id), tell) });
  } finally {
    clearInterval(showToolCalls);
  }
}
