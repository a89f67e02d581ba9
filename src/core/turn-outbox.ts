import { randomBytes } from 'node:crypto';
import { readdirSync, renameSync, writeFileSync } from 'node:fs';
import { kindContained, readContained, removeTreeContained, statContained } from './contained-fs.js';
import { join } from 'node:path';
import { ensureDir } from './home.js';
import { AGENT_OUTBOX_DIR, agentRoot } from './layout.js';
import { slug } from './slug.js';

/**
 * A conversation's outbox: where the commands of an agent's turn leave what only the runtime may
 * do — a message to another agent (`agent send`), a file for the answer (`agent attach`), a
 * reminder (`notifier timer add --message`). In the sandbox it is the one directory outside the
 * agent's own that a command may write; the runtime, outside, does what it finds in the name of
 * the conversation that ran the command, whatever a file says. Its turns run one after the other,
 * so what is found is the running turn's. `agents/<id>/outbox/<conversation>/`.
 */
export function agentOutboxPath(home: string, agent: string, conversation: string): string {
  return outboxIn(agentRoot(home, agent), conversation);
}

/** The same, for an agent's directory. */
export function outboxIn(agentRoot: string, conversation: string): string {
  return join(agentRoot, AGENT_OUTBOX_DIR, slug(conversation || 'default'));
}

/** Set in the sandbox: the outbox of the conversation whose turn runs the command. */
export const OUTBOX_ENV = 'THECLAW_OUTBOX';

/**
 * The outbox of the turn this process runs in (THECLAW_OUTBOX in the sandbox, else the one of
 * THECLAW_AGENT and THECLAW_CONVERSATION, which the runtime sets), or null outside any turn.
 */
export function turnOutbox(env: NodeJS.ProcessEnv = process.env): string | null {
  if (env[OUTBOX_ENV]) return env[OUTBOX_ENV];
  if (!env.THECLAW_HOME || !env.THECLAW_AGENT || !env.THECLAW_CONVERSATION) return null;
  return agentOutboxPath(env.THECLAW_HOME, env.THECLAW_AGENT, env.THECLAW_CONVERSATION);
}

/** Leaves a request whole or not at all: `<prefix><time>-<random>.json`, oldest first by name; returns that name without `.json`. */
export function leaveRequest(outbox: string, prefix: string, body: object): string {
  ensureDir(outbox);
  const name = `${prefix}${Date.now()}-${randomBytes(4).toString('hex')}`;
  writeFileSync(join(outbox, `${name}.tmp`), JSON.stringify(body));
  renameSync(join(outbox, `${name}.tmp`), join(outbox, `${name}.json`));
  return name;
}

/** Requests for a timer (notifier timer add --message in a turn), for the runtime to set. */
export const TIMER_PREFIX = 'timer-';

/** A reminder a turn asked for: its id, one schedule (as `notifier timer add` takes it) and the message. */
export interface TimerRequest {
  id: string;
  cron?: string;
  every?: string;
  at?: string;
  message: string;
}

/** Largest request a command may leave. */
const MAX_REQUEST_BYTES = 1_000_000;

/**
 * Takes the requests `select` picks from an outbox, oldest first, each parsed by `parse`: read
 * only after the commands that left them are gone, never through a link, and removed once read
 * (a bad one too, said in `problems`). A request cut off with its command (`.tmp`) stays.
 */
export function takeRequests<T>(outbox: string, select: (name: string) => boolean, parse: (json: unknown) => T): { requests: { name: string; request: T }[]; problems: string[] } {
  let names: string[];
  try {
    names = readdirSync(outbox)
      .filter((name) => name.endsWith('.json') && select(name))
      .sort();
  } catch {
    return { requests: [], problems: [] };
  }
  const requests: { name: string; request: T }[] = [];
  const problems: string[] = [];
  for (const name of names) {
    // The outbox is the root: the sandbox may write in it, never replace it (a mount point there).
    const file = join(outbox, name);
    try {
      const stat = kindContained(outbox, file) === 'file' ? statContained(outbox, file) : null;
      if (!stat?.isFile() || stat.size > MAX_REQUEST_BYTES) throw new Error('not a request left by a command');
      requests.push({ name, request: parse(JSON.parse(readContained(outbox, file)?.toString('utf8') ?? '')) });
    } catch (error) {
      problems.push(`${name} was not taken: ${(error as Error).message}`);
    } finally {
      try {
        removeTreeContained(outbox, file);
      } catch (error) {
        problems.push(`${name} could not be removed: ${(error as Error).message}`);
      }
    }
  }
  return { requests, problems };
}
