import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { killGroup, watchGroup } from '../core/process.js';
import { withoutSecrets, type Redactor } from '../core/secrets.js';
import { CALL_MARK, killMarked, markedEnv, newMark, TURN_MARK, type ProcessMark } from '../core/turn-processes.js';
import { SANDBOX_MISSING, sandboxArgs, sandboxEnv, type Sandbox } from './sandbox.js';
import { diskLimitReached, limitsReached, processGroup, watchDisk } from './sandbox-limits.js';
import type { BashExecArgs, BashExecResult } from './types.js';

/**
 * The one tool the model has: `bash -c <command>` in its own process group, output truncated
 * head+tail, and an environment without provider keys or tokens. Every process the command
 * starts carries the call's mark (and the turn's) in its environment, `setsid` included
 * (core/turn-processes.ts): on timeout or abort the group and everything marked with the call
 * are killed; what a command leaves running in the background lives until its turn ends.
 * Given a sandbox (sandbox.ts), bash runs in bubblewrap, and nothing outlives the call.
 */
export const BASH_EXEC_TOOL = {
  name: 'bash_exec',
  description: 'Run a bash command on this machine and get {stdout, stderr, exit_code}. Find out what commands and skills exist with `cmds find <what you want to do>`.',
  // Plain JSON Schema: providers only serialise it.
  parameters: {
    type: 'object',
    properties: {
      command: { type: 'string', description: 'the bash command line' },
      comment: { type: 'string', description: 'why, in a few words (optional)' },
      cwd: { type: 'string', description: 'working directory (optional)' },
      timeout_seconds: { type: 'integer', minimum: 1, maximum: 3600, description: 'default 120' },
    },
    required: ['command'],
  },
} as const;

export interface BashExecOptions {
  /** Working directory when the call names none. Default: `process.cwd()`. */
  cwd?: string;
  /** Environment before secrets are removed. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** More variable names to remove (e.g. a provider's custom `api_key_env`). */
  secretNames?: readonly string[];
  /** Default: 120; the call's `timeout_seconds` wins. */
  timeoutSeconds?: number;
  /** Bytes kept per stream, head and tail together. Default: 32,768. */
  maxOutputBytes?: number;
  /**
   * Applied around the cut of a truncated output: redacting the whole afterwards would miss a
   * secret the cut split (see Redactor.aroundCut). The caller still redacts the whole.
   */
  redact?: Redactor;
  signal?: AbortSignal;
  /**
   * The turn this call belongs to: what the command leaves running (a server started with `&`)
   * outlives the call, for the turn's next calls, and whoever made the mark kills it when the
   * turn ends. Without one, the call is a turn of its own: nothing it started outlives it.
   */
  turnMark?: ProcessMark;
  /**
   * Run the command in this sandbox (sandbox.ts): then what it leaves running ends with the call,
   * not the turn, since the call's PID namespace ends with it. Without one, it runs as this user.
   */
  sandbox?: Sandbox;
}

const KILL_GRACE_MS = 1_000;
/**
 * After bash exited, how long its pipes may stay open: a background child (`server &`) holds
 * them, and would otherwise keep the call waiting until its timeout.
 */
const PIPE_GRACE_MS = 250;

