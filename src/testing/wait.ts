/**
 * Bounded waiting for a condition, the one way tests (and the benchmarks, which cannot import
 * vitest) wait for something to happen instead of sleeping.
 */

/** Polls `check` until it returns a truthy value; fails after `timeoutMs`. */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 15_000, intervalMs = 20): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
