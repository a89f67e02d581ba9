import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { ClawError, errnoCode } from '../../core/errors.js';
import { withStoragePath } from '../../core/storage-error.js';
import type { AgentDir } from '../agent-dir.js';
import { ensureDir } from '../../core/home.js';

/**
 * Approval requests (policy `ask`, tool-policy.ts): a command that runs only once the owner
 * allows it. The turn that needs one writes it to the agent's `approvals/` (which the sandbox
 * cannot write), tells the owner in their direct chat with the agent (the exact command, for
 * which conversation, how to answer, when it expires) and waits for the decision, the expiry or
 * the end of its turn, whichever comes first.
 *
 * The owner answers `/approve <code>` or `/deny <code>` in a direct chat with the agent, which
 * the run sees at once even while the asking turn holds it (inbox-watch.ts), or runs
 * `agent approve|deny <agent> <code>` in a terminal. The first decision counts: it is a file
 * created exclusively next to the request.
 */
const ApprovalSchema = z.strictObject({
  code: z.string(),
  command: z.string(),
  /** The conversation whose turn asks (its thread id). */
  conversation: z.string(),
  /** Who the turn answers: the source address of its message. */
  asked_for: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
});
export type Approval = z.output<typeof ApprovalSchema>;

const DecisionSchema = z.strictObject({ approved: z.boolean(), by: z.string(), at: z.string() });
export type ApprovalDecision = z.output<typeof DecisionSchema>;

export type ApprovalState = { state: 'pending' } | { state: 'expired' } | { state: 'decided'; decision: ApprovalDecision };

/** Easy to read out and type on a phone: no 0/o, 1/l/i. */
const CODE_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const CODE_LENGTH = 5;
/** Requests and decisions are kept this long, for `agent approvals --all` and the log. */
const KEEP_MS = 7 * 24 * 3600 * 1000;
const POLL_MS = 200;

export function approvalsDir(dir: AgentDir): string {
  return join(dir.root, 'approvals');
}

/** A new code for something the owner decides (an approval, a proposal). */
export function newCode(): string {
  return Array.from({ length: CODE_LENGTH }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join('');
}

/** Writes a file unless it is there already: the first decision counts. Returns whether this one was written. */
export function writeFirst(file: string, content: string): boolean {
  try {
    writeFileSync(file, content, { flag: 'wx', mode: 0o600 });
    return true;
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
    return false;
  }
}

/** Writes a new request. */
export function createApproval(dir: AgentDir, request: { command: string; conversation: string; askedFor: string; timeoutSeconds: number }, now = new Date()): Approval {
  const root = approvalsDir(dir);
  return withStoragePath(root, () => {
    ensureDir(root);
    removeOld(root, now);
    const approval: Approval = {
      code: newCode(),
      command: request.command,
      conversation: request.conversation,
      asked_for: request.askedFor,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + request.timeoutSeconds * 1000).toISOString(),
    };
    const file = join(root, `${approval.code}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(approval), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
    return approval;
  });
}

/** The request with this code (any case), or null. */
export function readApproval(dir: AgentDir, code: string): Approval | null {
  if (!/^[a-z0-9]{1,32}$/i.test(code)) return null;
  try {
    return ApprovalSchema.parse(JSON.parse(readFileSync(join(approvalsDir(dir), `${code.toLowerCase()}.json`), 'utf8')));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
}

export function approvalState(dir: AgentDir, approval: Approval, now = Date.now()): ApprovalState {
  let decision: ApprovalDecision | null = null;
  try {
    decision = DecisionSchema.parse(JSON.parse(readFileSync(decisionFile(dir, approval.code), 'utf8')));
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
  }
  if (decision) return { state: 'decided', decision };
  return now >= Date.parse(approval.expires_at) ? { state: 'expired' } : { state: 'pending' };
}

/**
 * Decides a pending request; returns its state afterwards (the earlier decision, when there was
 * one). An unknown code is a not_found error.
 */
export function decideApproval(dir: AgentDir, code: string, approved: boolean, by: string, now = new Date()): { approval: Approval; state: ApprovalState } {
  const approval = readApproval(dir, code);
  if (!approval) throw new ClawError('not_found', `no approval request ${code} for agent ${dir.id}`, { suggestion: `see the pending ones with: agent approvals ${dir.id}` });
  const before = approvalState(dir, approval, now.getTime());
  if (before.state !== 'pending') return { approval, state: before };
  writeFirst(decisionFile(dir, approval.code), JSON.stringify({ approved, by, at: now.toISOString() } satisfies ApprovalDecision)); // decided meanwhile: that decision counts
  return { approval, state: approvalState(dir, approval, now.getTime()) };
}

/** Requests not yet decided nor expired, oldest first. */
export function pendingApprovals(dir: AgentDir, now = Date.now()): Approval[] {
  let names: string[];
  try {
    names = readdirSync(approvalsDir(dir));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  }
  return names
    .filter((name) => /^[a-z0-9]+\.json$/.test(name))
    .flatMap((name) => readApproval(dir, name.slice(0, -'.json'.length)) ?? [])
    .filter((approval) => approvalState(dir, approval, now).state === 'pending')
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Waits for the owner's decision; `expired` past the request's expiry, `aborted` when the turn ends first. */
export async function waitForDecision(dir: AgentDir, approval: Approval, signal?: AbortSignal): Promise<'approved' | 'denied' | 'expired' | 'aborted'> {
  for (;;) {
    if (signal?.aborted) return 'aborted';
    const state = approvalState(dir, approval);
    if (state.state === 'decided') return state.decision.approved ? 'approved' : 'denied';
    if (state.state === 'expired') return 'expired';
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.min(POLL_MS, Math.max(0, Date.parse(approval.expires_at) - Date.now())));
      signal?.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
    });
  }
}

function decisionFile(dir: AgentDir, code: string): string {
  return join(approvalsDir(dir), `${code}.decision.json`);
}

function removeOld(root: string, now: Date): void {
  for (const name of readdirSync(root)) {
    const file = join(root, name);
    try {
      if (now.getTime() - statSync(file).mtimeMs > KEEP_MS) rmSync(file, { force: true });
    } catch {
      // Removed meanwhile.
    }
  }
}
