/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `probe` until it returns a truthy value (a condition, or the thing waited for) and returns
 * that value; fails after `timeoutMs`.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  timeoutMs = 5000,
  stepMs = 20,
): Promise<Exclude<T, undefined | null | false | 0 | ''>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v as Exclude<T, undefined | null | false | 0 | ''>;
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(stepMs);
  }
}

/** Runs `fn` and returns its result with the time it took (ms). */
export async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await fn();
  return { result, ms: performance.now() - start };
}
