import test from 'ava';
import { GroupCommit } from '../../shared/groupCommit';

/** A GroupCommit over numbers whose flush doubles them and records each batch it was given. */
function doubler(opts: { maxBatchSize?: number; fail?: (items: number[]) => unknown } = {}) {
  const batches: number[][] = [];
  const commit = new GroupCommit<number, number>({
    flush: async (items) => {
      batches.push(items);
      await new Promise((r) => setTimeout(r, 5));
      const err = opts.fail?.(items);
      if (err) throw err;
      return items.map((i) => i * 2);
    },
    isolate: (err) => (err as Error).message !== 'down',
    maxBatchSize: opts.maxBatchSize,
  });
  return { commit, batches };
}

test('items submitted in one turn are flushed together; each submitter gets its own result', async (t) => {
  const { commit, batches } = doubler();
  const results = await Promise.all([1, 2, 3, 4].map((i) => commit.submit(i)));
  t.deepEqual(results, [2, 4, 6, 8]);
  t.deepEqual(batches, [[1, 2, 3, 4]]);
  // A later submission is another batch.
  t.is(await commit.submit(5), 10);
  t.deepEqual(batches, [[1, 2, 3, 4], [5]]);
});

test('a batch holds at most maxBatchSize items', async (t) => {
  const { commit, batches } = doubler({ maxBatchSize: 3 });
  const results = await Promise.all([1, 2, 3, 4, 5, 6, 7].map((i) => commit.submit(i)));
  t.deepEqual(results, [2, 4, 6, 8, 10, 12, 14]);
  t.deepEqual(batches, [[1, 2, 3], [4, 5, 6], [7]]);
});

test('while maxInFlight flushes run, submissions gather into the next batch', async (t) => {
  const batches: number[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const commit = new GroupCommit<number, number>({
    flush: async (items) => {
      batches.push(items);
      await gate;
      return items.map((i) => i * 2);
    },
    maxInFlight: 1,
  });
  const first = commit.submit(1);
  await new Promise((r) => setImmediate(r));
  // The first flush is running: these wait for it, over several turns, then go together.
  const rest = [2, 3, 4].map((i) => commit.submit(i));
  await new Promise((r) => setImmediate(r));
  const more = commit.submit(5);
  await new Promise((r) => setImmediate(r));
  t.deepEqual(batches, [[1]]);
  release();
  t.deepEqual(await Promise.all([first, ...rest, more]), [2, 4, 6, 8, 10]);
  t.deepEqual(batches, [[1], [2, 3, 4, 5]]);
});

test('a failed batch is retried item by item: only the bad item fails, with its own error', async (t) => {
  const { commit, batches } = doubler({ fail: (items) => items.includes(13) && new Error(`bad: ${items.join(',')}`) });
  const settled = await Promise.allSettled([11, 12, 13, 14].map((i) => commit.submit(i)));
  t.deepEqual(
    settled.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
    [22, 24, 'bad: 13', 28],
  );
  t.deepEqual(batches, [[11, 12, 13, 14], [11], [12], [13], [14]]);
});

test('a failure no item can cause (isolate says no) fails every item with it, without retries', async (t) => {
  const { commit, batches } = doubler({ fail: () => new Error('down') });
  const settled = await Promise.allSettled([1, 2, 3].map((i) => commit.submit(i)));
  t.true(settled.every((r) => r.status === 'rejected' && (r.reason as Error).message === 'down'));
  t.is(batches.length, 1);
});

test('an Error in the results fails that item only', async (t) => {
  const commit = new GroupCommit<number, number>({
    flush: async (items) => items.map((i) => (i < 0 ? new Error(`negative ${i}`) : i)),
  });
  const settled = await Promise.allSettled([1, -2, 3].map((i) => commit.submit(i)));
  t.deepEqual(
    settled.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
    [1, 'negative -2', 3],
  );
});