export function bashExec(args: BashExecArgs, options: BashExecOptions = {}): Promise<BashExecResult> {
  const cwd = args.cwd ?? options.cwd ?? process.cwd();
  if (!existsSync(cwd)) return Promise.resolve({ stdout: '', stderr: `bash_exec: working directory ${cwd} does not exist`, exit_code: 1 });
  const timeoutMs = (args.timeout_seconds ?? options.timeoutSeconds ?? 120) * 1000;
  const limit = options.maxOutputBytes ?? 32_768;
  const { sandbox } = options;
  if (sandbox?.bwrap === null) return Promise.resolve({ stdout: '', stderr: `bash_exec: ${SANDBOX_MISSING}`, exit_code: 126 });
  const callMark = newMark(CALL_MARK);
  const marks = options.turnMark ? [options.turnMark, callMark] : [callMark];
  // Without secrets; TheClaw's own commands are found on the PATH it keeps.
  const env = markedEnv(withoutSecrets(options.env ?? process.env, options.secretNames), ...marks);
  // In a sandbox only its listed variables (and the marks) are passed, to bwrap as well: it is the
  // sandbox's pid 1, whose environment a command can read.
  const limits = sandbox?.limits;
  const group = limits ? processGroup(limits, callMark.value) : null;
  const [file, argv] = sandbox ? [sandbox.bwrap!, sandboxArgs(sandbox, args.command, cwd, group !== null)] : ['bash', ['-c', args.command]];
  const childEnv = sandbox ? { ...sandboxEnv(env, [...sandbox.env, TURN_MARK, CALL_MARK]), ...sandbox.setEnv } : env;
  const service = sandbox?.serveCall?.();
  const child = spawn(...(group?.wrap(file, argv) ?? [file, argv]), { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv });
  const stdout = new HeadTail(limit);
  const stderr = new HeadTail(limit);
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
  const watch = child.pid === undefined ? null : watchGroup(child.pid, { timeoutMs, graceMs: KILL_GRACE_MS, signal: options.signal });
  // Over the disk limit the call is killed at once: it would go on filling the disk until its timeout.
  let overDisk = false;
  const disk = limits
    ? watchDisk(
        sandbox.binds.filter((bind) => bind.writable).map((bind) => bind.path),
        limits,
        () => {
          overDisk = true;
          if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
        },
      )
    : null;

  let pipeTimer: NodeJS.Timeout | undefined;
  child.on('exit', () => {
    pipeTimer = setTimeout(() => {
      child.stdout!.destroy();
      child.stderr!.destroy();
    }, PIPE_GRACE_MS);
  });

  return new Promise((resolve) => {
    child.on('error', (error) => stderr.push(Buffer.from(`bash_exec: ${error.message}\n`)));
    // 'close', not 'exit': the pipes are drained (or given up) by then.
    child.on('close', async (code, signal) => {
      clearTimeout(pipeTimer);
      watch?.release();
      if (watch?.killedFor || !options.turnMark) {
        if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
        await killMarked(callMark);
      }
      const exitCode = code ?? 128 + signalNumber(signal);
      const reached = limits ? limitsReached(limits, { exitCode, stderr: stderr.toString(), processesReached: group?.reached() ?? false }) : [];
      group?.remove();
      const overDiskLine = limits && disk ? diskLimitReached(limits, await disk.end()) : null;
      if (overDiskLine) reached.push(overDisk ? `${overDiskLine}; the command and its children were killed` : overDiskLine);
      await service?.close();
      for (const problem of [...reached, ...((await sandbox?.afterCall?.()) ?? [])]) stderr.push(Buffer.from(`\n[bash_exec: ${problem}]`));
      const killedFor = watch?.killedFor === 'timeout' ? `timed out after ${timeoutMs / 1000} s` : watch?.killedFor;
      if (killedFor) stderr.push(Buffer.from(`\n[bash_exec: ${killedFor}; the command and its children were killed]`));
      resolve({
        stdout: stdout.toString(options.redact),
        stderr: stderr.toString(options.redact),
        // Over the disk limit a call fails, whatever the command said: so do the next until it is under.
        exit_code: killedFor ? 124 : overDiskLine && exitCode === 0 ? 1 : exitCode,
      });
    });
  });
}

function signalNumber(signal: NodeJS.Signals | null): number {
  const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };
  return (signal && numbers[signal]) ?? 0;
}

/** Keeps the first and last `limit / 2` bytes of a stream, counting what falls between. */
export class HeadTail {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer = Buffer.alloc(0);
  private total = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const half = Math.floor(this.limit / 2);
    if (this.headBytes < half) {
      const take = chunk.subarray(0, half - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
    }
    if (chunk.length > 0) {
      const joined = Buffer.concat([this.tail, chunk]);
      this.tail = joined.subarray(Math.max(0, joined.length - half));
    }
  }

  /** With `redact`, a truncated text is redacted on either side of its cut (see Redactor.aroundCut). */
  toString(redact?: Redactor): string {
    const head = Buffer.concat(this.head);
    const dropped = this.total - head.length - this.tail.length;
    if (dropped <= 0) return Buffer.concat([head, this.tail]).toString('utf8');
    const [kept, last] = redact ? redact.aroundCut(head.toString('utf8'), this.tail.toString('utf8')) : [head.toString('utf8'), this.tail.toString('utf8')];
    return `${kept}\n[... ${dropped} bytes truncated ...]\n${last}`;
  }
}
