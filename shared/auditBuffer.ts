import type { Knex } from 'knex';
import { AuditInput, auditRow, insertAuditRows } from './audit';
import type { Logger } from './logger';

/** Tuning of an AuditBuffer; the defaults suit a service process. */
export interface AuditBufferOptions {
  /** How long an event waits for others to share its insert (ms). */
  flushMs?: number;
  /** Most events in one insert. */
  maxBatch?: number;
  /** Most events held while the database refuses them; beyond it the oldest are logged and let go. */
  maxPending?: number;
  /** First retry delay after a failed insert (ms); it doubles up to 5 s. */
  retryMs?: number;
}

type Row = Record<string, unknown>;

/** Errors that come from a row itself (a value too long, a constraint), not from the database being away. */
const isDataError = (err: unknown) => /^2[23]/.test(String((err as { code?: unknown }).code ?? ''));

/**
 * Buffered writer of audit events that are not part of a request's own transaction (a failed
 * sign-in, a session opened by the web app): `record()` returns at once, with the event's time and
 * geo-IP fields fixed then, and the buffer writes what gathered with one multi-row INSERT every
 * `flushMs` (or at `maxBatch` events). The request never waits for the database and never fails
 * because of its audit event.
 *
 * A failed insert is retried with backoff (250 ms doubling to 5 s) and the events keep their order
 * and their original created_at. An insert refused because of one row (class 22/23 errors) is
 * retried row by row, and only a row refused on its own is given up, logged at error level with
 * its content. While the database is away at most `maxPending` events are held in memory; past that
 * the oldest are logged at error level (never dropped silently). `close()` writes what is left.
 */
export class AuditBuffer {
  private pending: Row[] = [];
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private failures = 0;
  private closed = false;
  private readonly flushMs: number;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private readonly retryMs: number;

  constructor(
    private readonly deps: { db: Knex; logger: Logger },
    options: AuditBufferOptions = {},
  ) {
    this.flushMs = options.flushMs ?? 25;
    this.maxBatch = options.maxBatch ?? 500;
    this.maxPending = options.maxPending ?? 100_000;
    this.retryMs = options.retryMs ?? 250;
  }

  /** Events waiting to be written. */
  get size(): number {
    return this.pending.length;
  }

  /** Queues one event; never throws, never waits. */
  record(input: AuditInput): void {
    let row: Row;
    try {
      row = { ...auditRow(input), created_at: new Date() };
    } catch (err) {
      this.deps.logger.error({ err: (err as Error).message, event: input }, 'audit event not recordable');
      return;
    }
    this.pending.push(row);
    if (this.pending.length > this.maxPending) {
      const lost = this.pending.splice(0, this.pending.length - this.maxPending);
      this.deps.logger.error({ lost: lost.length, events: lost }, 'audit buffer full: oldest events not written');
    }
    if (this.closed) return;
    if (this.pending.length >= this.maxBatch && !this.running) this.runNow();
    else this.schedule(this.flushMs);
  }

  /** Writes everything pending now; rejects (keeping the events) when the database refuses. For tests and shutdown. */
  async flush(): Promise<void> {
    await this.exclusive(async () => {
      while (this.pending.length) await this.writeBatch();
    });
  }

  /** Writes never overlap: a flush waits for the timer's run and the other way round. */
  private lock: Promise<unknown> = Promise.resolve();
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  /** Stops the timer and writes what is left (a failure is logged with the events it leaves). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    try {
      await this.flush();
    } catch (err) {
      this.deps.logger.error(
        { err: (err as Error).message, lost: this.pending.length, events: this.pending },
        'audit events not written at shutdown',
      );
    }
  }

  private schedule(ms: number): void {
    if (this.timer || this.running || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.runNow();
    }, ms);
    this.timer.unref();
  }

  private runNow(): void {
    if (this.running) return;
    this.running = this.exclusive(() => this.run()).finally(() => {
      this.running = undefined;
      if (this.pending.length && !this.closed) {
        const delay = this.failures ? Math.min(5000, this.retryMs * 2 ** (this.failures - 1)) : this.flushMs;
        this.schedule(delay);
      }
    });
  }

  private async run(): Promise<void> {
    try {
      while (this.pending.length) await this.writeBatch();
      if (this.failures) this.deps.logger.info({ failedAttempts: this.failures }, 'audit events written again');
      this.failures = 0;
    } catch (err) {
      this.failures++;
      const log = { err: (err as Error).message, pending: this.pending.length, attempt: this.failures };
      if (this.failures === 1) this.deps.logger.warn(log, 'could not write audit events; retrying');
      else this.deps.logger.debug(log, 'could not write audit events; retrying');
    }
  }

  /** Writes the oldest batch; on failure the batch stays at the front (order kept) and this throws. */
  private async writeBatch(): Promise<void> {
    const batch = this.pending.slice(0, this.maxBatch);
    try {
      await insertAuditRows(batch, this.deps.db);
    } catch (err) {
      if (!isDataError(err)) throw err;
      await this.writeOneByOne(batch);
    }
    this.dropWritten(batch);
  }

  /**
   * Takes written rows off the front of `pending`. Not by count: events recorded meanwhile were
   * appended, but a full buffer may also have let go of the oldest, the batch's own first rows, so
   * the batch may now be shorter at the front and the rows after it are new ones not yet written.
   */
  private dropWritten(written: Row[]): void {
    const sent = new Set(written);
    let n = 0;
    while (n < this.pending.length && sent.has(this.pending[n]!)) n++;
    this.pending.splice(0, n);
  }

  /** A batch refused for its data: each row alone; a row refused alone is logged and let go. */
  private async writeOneByOne(batch: Row[]): Promise<void> {
    for (let i = 0; i < batch.length; i++) {
      try {
        await insertAuditRows([batch[i]!], this.deps.db);
      } catch (err) {
        if (!isDataError(err)) {
          // The database went away midway: keep the rest (the written ones leave the front).
          this.dropWritten(batch.slice(0, i));
          throw err;
        }
        this.deps.logger.error({ err: (err as Error).message, event: batch[i] }, 'audit event refused by the database');
      }
    }
  }
}
