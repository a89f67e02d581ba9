import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from './logger.js';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'theclaw-logger-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const LINE = /^\[(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\] \[(DEBUG|INFO|WARN|ERROR)\] (.*)$/;

function logLines(path: string): string[] {
  return readFileSync(path, 'utf8').split('\n').slice(0, -1);
}

describe('createLogger', () => {
  it('writes lines as [ISO8601] [LEVEL] message', () => {
    const path = join(dir, 'app.log');
    const log = createLogger(path, { level: 'debug', env: {} });
    const before = Date.now();
    log.debug('starting');
    log.info('ready on port 80');
    log.warn('slow');
    log.error('failed: x');
    const after = Date.now();

    const lines = logLines(path);
    expect(lines).toHaveLength(4);
    const parsed = lines.map((line) => {
      const match = LINE.exec(line);
      expect(match, line).not.toBeNull();
      return { at: Date.parse(match![1]!), level: match![2], message: match![3] };
    });
    expect(parsed.map(({ level, message }) => [level, message])).toEqual([
      ['DEBUG', 'starting'],
      ['INFO', 'ready on port 80'],
      ['WARN', 'slow'],
      ['ERROR', 'failed: x'],
    ]);
    for (const { at } of parsed) {
      expect(at).toBeGreaterThanOrEqual(before - 1);
      expect(at).toBeLessThanOrEqual(after + 1);
    }
  });

  it('gives every line of a multi-line message its own prefix', () => {
    const path = join(dir, 'app.log');
    const log = createLogger(path, { env: {} });
    log.error('Error: boom\n    at one\n    at two');
    const lines = logLines(path);
    expect(lines).toHaveLength(3);
    const prefixes = lines.map((line) => {
      const match = LINE.exec(line);
      expect(match, line).not.toBeNull();
      return `${match![1]} ${match![2]}`;
    });
    expect(new Set(prefixes).size).toBe(1);
    expect(lines.map((line) => LINE.exec(line)![3])).toEqual(['Error: boom', '    at one', '    at two']);
  });

  it('counts multi-line messages as several lines when rotating', () => {
    const path = join(dir, 'app.log');
    const log = createLogger(path, { env: {}, maxLines: 4 });
    log.info('a\nb\nc');
    log.info('d\ne');
    expect(readdirSync(dir).sort()).toHaveLength(2);
    expect(logLines(path)).toHaveLength(2);
  });

  it('drops lines below the level threshold', () => {
    const path = join(dir, 'app.log');
    const log = createLogger(path, { level: 'warn', env: {} });
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    expect(logLines(path).map((line) => LINE.exec(line)![2])).toEqual(['WARN', 'ERROR']);
  });

  it('defaults to info', () => {
    const saved = process.env.THECLAW_LOG_LEVEL;
    delete process.env.THECLAW_LOG_LEVEL;
    try {
      const path = join(dir, 'app.log');
      const log = createLogger(path, { env: {} });
      log.debug('d');
      log.info('i');
      expect(logLines(path).map((line) => LINE.exec(line)![3])).toEqual(['i']);
    } finally {
      if (saved !== undefined) process.env.THECLAW_LOG_LEVEL = saved;
    }
  });

  it('redacts secret values of the environment it is given', () => {
    const path = join(dir, 'app.log');
    const log = createLogger(path, {
      env: { OPENAI_API_KEY: 'sk-test-1234567890', TELEGRAM_BOT_TOKEN: 'tg-0987654321', HOME: '/home/someone', SHORT_TOKEN: 'abc' },
    });
    log.info('calling with key sk-test-1234567890 and sk-test-1234567890');
    log.warn('token=tg-0987654321\nsecond line sk-test-1234567890 end');
    log.info('home is /home/someone, abc stays');

    const text = readFileSync(path, 'utf8');
    expect(text).not.toContain('sk-test-1234567890');
    expect(text).not.toContain('tg-0987654321');
    const messages = logLines(path).map((line) => LINE.exec(line)![3]);
    expect(messages).toEqual(['calling with key [redacted] and [redacted]', 'token=[redacted]', 'second line [redacted] end', 'home is /home/someone, abc stays']);
  });

  it('names its home $THECLAW_HOME in a log in the home, so that the home can move, and leaves other paths as they are', () => {
    const home = join(dir, 'home');
    const inHome = join(home, 'logs', 'x.log');
    createLogger(inHome, { env: { THECLAW_HOME: home } }).info(`on ${home}/agents/a/inbox (${home}), not ${home}2/x or ${home}.old`);
    expect(logLines(inHome)[0]).toMatch(/\] on \$THECLAW_HOME\/agents\/a\/inbox \(\$THECLAW_HOME\), not .*home2\/x or .*home\.old$/);
    const outside = join(dir, 'elsewhere.log');
    createLogger(outside, { env: { THECLAW_HOME: home } }).info(`on ${home}/agents/a/inbox`);
    expect(logLines(outside)[0]).toContain(`on ${home}/agents/a/inbox`);
  });

  it('creates the directory of the log on first use', () => {
    const path = join(dir, 'logs', 'nested', 'app.log');
    createLogger(path, { env: {} }).info('hello');
    expect(logLines(path)).toHaveLength(1);
  });

  it('does not throw when the log path cannot be written', () => {
    // A path below a regular file can never be created, even by root.
    const blocker = join(dir, 'file');
    writeFileSync(blocker, 'x');
    const log = createLogger(join(blocker, 'sub', 'app.log'), { env: {} });
    expect(() => log.error('lost')).not.toThrow();
    expect(() => log.info('lost again')).not.toThrow();

    // Nor when the path is a directory.
    const dirLog = createLogger(dir, { env: {} });
    expect(() => dirLog.error('lost')).not.toThrow();

    expect(readFileSync(blocker, 'utf8')).toBe('x');
  });

  it('has a silent logger that accepts every level', () => {
    expect(() => {
      silentLogger.debug('x');
      silentLogger.info('x');
      silentLogger.warn('x');
      silentLogger.error('x');
    }).not.toThrow();
  });
});
