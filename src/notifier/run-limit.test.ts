import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultRunLimit, RunLimit } from './run-limit.js';

/** A run that holds its place until `end` is called. */
function harness(limit: number) {
  const runLimit = new RunLimit(limit);
  const started: string[] = [];
  let running = 0;
  let peak = 0;
  const request = (group: string, key: string, willStart = true) =>
    runLimit.request({
      group,
      key,
      start: () => {
        if (!willStart) return false;
        started.push(key);
        running++;
        peak = Math.max(peak, running);
        return true;
      },
    });
  const end = () => {
    running--;
    runLimit.release();
  };
  return { runLimit, started, request, end, peak: () => peak };
}

describe('RunLimit', () => {
  it('starts at once while places are free, then queues', () => {
    const h = harness(2);
    h.request('a', 'a1');
    h.request('b', 'b1');
    h.request('c', 'c1');
    expect(h.started).toEqual(['a1', 'b1']);
    expect(h.runLimit.queued).toBe(1);
    h.end();
    expect(h.started).toEqual(['a1', 'b1', 'c1']);
  });

  it('resized (a reload): more places start what waits at once; fewer let the runs under way finish first', () => {
    const h = harness(1);
    for (const key of ['a1', 'b1', 'c1', 'd1']) h.request(key[0]!, key);
    h.runLimit.resize(3);
    expect(h.started).toEqual(['a1', 'b1', 'c1']);
    h.runLimit.resize(1);
    h.end();
    h.end();
    expect(h.started).toEqual(['a1', 'b1', 'c1']); // two of three ended: still one runs, the limit
    h.end();
    expect(h.started).toEqual(['a1', 'b1', 'c1', 'd1']);
    expect(h.runLimit.limit).toBe(1);
  });

  it('gives the groups turns: a busy agent cannot starve one with a single message', () => {
    const h = harness(1);
    h.request('busy', 'x0');
    for (let i = 1; i <= 5; i++) h.request('busy', `x${i}`);
    h.request('quiet', 'q1');
    h.request('timers', 't1');
    for (let i = 0; i < 7; i++) h.end();
    // The busy agent's second run comes only after each other group had its turn.
    expect(h.started).toEqual(['x0', 'x1', 'q1', 't1', 'x2', 'x3', 'x4', 'x5']);
  });

  it('keeps one waiting request per key', () => {
    const h = harness(1);
    h.request('a', 'a1');
    h.request('b', 'b1');
    h.request('b', 'b1');
    expect(h.runLimit.queued).toBe(1);
    expect(h.runLimit.isWaiting('b', 'b1')).toBe(true);
    h.end();
    expect(h.started).toEqual(['a1', 'b1']);
    expect(h.runLimit.isWaiting('b', 'b1')).toBe(false);
  });

  it('passes a freed place on when the waiting work is gone by then', () => {
    const h = harness(1);
    h.request('a', 'a1');
    h.request('b', 'gone', false);
    h.request('c', 'c1');
    h.end();
    expect(h.started).toEqual(['a1', 'c1']);
    expect(h.runLimit.active).toBe(1);
  });

  it('frees the place of a start that throws', () => {
    const limit = new RunLimit(1);
    expect(() =>
      limit.request({
        group: 'a',
        key: 'a',
        start: () => {
          throw new Error('disk full');
        },
      }),
    ).toThrow('disk full');
    expect(limit.active).toBe(0);
  });

  it('never runs more than the limit, and runs every request once it is its turn (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('request' as const), group: fc.constantFrom('a', 'b', 'c', 'timers'), key: fc.integer({ min: 0, max: 30 }) }),
      fc.record({ kind: fc.constant('end' as const) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 80 }), (limit, ops) => {
        const h = harness(limit);
        const asked = new Set<string>();
        let running = 0;
        for (const step of ops) {
          if (step.kind === 'request') {
            const key = `${step.group}:${step.key}`;
            if (h.started.includes(key)) continue; // a key runs once in this model
            asked.add(key);
            h.request(step.group, key);
          } else if (h.runLimit.active > 0) h.end();
          running = h.runLimit.active;
          expect(running).toBeLessThanOrEqual(limit);
        }
        while (h.runLimit.active > 0) h.end();
        expect(new Set(h.started)).toEqual(asked);
        expect(h.peak()).toBeLessThanOrEqual(limit);
      }),
      { numRuns: 200 },
    );
  });

  it('defaults to twice the cores, at least four', () => {
    expect(defaultRunLimit(1)).toBe(4);
    expect(defaultRunLimit(2)).toBe(4);
    expect(defaultRunLimit(8)).toBe(16);
  });
});
