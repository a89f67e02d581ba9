import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatAddress } from '../../core/address.js';
import { createLogger } from '../../core/logger.js';
import { createTestHome, waitFor, type TestHome, storedThread } from '../../testing/index.js';
import { openThread, type Thread } from '../../thread/index.js';
import { watchInbox } from '../inbox-watch.js';
import { noticeStop, RunningTurns } from './turn-stop.js';

describe('RunningTurns', () => {
  it('aborts the running turn of the conversation the /stop is for, when the turn came before it', () => {
    const turns = new RunningTurns();
    const ann = turns.begin('ann', 10);
    const bob = turns.begin('bob', 11);
    expect(turns.stop('ann', 12)).toBe(true);
    expect(ann.signal.aborted).toBe(true);
    expect(ann.stoppedBy).toBe(12);
    expect(bob.signal.aborted).toBe(false);
    expect(turns.stop('ann', 13)).toBe(false); // stopped already: the first /stop keeps it
    expect(ann.stoppedBy).toBe(12);
  });

  it('leaves a turn that came after the /stop alone, and begins the turns queued before it stopped', () => {
    const turns = new RunningTurns();
    expect(turns.stop('ann', 20)).toBe(false); // nothing running yet
    const queued = turns.begin('ann', 15);
    expect(queued.stoppedBy).toBe(20);
    turns.end('ann', queued);
    const later = turns.begin('ann', 21);
    expect(later.signal.aborted).toBe(false);
    expect(turns.stop('ann', 20)).toBe(false);
  });

  it("aborts every turn when the run's own signal does", () => {
    const run = new AbortController();
    const turns = new RunningTurns(run.signal);
    const turn = turns.begin('ann', 1);
    run.abort();
    expect(turn.signal.aborted).toBe(true);
    expect(turn.stoppedBy).toBeNull(); // not a /stop
  });

  it('aborts a turn that runs past the turn limit and marks it timed out; a turn that ended in time is left alone', async () => {
    const turns = new RunningTurns(undefined, 50);
    const quick = turns.begin('ann', 1);
    turns.end('ann', quick);
    const slow = turns.begin('bob', 2);
    await waitFor(() => slow.signal.aborted, 'the turn limit', 2_000, 10);
    expect(slow.timedOut).toBe(true);
    expect(slow.stoppedBy).toBeNull();
    turns.end('bob', slow);
    expect(quick.signal.aborted).toBe(false);
    expect(quick.timedOut).toBe(false);
  });
});

describe('a run watching its inbox for /stop', () => {
  let t: TestHome;
  let inbox: Thread;
  const person = (peer: string) => formatAddress({ kind: 'external', channelType: 'terminal', instance: 'local', conversationType: 'dm', conversationId: peer, peerId: peer });
  const push = (peer: string, text: string) => inbox.push({ source: person(peer), type: 'message', content: JSON.stringify({ text, attachments: [] }) });

  beforeEach(() => {
    t = createTestHome();
    inbox = openThread(join(t.home, 'inbox'), { home: t.home, create: true });
  });
  afterEach(() => {
    inbox.close();
    t.cleanup();
  });

  it('sees a /stop already in the batch before it returns, and one that arrives later within its interval', async () => {
    const first = push('ann', 'do the long thing');
    const stop = push('ann', '/stop');
    const turns = new RunningTurns();
    const logger = createLogger(join(t.home, 'log'));
    const watch = await watchInbox(storedThread(inbox), { afterId: first - 1, onMessage: (event) => noticeStop(event, turns, (source) => source, logger), logger, intervalMs: 20 });
    try {
      expect(turns.begin(person('ann'), first).stoppedBy).toBe(stop);

      const bob = turns.begin(person('bob'), push('bob', 'another long thing'));
      push('bob', 'not a stop');
      push('ann', '/stop'); // another conversation's
      expect(bob.signal.aborted).toBe(false);
      const bobStop = push('bob', '/Stop now');
      await waitFor(() => bob.signal.aborted, "bob's turn to be stopped", 2_000);
      expect(bob.stoppedBy).toBe(bobStop);
    } finally {
      watch.close();
    }
  });
});
