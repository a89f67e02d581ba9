/**
 * The answers the API's requests wait for, keyed by the message they answer (peer, conversation,
 * request id). The agent's reply arrives through the channel's `send` and its progress through
 * `draft`; a request waits here for them. Answers are kept (the newest MAX_KEPT) so that a
 * retried request with the same id gets the same answer instead of a second turn; the keeping is
 * in memory, so after an xgw restart a retry waits for the answer of the (single) turn again.
 */

const MAX_KEPT = 1000;

export interface AnswerWatch {
  /** The text so far, each time it grows (from drafts). */
  onProgress?(text: string): void;
  signal: AbortSignal;
}

/** An answer, and when it came (Unix seconds): a retried request is answered with both unchanged. */
export interface Answer {
  text: string;
  created: number;
}

interface Waiting {
  resolve(answer: Answer): void;
  watch: AnswerWatch;
}

export class ApiAnswers {
  private readonly kept = new Map<string, Answer>();
  private readonly waiting = new Map<string, Set<Waiting>>();

  static key(peerId: string, conversationId: string, messageId: string): string {
    return JSON.stringify([peerId, conversationId, messageId]);
  }

  /** The answer, once it came (at once if it did before); rejects when the watch's signal aborts. */
  wait(key: string, watch: AnswerWatch): Promise<Answer> {
    const known = this.kept.get(key);
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      if (watch.signal.aborted) return reject(watch.signal.reason);
      let set = this.waiting.get(key);
      if (!set) {
        set = new Set();
        this.waiting.set(key, set);
      }
      const entry: Waiting = { resolve, watch };
      set.add(entry);
      const forget = (): void => {
        set.delete(entry);
        if (set.size === 0 && this.waiting.get(key) === set) this.waiting.delete(key);
      };
      watch.signal.addEventListener(
        'abort',
        () => {
          forget();
          reject(watch.signal.reason);
        },
        { once: true },
      );
      entry.resolve = (answer) => {
        forget();
        resolve(answer);
      };
    });
  }

  isAnswered(key: string): boolean {
    return this.kept.has(key);
  }

  progress(key: string, text: string): void {
    for (const entry of this.waiting.get(key) ?? []) entry.watch.onProgress?.(text);
  }

  answer(key: string, text: string, now = Date.now()): void {
    const answer = { text, created: Math.floor(now / 1000) };
    this.kept.delete(key);
    this.kept.set(key, answer);
    if (this.kept.size > MAX_KEPT) this.kept.delete(this.kept.keys().next().value as string);
    for (const entry of [...(this.waiting.get(key) ?? [])]) entry.resolve(answer);
  }
}
