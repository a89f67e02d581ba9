import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { agentDir, listAgentIds } from '../agent/agent-dir.js';
import { daemonLogFile } from '../core/layout.js';
import { usageError } from '../core/errors.js';

/**
 * `theclaw logs`: the system's logs as one stream. notifier's, xgw's and every agent's
 * (`agents/<id>/logs/agent.log`) entries are merged by their time, each line prefixed with the
 * log it comes from; a line without a time of its own (the rest of a multi-line entry) stays with
 * its entry. `follow` then prints what each log gains, as it comes.
 */
export interface LogSource {
  /** `notifier`, `xgw`, or an agent id. */
  name: string;
  file: string;
}

interface Entry {
  time: number;
  lines: string[];
}

const STAMP = /^\[(\d{4}-\d{2}-\d{2}T[\d:.]+Z)\] /;

/** The logs of one component (`notifier`, `xgw`, an agent id), or of all. */
export function logSources(home: string, component?: string): LogSource[] {
  const all: LogSource[] = [
    { name: 'notifier', file: daemonLogFile(home, 'notifier') },
    { name: 'xgw', file: daemonLogFile(home, 'xgw') },
    ...listAgentIds(home).map((id) => ({ name: id, file: agentDir(home, id).log })),
  ];
  if (component === undefined) return all;
  const chosen = all.filter((source) => source.name === component);
  if (chosen.length === 0) throw usageError(`there is no component ${component}`, `choose one of: ${all.map((source) => source.name).join(', ')}`);
  return chosen;
}

/** The newest `lines` entries since `sinceMs` (epoch ms), oldest first, as printed lines. */
export function recentLogLines(sources: readonly LogSource[], options: { lines: number; sinceMs?: number }): string[] {
  const entries = sources.flatMap((source) => readEntries(source).map((entry) => ({ ...entry, name: source.name })));
  const kept = entries.filter((entry) => options.sinceMs === undefined || entry.time >= options.sinceMs);
  // Stable: entries of one time keep their log's order.
  kept.sort((a, b) => a.time - b.time);
  return kept.slice(-options.lines).flatMap((entry) => entry.lines.map((line) => `${entry.name.padEnd(8)} ${line}`));
}

/**
 * Prints what each log gains from now on, every `intervalMs`, until the signal aborts. A log
 * that became shorter (rotated) is read from its start.
 */
export async function followLogs(sources: readonly LogSource[], print: (line: string) => void, signal: AbortSignal, intervalMs = 250): Promise<void> {
  const offsets = new Map(sources.map((source) => [source.file, sizeOf(source.file)]));
  const partial = new Map<string, string>();
  // A character split between two reads is decoded once whole.
  const decoders = new Map(sources.map((source) => [source.file, new StringDecoder('utf8')]));
  while (!signal.aborted) {
    for (const source of sources) {
      const size = sizeOf(source.file);
      let from = offsets.get(source.file) ?? 0;
      if (size < from) from = 0;
      if (size === from) continue;
      const text = (partial.get(source.file) ?? '') + decoders.get(source.file)!.write(readRange(source.file, from, size));
      offsets.set(source.file, size);
      const lines = text.split('\n');
      partial.set(source.file, lines.pop() ?? '');
      for (const line of lines) print(`${source.name.padEnd(8)} ${line}`);
    }
    // One listener per wait, removed after it: a listener per poll left behind would pile up.
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, intervalMs);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** `30s`, `10m`, `2h`, `7d` → milliseconds. */
export function parseSince(value: string): number {
  const match = /^(\d+)(s|m|h|d)$/.exec(value.trim());
  if (!match) throw usageError(`--since ${JSON.stringify(value)} is not a duration`, 'pass e.g. --since 10m (s, m, h or d)');
  return Number(match[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
}

function readEntries(source: LogSource): Entry[] {
  if (!existsSync(source.file)) return [];
  const entries: Entry[] = [];
  for (const line of readFileSync(source.file, 'utf8').split('\n')) {
    if (line === '') continue;
    const stamp = STAMP.exec(line);
    if (stamp) entries.push({ time: Date.parse(stamp[1]!), lines: [line] });
    else if (entries.length > 0) entries.at(-1)!.lines.push(line);
  }
  return entries;
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

function readRange(file: string, from: number, to: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(to - from);
    const read = readSync(fd, buffer, 0, buffer.length, from);
    return buffer.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}
