/**
 * A run's work, by conversation: the batch it popped, and the inbox messages that join while it
 * runs. At most `concurrency` conversations are answered at once, each strictly in inbox order;
 * a free slot takes the conversation whose oldest waiting message is oldest. A message that
 * arrives while its conversation is being answered waits behind the current turn.
 *
 * A turn takes one message or several (the conversation's queue mode plans it: queue-mode.ts),
 * and may wait before it begins (collect's debounce) without holding a slot meanwhile.
 *
 * Without this, a run answered only the batch it started with: a burst that reached the inbox
 * over a second became batch after batch, each as slow as its busiest conversation, with slots
 * left idle in between.
 */
export interface TurnPlan {
  /** How many of the waiting items (from the first) the turn takes; at least 1. */
  count: number;
  /** Epoch ms before which the turn does not begin; 0: at once. */
  notBefore: number;
}

/** Plans a conversation's next turn from what waits for it (never empty). */
export type PlanTurn<T> = (conversation: string, waiting: readonly T[]) => TurnPlan;

const ONE_AT_ONCE: TurnPlan = { count: 1, notBefore: 0 };

export class ConversationQueue<T> {
  /** Insertion order is the order conversations are taken up in. */
  private readonly waiting = new Map<string, T[]>();
  private readonly active = new Set<string>();
  /** Conversations whose handler said stop: what else comes for them is left for the next run. */
  private readonly halted = new Set<string>();
  /** Slots waiting for something to change: an item taken, a conversation done, the end. */
  private waiters: (() => void)[] = [];
  private closed = false;

  /** `plan`: default, one item a turn, at once. `now`: the clock `notBefore` is read against. */
  constructor(
    private readonly plan: PlanTurn<T> = () => ONE_AT_ONCE,
    private readonly now: () => number = Date.now,
  ) {}

  /** Returns false when the item was not taken: the run has ended, closed, or halted its conversation. */
  add(conversation: string, item: T): boolean {
    if (this.closed || this.halted.has(conversation)) return false;
    const queue = this.waiting.get(conversation);
    if (queue) queue.push(item);
    else this.waiting.set(conversation, [item]);
    this.notify();
    return true;
  }

  /** Takes nothing more; what was taken is still answered. */
  close(): void {
    this.closed = true;
    this.notify();
  }

  /**
   * Takes the items at the head of a conversation's queue that `accept` takes, up to the first it
   * does not: for its running turn (queue mode steer), which answers them.
   */
  takeWaiting(conversation: string, accept: (item: T) => boolean): T[] {
    const queue = this.waiting.get(conversation) ?? [];
    let count = 0;
    while (count < queue.length && accept(queue[count]!)) count++;
    return queue.splice(0, count);
  }

  /** False once closed, or once the run has ended. */
  get accepting(): boolean {
    return !this.closed;
  }

  /**
   * Answers until everything taken is done. `handle` answers one turn's items, and returns false
   * to stop its conversation there: its later items are dropped, unhandled. `idle` is called when
   * a slot is free and nothing is ready, before the slot waits for something to change (a chance
   * to look for new items at once).
   */
  async run(concurrency: number, handle: (conversation: string, items: T[]) => Promise<boolean>, idle?: () => void | Promise<void>): Promise<void> {
    const worker = async (): Promise<void> => {
      for (;;) {
        let next = this.nextReady();
        if (next.conversation === undefined) {
          await idle?.();
          next = this.nextReady();
        }
        if (next.conversation !== undefined) {
          await this.answer(next.conversation, next.count, handle);
          continue;
        }
        if (this.active.size === 0 && next.wakeAt === undefined) {
          // Nothing runs and nothing waits: the run is over, and takes nothing more.
          this.closed = true;
          this.notify();
          return;
        }
        await this.change(next.wakeAt);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  /** The first conversation whose turn may begin now, or the earliest time one may. */
  private nextReady(): { conversation?: string; count: number; wakeAt?: number } {
    let wakeAt: number | undefined;
    for (const [conversation, queue] of this.waiting) {
      if (this.active.has(conversation) || queue.length === 0) continue;
      const plan = this.plan(conversation, queue);
      if (plan.notBefore <= this.now()) return { conversation, count: Math.max(1, plan.count) };
      wakeAt = Math.min(wakeAt ?? plan.notBefore, plan.notBefore);
    }
    return { count: 0, wakeAt };
  }

  /** Waits for something to change, or until `wakeAt` (a turn may begin then). */
  private async change(wakeAt: number | undefined): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      if (wakeAt !== undefined) timer = setTimeout(() => this.notify(), Math.max(0, wakeAt - this.now()));
    });
    clearTimeout(timer);
  }

  private async answer(conversation: string, count: number, handle: (conversation: string, items: T[]) => Promise<boolean>): Promise<void> {
    this.active.add(conversation);
    const queue = this.waiting.get(conversation)!;
    try {
      if (!(await handle(conversation, queue.splice(0, count)))) {
        this.halted.add(conversation);
        queue.length = 0;
      }
    } finally {
      if (queue.length === 0) this.waiting.delete(conversation);
      this.active.delete(conversation);
      this.notify();
    }
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
