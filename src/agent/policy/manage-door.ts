import { spawn } from 'node:child_process';
import { lstatSync, readdirSync, realpathSync, renameSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { join, relative } from 'node:path';
import { removeTreeContained } from '../../core/contained-fs.js';
import { MANAGE_PREFIX, ManageRequestSchema, RESULT_PREFIX, resultName, type ManageRequest, type ManageResult } from '../../core/manage-requests.js';
import { cliPath } from '../../core/package.js';
import { takeRequests } from '../../core/turn-outbox.js';
import { describeIssue, OWN_WORDING } from '../../core/validate.js';
import type { CallService, SandboxBind } from '../../pai/index.js';
import { agentDir, listAgentIds, loadAgentConfig, type AgentDir } from '../agent-dir.js';
import { commandOf, manageRights, refusal, type AskingTurn } from './manage-policy.js';

/**
 * The runtime's side of management from a sandboxed turn (core/manage-requests.ts): while each
 * call runs, the requests its commands leave in the conversation's outbox are taken, judged
 * (manage-policy.ts) and carried out by running the same command outside the sandbox, with
 * arguments made from the parsed request, never from the model's text; the result is left beside
 * the request for the waiting command. One request at a time, in the order they were left.
 */

/** What a command the door runs may take; the waiting command gives up later (manage-requests.ts). */
const COMMAND_TIMEOUT_MS = 60_000;
const RECHECK_MS = 250;

/** The turn's part in the door: whose outbox, and whether it is the owner's direct chat (not a heartbeat). */
export interface DoorTurn {
  home: string;
  dir: AgentDir;
  outbox: string;
  ownerChat: boolean;
  /** The run's environment; the turn's marks are cleared for the commands it runs. */
  env: NodeJS.ProcessEnv;
}

/**
 * The binds a turn gets for management (the other agents' IDENTITY.md and USAGE.md, read-only,
 * where it may manage agents) and the door each call opens.
 */
export function manageDoor(turn: DoorTurn): { binds: SandboxBind[]; serveCall: () => CallService } {
  const rights = turn.ownerChat ? asking(turn).rights : null;
  const binds = rights?.agents ? othersTexts(turn.home, turn.dir.id) : [];
  return { binds, serveCall: () => openDoor(turn) };
}

function asking(turn: Pick<DoorTurn, 'dir' | 'ownerChat'>): AskingTurn {
  return { agent: turn.dir.id, ownerChat: turn.ownerChat, rights: manageRights(turn.dir.id, loadAgentConfig(turn.dir).manage) };
}

function othersTexts(home: string, self: string): SandboxBind[] {
  return listAgentIds(home)
    .filter((id) => id !== self)
    .flatMap((id) => {
      const other = agentDir(home, id);
      return [other.identity, other.usage].filter((file) => isPlainFile(other.root, file)).map((path) => ({ path, writable: false, optional: true }));
    });
}

/** A file reached from `root` without a link (one planted there would bind what it points to). */
function isPlainFile(root: string, file: string): boolean {
  try {
    return lstatSync(file).isFile() && relative(realpathSync(root), realpathSync(file)) === relative(root, file);
  } catch {
    return false;
  }
}

function openDoor(turn: DoorTurn): CallService {
  let serving: Promise<void> = Promise.resolve();
  let again = false;
  let busy = false;
  const kick = () => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    serving = (async () => {
      try {
        do {
          again = false;
          await serveWaiting(turn);
        } while (again);
      } finally {
        busy = false;
      }
    })().catch(() => {}); // an outbox gone meanwhile: the command finds no result and gives up
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(turn.outbox, kick);
  } catch {
    // The interval alone then.
  }
  // Besides the watch, which can miss an event on some file systems.
  const recheck = setInterval(kick, RECHECK_MS);
  kick();
  return {
    async close() {
      watcher?.close();
      clearInterval(recheck);
      await serving;
      // What the call left unanswered or unread dies with it: a request is not carried out after its command gave up.
      takeRequests(
        turn.outbox,
        (name) => name.startsWith(MANAGE_PREFIX),
        () => null,
      );
      for (const name of safeList(turn.outbox).filter((entry) => entry.startsWith(RESULT_PREFIX))) {
        try {
          removeTreeContained(turn.outbox, join(turn.outbox, name));
        } catch {
          // Closing never fails the call; a result left is dropped at the next call's end.
        }
      }
    },
  };
}

async function serveWaiting(turn: DoorTurn): Promise<void> {
  const taken = takeRequests(
    turn.outbox,
    (name) => name.startsWith(MANAGE_PREFIX),
    (json) => json,
  );
  for (const { name, request } of taken.requests) {
    answer(turn.outbox, name, await carryOut(turn, request));
  }
}

