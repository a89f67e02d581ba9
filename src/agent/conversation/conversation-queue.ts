/**
 * A run's work, by conversation: the batch it popped, and the inbox messages that join while it
 * runs. At most `concurrency` conversations are answered at once, each strictly in inbox order;
 * a free slot takes the conversation whose oldest waiting message is oldest. A message that
 * arrives while its conversation is being answered waits behind the current turn.
 *
 * Without this, a run answered only the batch it started with: a burst that reached the inbox
 * over a second became batch after batch, each as slow as its busiest conversation, with slots
 * left idle in between.
 */
export class ConversationQueue<T> {
  /** Insertion order is the order conversations are taken up in. */
  private readonly waiting = new Map<string, T[]>();
  private readonly active = new Set<string>();
  /** Conversations whose handler said stop: what else comes for them is left for the next run. */
  private readonly halted = new Set<string>();
  /** Slots waiting for something to change: an item taken, a conversation done, the end. */
  private waiters: (() => void)[] = [];
  private closed = false;

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

  /** False once closed, or once the run has ended. */
  get accepting(): boolean {
    return !this.closed;
  }

  /**
   * Answers until everything taken is done. `handle` returns false to stop its conversation here:
   * its later items are dropped, unhandled. `idle` is called when a slot is free and nothing waits,
   * before the slot waits for something to change (a chance to look for new items at once).
   */
  async run(concurrency: number, handle: (conversation: string, item: T) => Promise<boolean>, idle?: () => void): Promise<void> {
    const worker = async (): Promise<void> => {
      for (;;) {
        let conversation = this.nextReady();
        if (conversation === undefined) {
          idle?.();
          conversation = this.nextReady();
        }
        if (conversation === undefined) {
          if (this.active.size === 0) {
            // Nothing runs and nothing waits: the run is over, and takes nothing more.
            this.closed = true;
            this.notify();
            return;
          }
          await new Promise<void>((resolve) => this.waiters.push(resolve));
          continue;
        }
        await this.answer(conversation, handle);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  private nextReady(): string | undefined {
    for (const conversation of this.waiting.keys()) if (!this.active.has(conversation)) return conversation;
    return undefined;
  }

  private async answer(conversation: string, handle: (conversation: string, item: T) => Promise<boolean>): Promise<void> {
    this.active.add(conversation);
    try {
      const queue = this.waiting.get(conversation)!;
      while (queue.length > 0) {
        const item = queue.shift()!;
        if (!(await handle(conversation, item))) {
          this.halted.add(conversation);
          break;
        }
      }
    } finally {
      this.waiting.delete(conversation);
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
