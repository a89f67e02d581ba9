import type { StoredThread } from '../../thread/index.js';
import { memoryVersion } from './memory-store.js';
import { CHARS_PER_TOKEN, estimateTokens } from '../tokens.js';
import type { ErrorRecord, MemoryLayer } from '../types.js';

/**
 * Memory files grow — the agent appends notes, the summariser rewrites the conversation summary —
 * and the window does not: each layer goes into the system prompt up to its cap
 * (`context.memory_caps`). A longer file keeps its start and its end and loses its middle: notes
 * are appended, so the start holds the oldest lasting facts (a name, standing preferences) and the
 * end the newest; a summary opens with the background and ends with what is still open. A marker
 * where the middle was says how much is missing and names the file, which the agent can read
 * whole or condense.
 */
export interface MemoryTruncation {
  layer: MemoryLayer;
  file: string;
  /** The whole file's estimated tokens. */
  tokens: number;
  cap: number;
  /** Tells one version of the file from another, so that each version is warned about once. */
  version: string;
}

export interface CappedMemory {
  text: string;
  truncation: MemoryTruncation | null;
}

export function capMemory(layer: MemoryLayer, file: string, text: string, cap: number): CappedMemory {
  const tokens = estimateTokens(text);
  if (tokens <= cap) return { text, truncation: null };
  const marker = `\n[... memory truncated: ${tokens - cap} tokens over the cap of ${cap}; see ${file}]\n`;
  const half = Math.max(0, Math.floor((cap * CHARS_PER_TOKEN - marker.length) / 2));
  return {
    text: startLines(text, half) + marker + endLines(text, half),
    truncation: { layer, file, tokens, cap, version: memoryVersion(text) },
  };
}

/** Up to `chars` characters from the start, cut after a whole line where there is one. */
function startLines(text: string, chars: number): string {
  const head = text.slice(0, chars);
  const end = head.lastIndexOf('\n');
  return end > 0 ? head.slice(0, end) : head;
}

/** Up to `chars` characters from the end, starting at a whole line where there is one. */
function endLines(text: string, chars: number): string {
  const tail = chars > 0 ? text.slice(-chars) : '';
  const start = tail.indexOf('\n');
  return start >= 0 && start < tail.length - 1 ? tail.slice(start + 1) : tail;
}

/**
 * A `record/error` warning for each truncated file, once per version of the file in a thread
 * (the idempotency key names the version): a file over its cap would otherwise be reported on
 * every message. Returns the truncations not reported before in this thread.
 */
export async function recordTruncations(thread: StoredThread, truncations: readonly MemoryTruncation[], inReplyTo: number): Promise<MemoryTruncation[]> {
  const reported: MemoryTruncation[] = [];
  for (const truncation of truncations) {
    const record: ErrorRecord = {
      in_reply_to: inReplyTo,
      stage: 'memory',
      severity: 'warning',
      error: `${truncation.file} is about ${truncation.tokens} tokens, over its cap of ${truncation.cap} (context.memory_caps.${truncation.layer}): its middle is left out of the context - condense the file, or raise the cap in the agent's config.yaml`,
    };
    const key = `memory-cap:${truncation.file}:${truncation.version}`;
    const [stored] = await thread.append([{ source: 'self', type: 'record', subtype: 'error', content: JSON.stringify(record), idempotency_key: key }]);
    if (!stored!.duplicate) reported.push(truncation);
  }
  return reported;
}
