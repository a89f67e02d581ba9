import { writeSync } from 'node:fs';
import { dirname, isAbsolute } from 'node:path';
import { ensureDir, resolveHome } from './home.js';
import { homeRef } from './layout.js';
import { RotatingFile, type RotatingFileOptions } from './rotating-file.js';
import { createRedactor } from './secrets.js';
import { storageError } from './storage-error.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LoggerOptions extends RotatingFileOptions {
  /** Lines below this level are dropped. Default: `$THECLAW_LOG_LEVEL` or `info`. */
  level?: LogLevel;
  /** Environment whose secret values are redacted from every line, and whose home a log in it names `$THECLAW_HOME`. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * A component's log: `[ISO8601] [LEVEL] message`, one file per component, rotated past 10,000
 * lines. A multi-line message becomes several lines with the same prefix, so every line of the
 * file can be grepped on its own. Logging never throws: a full disk must not turn into a crash
 * of the component whose trouble the log was meant to record. A line that cannot be written is
 * dropped; the first time in a process, stderr says so. A log in the home writes the home's own
 * path as `$THECLAW_HOME`, so that nothing in a home names where it was (it can be moved or copied).
 */
export function createLogger(path: string, options: LoggerOptions = {}): Logger {
  const file = new RotatingFile(path, options);
  const threshold = RANK[options.level ?? parseLevel(process.env.THECLAW_LOG_LEVEL) ?? 'info'];
  const redact = createRedactor(options.env);
  const relocate = homeNamer(path, options.env);
  let dirReady = false;

  const write = (level: LogLevel, message: string): void => {
    if (RANK[level] < threshold) return;
    const prefix = `[${new Date().toISOString()}] [${level.toUpperCase()}] `;
    const lines = relocate(redact(message)).split('\n');
    try {
      if (!dirReady) dirReady = Boolean(ensureDir(dirname(path)));
      file.append(lines.map((line) => prefix + line).join('\n') + '\n', lines.length);
    } catch (error) {
      // See above: the log is best effort, the component goes on.
      warnDropped(path, error);
    }
  };

  return {
    debug: (message) => write('debug', message),
    info: (message) => write('info', message),
    warn: (message) => write('warn', message),
    error: (message) => write('error', message),
  };
}

/** For a log in the home of `env`: the home's path (where no name goes on after it) as `$THECLAW_HOME`. */
function homeNamer(logPath: string, env: NodeJS.ProcessEnv = process.env): (text: string) => string {
  const home = resolveHome(env);
  if (isAbsolute(homeRef(home, logPath))) return (text) => text;
  const pattern = new RegExp(`${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\p{L}\\p{N}_.-])`, 'gu');
  return (text) => text.replaceAll(pattern, '$$THECLAW_HOME');
}

let droppedWarned = false;

function warnDropped(path: string, error: unknown): void {
  if (droppedWarned) return;
  droppedWarned = true;
  const reason = storageError(error, path)?.message ?? (error instanceof Error ? error.message : String(error));
  try {
    // stderr may be a file on the same full disk (a daemon's): that must not throw either. Written
    // with writeSync, whose error can be caught: the stream would emit it later as an 'error'
    // event, which no one handles, and that kills the process.
    writeSync(2, `warning: log lines are dropped: ${reason}\n`);
  } catch {
    // nowhere left to say it
  }
}

/** A logger that drops everything, for library callers that did not ask for a log. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function parseLevel(value: string | undefined): LogLevel | undefined {
  return value !== undefined && value in RANK ? (value as LogLevel) : undefined;
}
