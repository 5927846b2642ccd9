import type { Knex } from 'knex';

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * `p`'s value, or `fallback` when `ms` pass first. The timer ends with the race: one left behind
 * keeps the test file's process alive until it fires, after the file's last test (a 20 s bound on
 * a process exit held its file 20 s past its end, and a slot of the run with it).
 */
export function orAfter<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  return Promise.race([p, bound]).finally(() => clearTimeout(timer));
}

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

/**
 * Waits until at least `n` backends of `db`'s database wait on a lock (row or advisory): requests
 * parked where a test holds a lock, so it can line up a race and release it. Fails after 10 s.
 */
export async function lockWaiters(db: Knex, n: number): Promise<void> {
  await eventually(
    async () =>
      (
        await db.raw(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
      ).rows[0].n >= n,
    10_000,
    10,
  );
}
