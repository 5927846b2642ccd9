import type { Logger } from './logger';

/** How often the same failure is logged again while it lasts. */
const REPEAT_LOG_INTERVAL_MS = 10_000;
/** Distinct failures remembered at once (a bound: an outage has one or a few). */
const MAX_REMEMBERED = 100;

export interface OutageLogOptions {
  /** How often one failure is logged again while it lasts, with the count it stands for. */
  intervalMs?: number;
  /**
   * How long nothing may have failed before an answer counts as the end of the outage. 0: the
   * first answer does (a Redis connection's 'ready'). Where failures and answers interleave (a
   * database pool, some of whose requests still fail while others are answered), a short quiet
   * time keeps a flapping dependency from writing a "reachable again" line per failure.
   */
  quietMs?: number;
}

/**
 * The log of one process's failures to reach one dependency (Redis, PostgreSQL, the realtime
 * process). An outage fails every request, connection and retry: logged one line each, a few
 * seconds of it wrote thousands of lines. Here each distinct failure (its message and reason) is
 * logged at once, then at most every `intervalMs` with how many occurrences it stands for
 * (`repeated`); the first answer after failures (once nothing failed for `quietMs`) logs one
 * "<dependency> reachable again" line (info) with the occurrences folded since the last line
 * (`repeated`) and how long it was away (`outageMs`: from the first failure to the answer).
 *
 * Report only failures to reach the dependency here: a fault of this service (a 500) is logged
 * per occurrence by its caller.
 */
export class OutageLog {
  private readonly recent = new Map<string, { loggedAt: number; folded: number }>();
  /** Occurrences folded under failures forgotten for the MAX_REMEMBERED bound (still reported). */
  private forgotten = 0;
  /** When the current outage's first failure happened; undefined while the dependency answers. */
  private since: number | undefined;
  /** Failures so far, and how many there had been at the last answer: equal when none failed since. */
  private failures = 0;
  private answeredAt = { failures: -1, at: 0 };
  private lastFailureAt = 0;
  private confirming: NodeJS.Timeout | undefined;
  private readonly intervalMs: number;
  private readonly quietMs: number;

  constructor(
    private readonly logger: Logger,
    /** Names the dependency in the recovery line ("database" → "database reachable again"). */
    readonly dependency: string,
    opts: OutageLogOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? REPEAT_LOG_INTERVAL_MS;
    this.quietMs = opts.quietMs ?? 0;
  }

  /** Whether a failure was reported and no answer has ended it yet. */
  get down(): boolean {
    return this.since !== undefined;
  }

  /**
   * Reports a failure: logged as `msg` with `fields` (at `level`) unless the same `msg` and
   * `reason` were logged less than `intervalMs` ago, in which case it is counted.
   */
  failure(msg: string, reason: string, fields: Record<string, unknown> = {}, level: 'warn' | 'error' = 'warn'): void {
    const now = Date.now();
    this.since ??= now;
    this.failures++;
    this.lastFailureAt = now;
    const key = `${msg}\u0000${reason}`;
    const seen = this.recent.get(key);
    if (seen && now - seen.loggedAt < this.intervalMs) {
      seen.folded++;
      return;
    }
    this.logger[level]({ ...fields, ...(seen ? { repeated: seen.folded } : {}) }, msg);
    if (!seen && this.recent.size >= MAX_REMEMBERED) {
      for (const e of this.recent.values()) this.forgotten += e.folded;
      this.recent.clear();
    }
    this.recent.set(key, { loggedAt: now, folded: 0 });
  }

  /** Reports that the dependency answered (a connection ready, a statement answered): ends an outage. */
  answered(): void {
    if (this.since === undefined) return;
    if (this.answeredAt.failures !== this.failures) this.answeredAt = { failures: this.failures, at: Date.now() };
    this.confirm();
  }

  /** Logs the end of the outage once an answer came after the last failure and `quietMs` passed since it. */
  private confirm(): void {
    if (this.since === undefined || this.answeredAt.failures !== this.failures) return;
    const wait = this.lastFailureAt + this.quietMs - Date.now();
    if (wait > 0) {
      this.confirming ??= setTimeout(() => {
        this.confirming = undefined;
        this.confirm();
      }, wait).unref();
      return;
    }
    let repeated = this.forgotten;
    for (const e of this.recent.values()) repeated += e.folded;
    const outageMs = Math.max(0, this.answeredAt.at - this.since);
    this.recent.clear();
    this.forgotten = 0;
    this.since = undefined;
    this.logger.info({ repeated, outageMs }, `${this.dependency} reachable again`);
  }
}
