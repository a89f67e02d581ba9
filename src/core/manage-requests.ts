import { existsSync, readFileSync, rmSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { ClawError } from './errors.js';
import { leaveRequest, OUTBOX_ENV } from './turn-outbox.js';
import { validate } from './validate.js';

/**
 * Management from a sandboxed turn (issue 23 §1): `agent init|start|stop|status|list|config
 * set|identity set`, `xgw route add|remove` and `xgw pair approve` need THECLAW_HOME, which the
 * sandbox hides. In a turn they leave a request in the conversation's outbox (turn-outbox.ts) and
 * wait; the runtime, outside, takes it while the call runs, decides whether this turn may
 * (agent/manage-door.ts: the owner's direct chat, an agent allowed to), runs the same command
 * itself and leaves its output and exit code as the request's result, which the command prints
 * and exits with. So the model sees in the same call whether it worked.
 *
 * This schema is the edge: everything in a request came from the model. The runtime parses it
 * again, whatever the command checked.
 */

/** Requests for the runtime's management door. */
export const MANAGE_PREFIX = 'manage-';
/** The runtime's answer to the request `<name>.json` is `result-<name>.json`. */
export const RESULT_PREFIX = 'result-';

const agentId = z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be an agent id (lower-case letters, digits, _ and -)'));
const json = z.optional(z.boolean());
/** A channel id (`telegram:main`) or `*`. */
const channel = z.string().check(z.regex(/^(\*|[a-z]+:[a-z0-9][a-z0-9_-]{0,31})$/, 'must be a channel id like telegram:main, or *'));
/** A platform's peer id (digits, a web chat's hex, a name) or `*`; never something a command line would take for a flag. */
const peer = z.string().check(z.regex(/^(\*|[A-Za-z0-9_.@+][A-Za-z0-9_.@+:-]{0,127})$/, 'must be a peer id, or *'));
/** pai's provider and model names. */
const modelName = z.string().check(z.regex(/^[A-Za-z0-9_.][A-Za-z0-9_.:/@-]{0,127}$/, 'must be a provider or model name'));
/** A config key as a dotted path (`pai.model`); which ones a turn may set is the runtime's decision. */
const configKey = z.string().check(z.regex(/^[a-z_]+(\.[a-z_]+){0,3}$/, 'must be a config key like pai.model'));
const noReload = z.optional(z.boolean());

export const ManageRequestSchema = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('agent_init'), agent: agentId, provider: z.optional(modelName), model: z.optional(modelName), json }),
  z.strictObject({ action: z.literal('agent_start'), agent: agentId, json }),
  z.strictObject({ action: z.literal('agent_stop'), agent: agentId, json }),
  z.strictObject({ action: z.literal('agent_status'), agent: z.optional(agentId), json }),
  z.strictObject({ action: z.literal('agent_list'), json }),
  z.strictObject({ action: z.literal('agent_config_set'), agent: agentId, key: configKey, value: z.string().check(z.maxLength(4_000)), json }),
  z.strictObject({ action: z.literal('agent_identity_set'), agent: agentId, text: z.string().check(z.minLength(1), z.maxLength(64_000)), json }),
  z.strictObject({ action: z.literal('route_add'), channel, peer, agent: agentId, no_reload: noReload, json }),
  z.strictObject({ action: z.literal('route_remove'), channel, peer, no_reload: noReload, json }),
  z.strictObject({ action: z.literal('pair_approve'), code: z.string().check(z.regex(/^[A-Z0-9]{8}$/, 'must be the 8-character pairing code')), json }),
]);
export type ManageRequest = z.output<typeof ManageRequestSchema>;

/** What the runtime answers: the command's output and exit code, as if it had run in the sandbox. */
export const ManageResultSchema = z.strictObject({ exit_code: z.int(), stdout: z.string(), stderr: z.string() });
export type ManageResult = z.output<typeof ManageResultSchema>;

/** Parses a request the way the runtime does (a usage error naming each bad field). */
export function parseManageRequest(value: unknown): ManageRequest {
  return validate(ManageRequestSchema, value, { what: 'management request', kind: 'usage', suggestion: "see the command's --help" });
}

/** How long a command waits for the runtime: longer than the runtime gives the command it runs (manage-door.ts). */
const RESULT_TIMEOUT_MS = 90_000;

/**
 * In a sandboxed turn (THECLAW_OUTBOX set): leaves `request`, waits for the runtime's result,
 * prints it and sets the exit code; true. Outside one (a terminal, the runtime itself, the
 * profile `none`), false: the caller does the work.
 */
export async function relayInTurn(request: ManageRequest, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const outbox = env[OUTBOX_ENV];
  if (!outbox) return false;
  const result = await askRuntime(outbox, parseManageRequest(request));
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.exit_code;
  return true;
}

/** Leaves the request and waits (bounded) for its result, which it removes once read. */
export async function askRuntime(outbox: string, request: ManageRequest, timeoutMs = RESULT_TIMEOUT_MS): Promise<ManageResult> {
  // Watching before the request exists: a result written at once is not missed.
  const waiting = waitForFile(outbox, (name) => resultName(name), timeoutMs);
  const name = leaveRequest(outbox, MANAGE_PREFIX, request);
  waiting.named(name);
  const file = await waiting.done.catch((error: unknown) => {
    rmSync(join(outbox, `${name}.json`), { force: true }); // not taken: nothing is done later
    throw error;
  });
  try {
    return validate(ManageResultSchema, JSON.parse(readFileSync(file, 'utf8')), { what: "the runtime's result", suggestion: 'run the command again' });
  } finally {
    rmSync(file, { force: true });
  }
}

/** The result file of the request `<name>.json`. */
export function resultName(requestName: string): string {
  return `${RESULT_PREFIX}${requestName.replace(/\.json$/, '')}.json`;
}

/** How often the wait looks again besides what inotify tells it (a watch can miss an event on some file systems). */
const RECHECK_MS = 250;

/** Waits for `<dir>/<expected(name)>` once the name is known; rejects with a timeout error. */
function waitForFile(dir: string, expected: (name: string) => string, timeoutMs: number): { named(name: string): void; done: Promise<string> } {
  let target: string | null = null;
  let watcher: FSWatcher | undefined;
  let settle: (file: string) => void = () => {};
  const check = () => {
    if (target !== null && existsSync(join(dir, target))) settle(join(dir, target));
  };
  const done = new Promise<string>((resolve, reject) => {
    const recheck = setInterval(check, RECHECK_MS);
    const timer = setTimeout(() => finish(() => reject(timeoutError(timeoutMs))), timeoutMs);
    const finish = (then: () => void) => {
      clearInterval(recheck);
      clearTimeout(timer);
      watcher?.close();
      then();
    };
    settle = (file) => finish(() => resolve(file));
    try {
      watcher = watch(dir, check);
    } catch {
      // The interval alone then.
    }
  });
  return {
    named(name) {
      target = expected(`${name}.json`);
      check();
    },
    done,
  };
}

function timeoutError(timeoutMs: number): ClawError {
  return new ClawError('timeout', `the runtime did not answer this request within ${timeoutMs / 1000} s; it was withdrawn`, {
    suggestion: 'it runs only inside a sandboxed turn of a running agent: try again, or see the agent log',
  });
}
