import { execFile } from 'node:child_process';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { ClawError, type ErrorKind } from '../core/errors.js';
import { packageRoot } from '../core/package.js';
import { validate } from '../core/validate.js';
import type { ControlAction, ControlOutcome, ControlView, ConversationView } from './channels/control-protocol.js';

/**
 * What the owner's control page reads and does, carried out by `theclaw`'s control runner
 * (`dist/theclaw/control-runner.js`, src/theclaw/control-runner.ts) in a process of its own, for
 * the reason the status page runs `theclaw status` (system-status.ts): the umbrella, which may use
 * every tool's library, depends on xgw. One request a process: its JSON on stdin, the answer
 * (RunnerAnswer) on stdout.
 */
export interface ControlSource {
  view(): Promise<ControlView>;
  /** One conversation of an agent, read-only (ids checked by the runner: only a conversation of that agent is opened). */
  conversation(agent: string, thread: string): Promise<ConversationView>;
  act(action: ControlAction): Promise<ControlOutcome>;
}

/** What the runner is asked. */
export type RunnerRequest = { op: 'view' } | { op: 'conversation'; agent: string; thread: string } | { op: 'act'; action: ControlAction };
/** What it answers: the value, or the error its library threw (kind kept, for the HTTP status). */
export type RunnerAnswer = { ok: true; value: unknown } | { ok: false; error: string; suggestion?: string; kind: ErrorKind };

const agentId = z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be an agent id (lower-case letters, digits, _ and -)'));

/** The edge: every field of an action came from a browser. */
export const ControlActionSchema: z.ZodMiniType<ControlAction> = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('agent_start'), agent: agentId }),
  z.strictObject({ action: z.literal('agent_stop'), agent: agentId }),
  z.strictObject({ action: z.literal('agent_create'), agent: agentId, purpose: z.string().check(z.trim(), z.minLength(1), z.maxLength(300), z.regex(/^[^\n\r]*$/, 'must be one line')) }),
  z.strictObject({ action: z.literal('decide'), agent: agentId, code: z.string().check(z.regex(/^[a-z0-9]{1,32}$/i, 'must be the code of a request or proposal')), approve: z.boolean() }),
  z.strictObject({ action: z.literal('pairing_decide'), code: z.string().check(z.regex(/^[A-Za-z0-9]{8}$/, 'must be the 8-character pairing code')), approve: z.boolean() }),
]);

/** Parses an action from a request body (a usage error naming each bad field). */
export function parseControlAction(value: unknown): ControlAction {
  return validate(ControlActionSchema, value, { what: 'control action', kind: 'usage', suggestion: 'reload the control page' });
}

const TIMEOUT_MS = 60_000;

export function createControlSource(home: string, env: NodeJS.ProcessEnv = process.env): ControlSource {
  const runner = join(packageRoot(), 'dist', 'theclaw', 'control-runner.js');
  const ask = (request: RunnerRequest) =>
    new Promise<unknown>((resolve, reject) => {
      const child = execFile(process.execPath, [runner], { env: { ...env, THECLAW_HOME: home }, timeout: TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (error, stdout) => {
        let answer: RunnerAnswer;
        try {
          answer = JSON.parse(stdout) as RunnerAnswer;
        } catch {
          return reject(
            new ClawError('io', `the control runner ${error ? `failed (${error.message.split('\n')[0]})` : 'printed something that is not JSON'}`, {
              suggestion: 'build TheClaw again (npm run build) and see the xgw log',
            }),
          );
        }
        if (answer.ok) resolve(answer.value);
        else reject(new ClawError(answer.kind, answer.error, { suggestion: answer.suggestion }));
      });
      child.stdin?.end(JSON.stringify(request));
    });
  return {
    view: () => ask({ op: 'view' }) as Promise<ControlView>,
    conversation: (agent, thread) => ask({ op: 'conversation', agent, thread }) as Promise<ConversationView>,
    act: (action) => ask({ op: 'act', action }) as Promise<ControlOutcome>,
  };
}
