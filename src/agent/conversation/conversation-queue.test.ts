import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConversationQueue } from './conversation-queue.js';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('ConversationQueue', () => {
  it('answers each conversation in order, never two turns of one at once nor more than the limit, and takes what joins while it runs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        // Items: (conversation, ticks its turn takes, whether it is there at the start or joins later).
        fc.array(fc.record({ conversation: fc.constantFrom('a', 'b', 'c', 'd', 'e'), ticks: fc.integer({ min: 0, max: 3 }), joins: fc.boolean() }), { minLength: 1, maxLength: 30 }),
        async (concurrency, items) => {
          const queue = new ConversationQueue<number>();
          const taken: [string, number][] = [];
          const handled: [string, number][] = [];
          const add = (index: number) => queue.add(items[index]!.conversation, index) && taken.push([items[index]!.conversation, index]);
          const running = new Set<string>();
          let most = 0;
          // The first item is always there at the start, or the run would end before anything joins.
          const joiners = items.map((_, index) => index).filter((index) => index > 0 && items[index]!.joins);
          items.forEach((item, index) => {
            if (index === 0 || !item.joins) add(index);
          });
          await queue.run(concurrency, async (conversation, [index]) => {
            expect(running.has(conversation)).toBe(false);
            running.add(conversation);
            most = Math.max(most, running.size);
            const joiner = joiners.shift(); // one joins during each turn, while the run is busy
            if (joiner !== undefined) add(joiner);
            for (let i = 0; i < items[index!]!.ticks; i++) await tick();
            handled.push([conversation, index!]);
            running.delete(conversation);
            return true;
          });
          expect(most).toBeLessThanOrEqual(concurrency);
          expect(joiners).toEqual([]);
          expect(handled).toHaveLength(items.length);
          for (const conversation of new Set(items.map((item) => item.conversation))) {
            const of = (list: [string, number][]) => list.filter(([c]) => c === conversation).map(([, index]) => index);
            expect(of(handled)).toEqual(of(taken));
          }
          expect(queue.accepting).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('keeps a free slot busy with a message that joins, while a slow conversation goes on', async () => {
    const queue = new ConversationQueue<string>();
    const order: string[] = [];
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    queue.add('slow', 'first');
    const run = queue.run(2, async (_conversation, [item]) => {
      order.push(`start ${item}`);
      if (item === 'first') {
        queue.add('quick', 'joined');
        await slow;
      }
      order.push(`end ${item}`);
      return true;
    });
    await tick();
    await tick();
    expect(order).toEqual(['start first', 'start joined', 'end joined']);
    release();
    await run;
    expect(order.at(-1)).toBe('end first');
  });

  it('drops the rest of a conversation whose turn said stop, and takes nothing after close', async () => {
    const queue = new ConversationQueue<number>();
    for (const item of [1, 2, 3]) queue.add('a', item);
    queue.add('b', 4);
    const handled: number[] = [];
    await queue.run(1, async (_conversation, [item]) => {
      handled.push(item!);
      if (item === 1) {
        queue.close();
        expect(queue.add('c', 5)).toBe(false);
        return false;
      }
      return true;
    });
    expect(handled).toEqual([1, 4]);
    expect(queue.add('a', 6)).toBe(false);
  });

  it('waits for a planned turn without holding its slot, and takes what came meanwhile into it', async () => {
    // ann's turn takes all that waits and may begin 30 ms after bob's turn ran; bob's at once.
    let annAt = Number.POSITIVE_INFINITY;
    const queue = new ConversationQueue<string>((conversation, waiting) => ({ count: waiting.length, notBefore: conversation === 'ann' ? annAt : 0 }));
    queue.add('ann', 'hi');
    queue.add('bob', 'now');
    const turns: string[][] = [];
    let annBegan = 0;
    await queue.run(1, async (conversation, items) => {
      turns.push(items);
      if (conversation === 'ann') annBegan = Date.now();
      else {
        queue.add('ann', 'there');
        annAt = Date.now() + 30;
      }
      return true;
    });
    expect(turns).toEqual([['now'], ['hi', 'there']]);
    expect(annBegan).toBeGreaterThanOrEqual(annAt);
  });

  it('gives a running turn the items at the head of its conversation that it takes, up to the first it does not', async () => {
    const queue = new ConversationQueue<string>();
    queue.add('ann', 'ask');
    const turns: string[][] = [];
    await queue.run(1, async (_conversation, items) => {
      turns.push(items);
      if (items[0] === 'ask') {
        for (const item of ['more', 'and more', '/status', 'later']) queue.add('ann', item);
        turns.push(queue.takeWaiting('ann', (item) => !item.startsWith('/')));
      }
      return true;
    });
    expect(turns).toEqual([['ask'], ['more', 'and more'], ['/status'], ['later']]);
  });
});
