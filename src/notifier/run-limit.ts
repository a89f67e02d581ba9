/**
 * The machine's share for handlers and timer commands: at most `limit` run at once, however many
 * agents have work (100 messages to 100 agents once started 100 `agent run` processes together).
 * The rest wait, fairly: each group (an agent, or the timers) has its own queue in arrival order,
 * and the groups take turns, so an agent with a hundred busy conversations cannot starve another
 * with one message.
 */
export interface RunRequest {
  /** Whose turn it counts against: the agent of a thread, `timers` for timer commands. */
  group: string;
  /** One request per key waits at a time (a subscription, a timer): a second one is dropped. */
  key: string;
  /**
   * Starts the run, looking at the world as it is now (the work may be gone by the time a place
   * frees). Returns true when it started something that calls `release` once it ends.
   */
  start: () => boolean;
}

export class RunLimit {
  private running = 0;
  /** Waiting requests by group; Map order is the groups' turn order. */
  private readonly waiting = new Map<string, Map<string, RunRequest>>();

  constructor(private places: number) {}

  get limit(): number {
    return this.places;
  }

  /** A new limit (a reload): more places start waiting requests now; fewer let the runs under way finish. */
  resize(limit: number): void {
    this.places = limit;
    this.drain();
  }

  /** Starts the request now if a place is free and nobody waits before it; otherwise queues it. */
  request(request: RunRequest): void {
    if (this.running < this.places && this.waiting.size === 0) {
      this.tryStart(request);
      return;
    }
    const queue = this.waiting.get(request.group) ?? new Map<string, RunRequest>();
    if (!queue.has(request.key)) queue.set(request.key, request);
    this.waiting.set(request.group, queue);
    this.drain();
  }

  /** A run ended: its place goes to the next waiting group in turn. */
  release(): void {
    this.running = Math.max(0, this.running - 1);
    this.drain();
  }

  /** Whether a request with this key waits for a place. */
  isWaiting(group: string, key: string): boolean {
    return this.waiting.get(group)?.has(key) === true;
  }

  get active(): number {
    return this.running;
  }

  get queued(): number {
    let count = 0;
    for (const queue of this.waiting.values()) count += queue.size;
    return count;
  }

  private drain(): void {
    while (this.running < this.places) {
      const next = this.takeNext();
      if (!next) return;
      this.tryStart(next);
    }
  }

  /** The first request of the group whose turn it is; the group then goes to the end of the line. */
  private takeNext(): RunRequest | undefined {
    for (const [group, queue] of this.waiting) {
      this.waiting.delete(group);
      const [key, request] = queue.entries().next().value ?? [];
      if (key === undefined || request === undefined) continue;
      queue.delete(key);
      if (queue.size > 0) this.waiting.set(group, queue);
      return request;
    }
    return undefined;
  }

  private tryStart(request: RunRequest): boolean {
    // Counted before it starts: a start that finishes synchronously releases a place it holds.
    this.running++;
    let started = false;
    try {
      started = request.start();
    } finally {
      if (!started) this.running--;
    }
    return started;
  }
}

/** The default limit: twice the cores, at least four. */
export function defaultRunLimit(cores: number): number {
  return Math.max(4, 2 * cores);
}
