import type { Logger } from './logger';

/** How long releasing PostgreSQL and Redis may take at shutdown, all steps together. */
export const RELEASE_BUDGET_MS = 3000;
/** What a step gets at least, however much of the budget the ones before it used (a last write, a disconnect). */
const STEP_FLOOR_MS = 200;

/**
 * The release steps of a shutdown (last writes, closing pools and connections) under one deadline.
 * A step that talks to a PostgreSQL or Redis server that stopped answering would wait for as long
 * as the server hangs (a process still there 20 s or minutes after SIGTERM, then SIGKILLed by PM2):
 * past its share of the deadline it is logged and left behind, and the shutdown goes on. What such a
 * step leaves undone is not lost: outbox rows stay for another relay or the next start, jobs stay in
 * Redis for another worker. A step never throws; its error is logged.
 */
export class ReleaseDeadline {
  private readonly until: number;

  constructor(
    private readonly logger: Logger,
    budgetMs = RELEASE_BUDGET_MS,
  ) {
    this.until = Date.now() + budgetMs;
  }

  /** Runs `release`, waiting at most for what is left of the budget (at least STEP_FLOOR_MS). True when it finished. */
  async step(what: string, release: () => Promise<unknown> | unknown): Promise<boolean> {
    const ms = Math.max(STEP_FLOOR_MS, this.until - Date.now());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), ms);
      timer.unref();
    });
    try {
      const outcome = await Promise.race([Promise.resolve().then(release), late]);
      if (outcome !== 'late') return true;
      this.logger.warn({ step: what, waitedMs: ms }, 'shutdown step did not finish in time; going on without it');
      return false;
    } catch (err) {
      this.logger.warn({ step: what, err: (err as Error).message }, 'shutdown step failed');
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}
