/** What a GroupCommit runs: one call for a whole batch, one result (or Error) per item, in order. */
export interface GroupCommitOptions<I, R> {
  /**
   * Writes all items with one statement (one transaction) and returns their results in item order;
   * an Error in the array fails that item alone. It must throw only when nothing was committed:
   * a throw may make the items run again on their own.
   */
  flush(items: I[]): Promise<Array<R | Error>>;
  /** Writes one item alone, after its batch failed; by default `flush([item])`. */
  flushOne?(item: I): Promise<R>;
  /**
   * Whether a batch's failure may be the fault of one of its items (a constraint, a bad value), so
   * each item is retried on its own. Otherwise (the database unreachable, say) every item fails
   * with the batch's error, as it would have alone. Default: every failure.
   */
  isolate?(err: unknown): boolean;
  /** Most items in one flush (default 500). */
  maxBatchSize?: number;
  /**
   * Most flushes running at once (default 4). While all are busy, submissions keep joining the
   * waiting batch, so batches grow with the write latency instead of queueing for connections.
   */
  maxInFlight?: number;
}

interface Entry<I, R> {
  item: I;
  resolve(result: R): void;
  reject(err: unknown): void;
}

/**
 * Group commit: items submitted while one turn of the event loop handles incoming requests (the
 * flush waits for `setImmediate`, like the row loader's batches) are written by one `flush` call,
 * one statement and one commit, and each submitter gets its own result once that commit is done.
 * Under load N concurrent writes cost one round trip and one WAL flush instead of N; a lone write
 * waits one turn. If the batch fails and `isolate` says an item may be at fault, every item is
 * written on its own, so only the bad one fails, with the error it would have had alone.
 */
export class GroupCommit<I, R> {
  private open: Array<Entry<I, R>> = [];
  private readonly full: Array<Array<Entry<I, R>>> = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatchSize: number;
  private readonly maxInFlight: number;

  constructor(private readonly options: GroupCommitOptions<I, R>) {
    this.maxBatchSize = Math.max(1, options.maxBatchSize ?? 500);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 4);
  }

  /** Resolves with this item's result after the commit of its batch; rejects with its own failure. */
  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.open.push({ item, resolve, reject });
      if (this.open.length >= this.maxBatchSize) {
        this.full.push(this.open);
        this.open = [];
      }
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // After the I/O phase: the requests that arrived together are in the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight) {
      let batch = this.full.shift();
      if (!batch && this.open.length) {
        batch = this.open;
        this.open = [];
      }
      if (!batch) return;
      this.inFlight++;
      void this.run(batch).finally(() => {
        this.inFlight--;
        if (this.full.length || this.open.length) this.schedule();
      });
    }
  }

  private async run(batch: Array<Entry<I, R>>): Promise<void> {
    let results: Array<R | Error>;
    try {
      results = await this.options.flush(batch.map((e) => e.item));
      if (results.length !== batch.length) {
        throw new Error(`group commit: flush returned ${results.length} results for ${batch.length} items`);
      }
    } catch (err) {
      if (batch.length > 1 && (this.options.isolate?.(err) ?? true)) {
        await Promise.all(batch.map((e) => this.runOne(e)));
      } else for (const e of batch) e.reject(err);
      return;
    }
    batch.forEach((e, i) => settle(e, results[i]));
  }

  private async runOne(e: Entry<I, R>): Promise<void> {
    try {
      if (this.options.flushOne) e.resolve(await this.options.flushOne(e.item));
      else settle(e, (await this.options.flush([e.item]))[0]);
    } catch (err) {
      e.reject(err);
    }
  }
}

function settle<I, R>(e: Entry<I, R>, result: R | Error): void {
  if (result instanceof Error) e.reject(result);
  else e.resolve(result);
}
