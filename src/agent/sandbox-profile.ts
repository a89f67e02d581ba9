import { delimiter, dirname, isAbsolute, join, relative } from 'node:path';
import { packageRoot } from '../core/package.js';
import { withStoragePath } from '../core/storage-error.js';
import { BASE_SANDBOX_ENV, findBwrap, type Sandbox, type SandboxBind } from '../pai/index.js';
import { agentDir, listAgentIds, type AgentDir } from './agent-dir.js';
import { forwardSends, OUTBOX_ENV, outboxDir } from './sandbox-sends.js';
import { EMBEDDINGS_SOCKET_ENV } from './memory-embedder.js';
import { BROWSER_SOCKET_ENV } from '../browser/index.js';
import type { AgentConfig } from './types.js';
import { ensureDir } from '../core/home.js';
import { cmdsDir, sharedSkillsDir } from '../core/layout.js';

/**
 * The variables of agent run a sandboxed command gets besides the base ones: what `agent send`
 * and `cmds` need to know about the asking agent (run.ts sets them). Never the daemons' own
 * (THECLAW_THREAD, THECLAW_CONSUMER) nor anything else of their environment.
 */
const AGENT_ENV = ['THECLAW_HOME', 'THECLAW_AGENT', 'THECLAW_AGENT_DIR', 'THECLAW_CONVERSATION', 'THECLAW_ASKING_EVENT', 'THECLAW_LOG_LEVEL', EMBEDDINGS_SOCKET_ENV, BROWSER_SOCKET_ENV] as const;

/**
 * The sandbox of a conversation's commands, or undefined for the profile `none`. THECLAW_HOME
 * is hidden; the agent's own directory comes back read-only, with
 *
 * - `sandbox`: its `workdir/`, `memory/`, `skills/` and `index/` (memory search's) writable;
 * - `workspace-only`: only its `workdir/` writable.
 *
 * Never writable: what the runtime itself writes or appends to (threads, sessions, logs, the
 * inbox, state), since a command could plant a link there for the runtime to follow out of the
 * sandbox, nor config.yaml, which says how the agent is sandboxed.
 *
 * The narrow path the project's CLIs need: `cmds` reads `skills/` and its PATH index (`cmds/`)
 * of the home; `thread peek` reads its own threads (through a private copy); `agent memory
 * search` gets embeddings from the run's socket (memory-embedder.ts); `agent send`,
 * `agent attach` and `notifier timer add --message` leave their requests in the conversation's
 * outbox (core/turn-outbox.ts), which the runtime carries out after the call or the turn, in
 * the name of the conversation (sandbox-sends.ts, reply-files.ts, reminders.ts). Not reachable:
 * the other agents' directories, and notifier's socket (it also answers `stop`) and timers, so
 * no timer command the model wrote ever runs outside the sandbox.
 *
 * Creates the conversation's outbox. Made for each turn: an agent created meanwhile can be
 * sent to from the next one.
 */
export function agentSandbox(home: string, dir: AgentDir, settings: AgentConfig['sandbox'], env: NodeJS.ProcessEnv): Sandbox | undefined {
  if (settings.profile === 'none') return undefined;
  const outbox = outboxDir(dir, env.THECLAW_CONVERSATION ?? '');
  withStoragePath(outbox, () => ensureDir(outbox));
  // The memory search index (memory-index.ts): written only by `agent memory search`, never by the runtime.
  const index = join(dir.root, 'index');
  if (settings.profile === 'sandbox') withStoragePath(index, () => ensureDir(index));
  const writable = settings.profile === 'sandbox' ? [dir.workdir, dir.memory, dir.skills, index] : [dir.workdir];
  const own: SandboxBind[] = [{ path: dir.root, writable: false }, ...writable.map((path) => ({ path, writable: true, optional: path !== dir.workdir })), { path: outbox, writable: true }];
  // Optional: an agent removed meanwhile must not fail the call.
  const others = listAgentIds(home)
    .filter((id) => id !== dir.id)
    .map((id): SandboxBind => ({ path: agentDir(home, id).config, writable: false, optional: true }));
  // A PATH directory in the home (the tests' .bin of CLI links) is what the commands are given to run.
  const path = (env.PATH ?? '').split(delimiter).filter((entry) => isInside(home, entry));
  // The run's embeddings socket for memory search, in a directory of its own (connecting needs no write).
  const embeddings = env[EMBEDDINGS_SOCKET_ENV] ? [{ path: dirname(env[EMBEDDINGS_SOCKET_ENV]), writable: false, optional: true }] : [];
  // The run's door to this agent's browser (browser/proxy.ts), likewise.
  const browser = env[BROWSER_SOCKET_ENV] ? [{ path: dirname(env[BROWSER_SOCKET_ENV]), writable: false, optional: true }] : [];
  return {
    bwrap: findBwrap(env),
    network: settings.network,
    hidden: [home],
    binds: [
      ...own,
      ...others,
      { path: sharedSkillsDir(home), writable: false, optional: true },
      { path: cmdsDir(home), writable: false, optional: true },
      ...path.map((entry) => ({ path: entry, writable: false, optional: true })),
      ...embeddings,
      ...browser,
      // TheClaw itself, read-only, wherever it is installed: under /tmp (a clone there) it would
      // be behind the sandbox's own /tmp, and the commands could not run `agent send` or `cmds`.
      { path: packageRoot(), writable: false },
    ],
    env: [...BASE_SANDBOX_ENV, ...AGENT_ENV],
    setEnv: { [OUTBOX_ENV]: outbox },
    afterCall: () => forwardSends(home, outbox, env),
  };
}

function isInside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return isAbsolute(path) && rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