/** Judges and carries out one request as the model left it; never throws. */
export async function carryOut(turn: Pick<DoorTurn, 'home' | 'dir' | 'ownerChat' | 'env'>, raw: unknown): Promise<ManageResult> {
  const parsed = ManageRequestSchema.safeParse(raw, OWN_WORDING);
  if (!parsed.success) return failed(2, `the request is not one the runtime takes: ${parsed.error.issues.map(describeIssue).join('; ')}`, "see the command's --help");
  const request = parsed.data;
  let refused: ReturnType<typeof refusal>;
  try {
    refused = refusal(request, asking(turn));
  } catch (error) {
    return failed(1, `${commandOf(request)}: ${(error as Error).message}`, 'the owner can fix the agent config, or run it in a terminal');
  }
  if (refused) return failed(126, refused.reason, refused.suggestion);
  const { tool, args, input } = commandLine(request);
  return runTool(tool, args, input, { ...turn.env, THECLAW_HOME: turn.home, THECLAW_OUTBOX: '', THECLAW_AGENT: '', THECLAW_CONVERSATION: '', THECLAW_ASKING_EVENT: '' });
}

/** The command that carries a request out, made from its parsed fields only. */
export function commandLine(request: ManageRequest): { tool: 'agent' | 'xgw'; args: string[]; input?: string } {
  const json = request.json ? ['--json'] : [];
  const noReload = 'no_reload' in request && request.no_reload ? ['--no-reload'] : [];
  switch (request.action) {
    case 'agent_init':
      return { tool: 'agent', args: ['init', request.agent, '--kind', 'user', ...opt('--provider', request.provider), ...opt('--model', request.model), ...json] };
    case 'agent_start':
      return { tool: 'agent', args: ['start', request.agent, ...json] };
    case 'agent_stop':
      return { tool: 'agent', args: ['stop', request.agent, ...json] };
    case 'agent_status':
      return { tool: 'agent', args: ['status', ...(request.agent ? [request.agent] : []), ...json] };
    case 'agent_list':
      return { tool: 'agent', args: ['list', ...json] };
    case 'agent_config_set':
      // After `--`, a value that starts with - is a value, not a flag.
      return { tool: 'agent', args: ['config', 'set', ...json, '--', request.agent, request.key, request.value] };
    case 'agent_identity_set':
      return { tool: 'agent', args: ['identity', 'set', request.agent, ...json], input: request.text };
    case 'route_add':
      return { tool: 'xgw', args: ['route', 'add', '--channel', request.channel, '--peer', request.peer, '--agent', request.agent, ...noReload, ...json] };
    case 'route_remove':
      return { tool: 'xgw', args: ['route', 'remove', '--channel', request.channel, '--peer', request.peer, ...noReload, ...json] };
    case 'pair_approve':
      return { tool: 'xgw', args: ['pair', 'approve', request.code, ...json] };
    default:
      return request satisfies never;
  }
}

function opt(flag: string, value: string | undefined): string[] {
  return value === undefined ? [] : [flag, value];
}

function runTool(tool: string, args: string[], input: string | undefined, env: NodeJS.ProcessEnv): Promise<ManageResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliPath(tool), ...args], { env, stdio: ['pipe', 'pipe', 'pipe'], timeout: COMMAND_TIMEOUT_MS, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (error) => (stderr += `Error: ${tool} could not run: ${error.message}\n`));
    child.on('close', (code, signal) =>
      resolve({
        exit_code: code ?? (signal === 'SIGKILL' ? 124 : 1),
        stdout,
        stderr: signal === 'SIGKILL' ? `${stderr}Error: ${tool} ${args[0]} took over ${COMMAND_TIMEOUT_MS / 1000} s and was stopped\n` : stderr,
      }),
    );
    child.stdin.on('error', () => {}); // a command that exits before reading its input
    child.stdin.end(input);
  });
}

function failed(exitCode: number, reason: string, suggestion: string): ManageResult {
  return { exit_code: exitCode, stdout: '', stderr: `Error: ${reason} - ${suggestion}\n` };
}

/**
 * Leaves a result whole, never through what the sandbox put in its way: `wx` fails on anything
 * at the temporary name (a link too), and a rename replaces a link rather than following it.
 */
function answer(outbox: string, requestName: string, result: ManageResult): void {
  const final = join(outbox, resultName(requestName));
  try {
    writeFileSync(`${final}.tmp`, JSON.stringify(result), { flag: 'wx', mode: 0o600 });
    renameSync(`${final}.tmp`, final);
  } catch {
    // The command finds no result and gives up; the outbox is the sandbox's to spoil.
  }
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
