import { closeSync, ftruncateSync, openSync, readFileSync, readSync, fstatSync, appendFileSync } from 'node:fs';
import { dirname } from 'node:path';
import * as z from 'zod/mini';
import { ClawError, errnoCode } from '../core/errors.js';
import { withStoragePath } from '../core/storage-error.js';
import { ensureDir } from '../core/home.js';

/**
 * A session file: JSONL, one message per line, appended as the turn goes (the user message, each
 * assistant message, each tool result), so a killed run leaves every finished message on disk.
 * The same format serves `pai chat --session` and the agent runtime's `sessions/<thread>.jsonl`.
 */
const ImageRefSchema = z.object({ path: z.string(), mime_type: z.string() });
export type ImageRef = z.output<typeof ImageRefSchema>;

const ToolCallSchema = z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()) });

export const SessionLineSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }),
  z.object({
    role: z.literal('user'),
    content: z.string(),
    ts: z.optional(z.string()),
    /** The caller's name for the turn this message began, so that a turn cut off by a crash can be found and resumed. */
    turn: z.optional(z.string()),
    /** Images that come with the message, by file (read when the request is made, not kept in the session). */
    images: z.optional(z.array(ImageRefSchema)),
    /** A message that joined the turn between its rounds of commands (chat.ts `joining`): not a turn's start. */
    joined: z.optional(z.boolean()),
  }),
  z.object({
    role: z.literal('assistant'),
    content: z.string(),
    tool_calls: z.optional(z.array(ToolCallSchema)),
    /** `provider/model` that wrote it. */
    model: z.optional(z.string()),
    ts: z.optional(z.string()),
  }),
  z.object({ role: z.literal('tool'), tool_call_id: z.string(), name: z.string(), content: z.string(), ts: z.optional(z.string()) }),
]);

export type SessionLine = z.output<typeof SessionLineSchema>;
export type SessionToolCall = z.output<typeof ToolCallSchema>;

/** Where the last turn of a session begins: its user line (one that joined a turn is not one), or -1. */
export function lastTurnStart(lines: readonly SessionLine[]): number {
  return lines.findLastIndex((line) => line.role === 'user' && line.joined !== true);
}

/**
 * Reads a session. The last line may be cut off by a crash mid-write: it is ignored (and removed
 * by the next append). A bad line anywhere else is stored data gone wrong: an `invalid` error.
 */
export function readSession(path: string): SessionLine[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  }
  // What follows the last newline is either empty or a line a crash cut off.
  const complete = text.split('\n').slice(0, -1);
  return complete.flatMap((line, index) => {
    if (line.trim() === '') return [];
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new ClawError('invalid', `${path} line ${index + 1} is not JSON`, { suggestion: 'remove or repair that line; each line is one message' });
    }
    const parsed = SessionLineSchema.safeParse(value);
    if (!parsed.success) {
      throw new ClawError('invalid', `${path} line ${index + 1} is not a session message: ${parsed.error.issues[0]?.message}`, {
        suggestion: 'each line is {"role": "user"|"assistant"|"tool"|"system", "content": ...}',
      });
    }
    return [parsed.data];
  });
}

/**
 * Appends one message as one line, after cutting off an unfinished last line if a crash (or a
 * full disk) left one. A full or read-only disk is a ClawError naming the session file.
 */
export function appendSession(path: string, line: SessionLine): void {
  withStoragePath(path, () => {
    ensureDir(dirname(path));
    dropUnfinishedLine(path);
    appendFileSync(path, JSON.stringify(line) + '\n');
  });
}

function dropUnfinishedLine(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, 'r+');
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return;
    throw error;
  }
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return;
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    if (last[0] === 10) return;
    // Find the end of the last complete line, reading backwards in chunks.
    const chunk = Buffer.alloc(4096);
    for (let end = size; end > 0; ) {
      const start = Math.max(0, end - chunk.length);
      readSync(fd, chunk, 0, end - start, start);
      const at = chunk.subarray(0, end - start).lastIndexOf(10);
      if (at !== -1) {
        ftruncateSync(fd, start + at + 1);
        return;
      }
      end = start;
    }
    ftruncateSync(fd, 0);
  } finally {
    closeSync(fd);
  }
}
