import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTestThread } from '../../testing/index.js';
import { TurnAbandoned } from './failure.js';
import { beginAttempt, overTurnLimit, unfinishedTurn } from './turn-attempts.js';

const test = useTestThread();
const settings = { timeout_seconds: 600, max_attempts: 3 };
const message = (text: string) => test.thread.push({ source: 'external:terminal:local:dm:ann:ann', type: 'message', content: JSON.stringify({ text, attachments: [] }) });

describe('beginAttempt', () => {
  it('numbers the turns at a message and gives it up once max_attempts of them were cut off', async () => {
    const id = message('poison');
    const numbers = [];
    for (let n = 0; n < 3; n++) numbers.push((await beginAttempt(test.stored, id, settings)).number);
    expect(numbers).toEqual([1, 2, 3]);
    await expect(beginAttempt(test.stored, id, settings)).rejects.toThrow(new TurnAbandoned('crashed', 'answering failed 3 times'));
  });

  it('does not count a turn that ended waiting for the model, nor the turns at another message', async () => {
    const first = message('first');
    await (await beginAttempt(test.stored, first, settings)).waits();
    await (await beginAttempt(test.stored, first, settings)).waits();
    const second = message('second');
    await beginAttempt(test.stored, second, settings);
    await beginAttempt(test.stored, second, settings);
    expect((await beginAttempt(test.stored, first, settings)).number).toBe(3);
    expect((await beginAttempt(test.stored, first, settings)).number).toBe(4);
    expect((await beginAttempt(test.stored, second, settings)).number).toBe(3);
    await expect(beginAttempt(test.stored, second, settings)).rejects.toThrow(TurnAbandoned);
  });
});

describe('unfinishedTurn', () => {
  const write = (lines: object[]) => {
    const file = join(test.home.home, 'session.jsonl');
    writeFileSync(file, lines.map((line) => JSON.stringify(line) + '\n').join(''));
    return file;
  };

  it('is the session from the user line of this turn on, when the session ends with it', () => {
    const file = write([
      { role: 'user', content: 'before', turn: '1' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'now', turn: '4' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'bash_exec', arguments: { command: 'true' } }] },
    ]);
    expect(unfinishedTurn(file, '4').map((line) => line.role)).toEqual(['user', 'assistant']);
    expect(unfinishedTurn(file, '1')).toEqual([]); // another turn came after it
  });

  it('is nothing for a session of another turn, without turn names, or unreadable', () => {
    expect(
      unfinishedTurn(
        write([
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ]),
        '1',
      ),
    ).toEqual([]);
    expect(unfinishedTurn(join(test.home.home, 'none.jsonl'), '1')).toEqual([]);
    const broken = join(test.home.home, 'broken.jsonl');
    writeFileSync(broken, 'not json\n');
    expect(unfinishedTurn(broken, '1')).toEqual([]);
  });
});

describe('overTurnLimit', () => {
  it('says the limit in minutes when it is whole minutes, else in seconds', () => {
    expect(overTurnLimit(settings).reason).toBe('the answer took longer than the turn limit (10 min)');
    expect(overTurnLimit({ ...settings, timeout_seconds: 90 }).reason).toBe('the answer took longer than the turn limit (90 s)');
  });
});
