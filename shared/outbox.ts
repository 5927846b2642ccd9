import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { forgetLatestGps, recordLatestGps } from './caches/gpsLatest';
import { publishConfigChange } from './caches/systemConfig';
import { markGeofencePending } from './commands/evaluateGeofences';
import type { Config } from './config';
import { transaction } from './db';
import { ADMIN_AUDIT_WS_CHANNEL, type AuthInvalidation, type EventBus, type ServerPush } from './events';
import { AuditEvent } from './models/AuditEvent';
import { presentAuditEvent } from './presenters/auditEvent';
import type { Logger } from './logger';
import { GPS_POINT_COLUMNS, GpsPointRow, presentGpsPoint } from './presenters/gpsPoint';
import { emailJobId, type PasswordResetJob, type Queues } from './queues';

/*
 * Transactional outbox: side effects on Redis that must not be lost are written as rows of
 * side_effect_outbox in the same transaction (or statement) as the data they are about, and a relay
 * carries them out and deletes them. A request never waits for Redis to do them, and what was
 * accepted while Redis was down happens once it is back: late, but in order.
 *
 * Every api and workers process runs a relay (`ServiceContext.outbox`, started by the entry point).
 * One relay works at a time: a pass takes a transaction-scoped advisory lock, claims the oldest rows
 * (DELETE … FOR UPDATE SKIP LOCKED … RETURNING), carries them out on Redis and commits. Passes are
 * therefore serial and rows leave in id order, which is commit order for a client that waits for
 * each answer; a relay that finds the lock taken retries shortly, so draining goes on while any
 * relay process lives. The writer wakes its own relay after its commit, which runs a pass 10 ms
 * later for everything written meanwhile (no LISTEN/NOTIFY: a NOTIFY serialises committing
 * transactions); a slow poll picks up rows whose writer died before waking it.
 *
 * Delivery is at least once: the rows are deleted by the commit that follows the Redis work, so a
 * relay that dies (or fails) between publishing and committing leaves them, and the next pass
 * carries them out again. Receivers tolerate this: a gpsUpdate repeats a point already seen,
 * geofence evaluation is idempotent (state per device and geofence, points applied in order), and
 * an email job is deduplicated by its job id and skips a mail that is no longer queued.
 *
 * Pushes go out on Redis pub/sub, which keeps nothing for a subscriber that is away. After the
 * relay's connection to Redis closed (a restart drops every subscription with it), the backlog is
 * held back until as many realtime instances are subscribed again as received the last pushes,
 * for at most RESUBSCRIBE_GRACE_MS: each instance reconnects on its own schedule, and a push
 * published before it is back would never reach its clients.
 */

export const SIDE_EFFECT_OUTBOX = 'side_effect_outbox';

/** What a row carries, by kind: ids, not rows (the relay reads what it needs). */
export interface OutboxPayloads {
  /** Freshly inserted GPS points, in acceptance order: gpsUpdate pushes, latest-point cache, geofence evaluation. */
  gpsPoints: { ids: string[] };
  /** One row of email_outbox, for the `email` queue. */
  email: { outboxId: string };
  /** Freshly written audit events: `auditEvent` pushes on `admin:audit` (the live feed). */
  auditEvents: { ids: string[] };
  /** A password reset asked for (the passwordResets job looks the address up, off the request). */
  passwordReset: PasswordResetJob;
  /**
   * A credential invalidation that could not be published when its change committed (Redis down
   * or hung): published again once Redis answers, so no instance keeps serving, and no open
   * WebSocket keeps holding, a credential the change narrowed.
   */
  authInvalidation: AuthInvalidation;
  /**
   * Latest-point cache entries a GPS delete could not drop (Redis down or hung): dropped once Redis
   * answers, so a deleted point is not served as the current position after the outage.
   */
  gpsLatestForget: { deviceIds: Array<string | null> };
  /**
   * A system config change that could not be announced (Redis down or hung): announced once Redis
   * answers, so no process keeps the old value in its cache after the outage.
   */
  systemConfigChange: { key: string };
}
export type OutboxKind = keyof OutboxPayloads;

/** Kinds this version carries out; a relay of an older version leaves newer kinds to newer relays. */
const KINDS: OutboxKind[] = [
  'gpsPoints',
  'email',
  'auditEvents',
  'passwordReset',
  'authInvalidation',
  'gpsLatestForget',
  'systemConfigChange',
];
/** KINDS as one Postgres array literal (knex would expand a JS array into a list of parameters). */
const KINDS_ARRAY = `{${KINDS.join(',')}}`;

/** Advisory lock key held by the relay that is working (an arbitrary constant, per database). */
export const OUTBOX_RELAY_LOCK = 4_735_120_871;

/** Rows one pass claims at most; a batch row may carry up to 1,000 points. */
const CLAIM_ROWS = 200;
/**
 * Items (GPS points and audit events by id, one for any other row) one pass carries out at most:
 * 200 rows of 1,000-point batches are 200,000 points, more than a pass can publish within
 * PASS_REDIS_BUDGET_MS on a busy machine; such a pass rolled back and the next one claimed the same
 * rows again, holding everything behind them. A first row larger than this is still claimed alone.
 */
const CLAIM_ITEMS = 5000;
/** Pushes per PUBLISH script call, and point ids per geofence job. */
const PUBLISH_CHUNK = 1000;
const GEOFENCE_JOB_MAX_IDS = 1000;
/**
 * Delay between a wake and its pass: under load, the rows of many requests share one pass (one
 * PUBLISH script, one geofence job) instead of a transaction and a BullMQ job per request.
 */
const COALESCE_MS = 10;
/** Retry delay when another relay holds the lock (it is draining our rows too, most likely). */
const BUSY_RETRY_MS = 25;
/** Backoff after a failed pass (Redis down), doubling up to the maximum. */
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 2000;
/** Safety poll for rows no relay was woken for (their writer died between commit and wake). */
const POLL_MS = 500;
/**
 * Bound on a pass's Redis work. Commands fail fast on their own; this covers BullMQ, which waits
 * for a queue's first connection without a timeout. A pass cut short rolls back: at least once.
 */
const PASS_REDIS_BUDGET_MS = 5000;
/**
 * After Redis was away, how long the relay holds the backlog back for the realtime instances to
 * subscribe again (each reconnects on its own schedule, within about 2 s). Pub/sub keeps nothing:
 * a push published before an instance is back never reaches its clients.
 */
const RESUBSCRIBE_GRACE_MS = 5000;
/** How often a held-back relay counts the subscribers again. */
const RESUBSCRIBE_POLL_MS = 100;
/** How often an idle relay counts them (a relay that published nothing yet still learns how many to wait for). */
const RECEIVERS_REFRESH_MS = 2000;

/**
 * Writes one side effect inside the caller's transaction: it happens iff the transaction commits.
 * Call `outbox.wake()` of the process's relay after the commit.
 */
export async function writeOutbox<K extends OutboxKind>(trx: Knex, kind: K, payload: OutboxPayloads[K]): Promise<void> {
  await trx(SIDE_EFFECT_OUTBOX).insert({ kind, payload: JSON.stringify(payload) });
}

/**
 * For a side effect Redis did not take (down or hung) after its change committed: keeps it in the
 * outbox, where the relay carries it out once Redis answers, and says so in the log (`what`: what
 * could not be done, as in "could not <what>"). Never throws: a database that cannot take the row
 * either is logged as an error, and the change stands.
 */
export async function deferToOutbox<K extends OutboxKind>(
  deps: { db: Knex; logger: Logger; outbox?: Pick<OutboxRelay, 'wake'> },
  kind: K,
  payload: OutboxPayloads[K],
  failure: unknown,
  what: string,
  context: Record<string, unknown> = {},
): Promise<void> {
  const err = (failure as Error)?.message ?? String(failure);
  try {
    await writeOutbox(deps.db, kind, payload);
    deps.outbox?.wake();
    deps.logger.warn({ ...context, err }, `could not ${what}; it is done once Redis answers`);
  } catch (outboxErr) {
    deps.logger.error(
      { ...context, err, outboxErr: (outboxErr as Error).message },
      `could not ${what}, nor keep it for later`,
    );
  }
}

/** What a relay needs from its process. */
export interface RelayDeps {
  db: Knex;
  redis: Redis;
  bus: Pick<EventBus, 'publishMany' | 'announceAuthInvalidation' | 'wsReceivers'>;
  queues: Pick<Queues, 'enqueue'>;
  config: Pick<Config, 'redisPrefix'>;
  logger: Logger;
}

interface OutboxRow {
  id: string;
  kind: OutboxKind;
  payload: OutboxPayloads[OutboxKind];
}

/** none: nothing waited; done: relayed all it found; more: relayed a full claim, more may wait; busy: another relay works. */
type PassResult = 'none' | 'done' | 'more' | 'busy';

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Moves outbox rows to Redis/BullMQ (see the comment at the top of this file). */
export class OutboxRelay {
  private running?: Promise<void>;
  /** The next run (coalescing, busy or backoff): wakes meanwhile wait for it rather than run early. */
  private timer?: NodeJS.Timeout;
  private poller?: NodeJS.Timeout;
  private again = false;
  private failures = 0;
  private closed = false;
  /** Realtime instances that received the last pushes this relay published (`EventBus.wsReceivers`). */
  private receivers = 0;
  private receiversAt = 0;
  /**
   * Set when the connection to Redis closed while instances were subscribed (Redis restarted, or
   * the network dropped: their subscriptions are gone too): the next pass waits until as many are
   * subscribed again, for at most RESUBSCRIBE_GRACE_MS from when Redis answers (`since`).
   */
  private resubscribe?: { expected: number; since?: number };
  private readonly onRedisClose = () => {
    if (this.receivers > 0) this.resubscribe ??= { expected: this.receivers };
  };

  constructor(private readonly deps: RelayDeps) {}

  /** Starts the safety poll and drains what earlier runs left. */
  start(): void {
    if (this.closed || this.poller) return;
    this.poller = setInterval(() => void this.poll(), POLL_MS);
    this.poller.unref();
    this.deps.redis.on('close', this.onRedisClose);
    this.runNow();
  }

  /** Drains soon; called after a commit that wrote rows. Cheap: wakes within COALESCE_MS share one pass. */
  wake(): void {
    if (this.closed || this.timer) return;
    if (this.running) this.again = true;
    else this.schedule(COALESCE_MS);
  }

  /**
   * Runs passes until the outbox is empty, waiting while another relay holds the lock; rejects
   * when a pass fails (the rows stay). For shutdown and tests.
   */
  async drain(): Promise<void> {
    for (;;) {
      const r = await this.pass();
      if (r === 'none' || r === 'done') return;
      if (r === 'busy') await new Promise((res) => setTimeout(res, BUSY_RETRY_MS));
    }
  }

  /**
   * Stops the relay after a last drain of what this process wrote just before (best effort: what
   * fails stays for another relay or the next start; a relay holding the lock will take it anyway).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.deps.redis.off('close', this.onRedisClose);
    clearInterval(this.poller);
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    try {
      let r: PassResult;
      do r = await this.pass();
      while (r === 'more');
    } catch (err) {
      this.deps.logger.warn({ err: (err as Error).message }, 'side effects left in the outbox at shutdown');
    }
  }

  private schedule(ms: number): void {
    this.again = false;
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.runNow();
    }, ms);
    this.timer.unref();
  }

  private runNow(): void {
    if (this.closed || this.running) return;
    this.running = this.run().finally(() => {
      this.running = undefined;
      if (this.again && !this.timer) this.schedule(COALESCE_MS);
    });
  }

  private async run(): Promise<void> {
    this.again = false;
    let r: PassResult;
    let relayed = false;
    try {
      if (this.resubscribe && !(await this.subscribersBack(this.resubscribe))) {
        this.schedule(RESUBSCRIBE_POLL_MS);
        return;
      }
      do {
        r = await this.pass();
        relayed ||= r === 'more' || r === 'done';
      } while (r === 'more' && !this.closed);
    } catch (err) {
      this.failures++;
      const log = { err: (err as Error).message, attempt: this.failures };
      if (this.failures === 1) this.deps.logger.warn(log, 'could not relay side effects; retrying');
      else this.deps.logger.debug(log, 'could not relay side effects; retrying');
      this.schedule(Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (this.failures - 1)));
      return;
    }
    // A pass that carried rows out shows Redis works again. One that found none, or found another
    // relay at work, used no Redis: a PING tells (without it, each such pass made the next failure
    // of one outage warn once more; and a relay whose rows the other relay drained never recovered).
    if (this.failures && (relayed || (await this.redisAnswers()))) {
      this.deps.logger.info({ failedAttempts: this.failures }, 'side effects relayed again');
      this.failures = 0;
    }
    if (r === 'busy') this.schedule(BUSY_RETRY_MS);
  }

  /**
   * Whether the realtime instances subscribed before Redis went away are subscribed again (or the
   * grace has run out: an instance that died meanwhile is not waited for longer). Throws while
   * Redis does not answer, as a pass would.
   */
  private async subscribersBack(wait: { expected: number; since?: number }): Promise<boolean> {
    const now = await this.deps.bus.wsReceivers();
    wait.since ??= Date.now();
    if (now < wait.expected && Date.now() - wait.since < RESUBSCRIBE_GRACE_MS) return false;
    if (now < wait.expected)
      this.deps.logger.warn(
        { expected: wait.expected, subscribed: now },
        'relaying side effects to fewer realtime instances than before Redis went away',
      );
    this.resubscribe = undefined;
    this.learnReceivers(now);
    return true;
  }

  private learnReceivers(n: number): void {
    this.receivers = n;
    this.receiversAt = Date.now();
  }

  private redisAnswers(): Promise<boolean> {
    return this.deps.redis.ping().then(
      (r) => r === 'PONG',
      () => false,
    );
  }

  /** Wakes the relay when rows wait and nothing else will handle them soon. */
  private async poll(): Promise<void> {
    if (this.closed || this.running || this.timer) return;
    if (!this.resubscribe && Date.now() - this.receiversAt >= RECEIVERS_REFRESH_MS) {
      this.receiversAt = Date.now();
      await this.deps.bus.wsReceivers().then(
        (n) => this.learnReceivers(n),
        () => undefined, // Redis away: the count from before stays the one to wait for
      );
    }
    try {
      const { rows } = await this.deps.db.raw(
        `SELECT EXISTS (SELECT 1 FROM ${SIDE_EFFECT_OUTBOX} WHERE kind = ANY(?::text[])) AS pending`,
        [KINDS_ARRAY],
      );
      if (rows[0].pending) this.wake();
    } catch {
      // Database unreachable: the next poll tries again.
    }
  }

  /** One transaction: lock, claim the oldest rows, carry them out, commit (which deletes them). */
  private pass(): Promise<PassResult> {
    return transaction(this.deps.db, async (trx) => {
      const { rows: lock } = await trx.raw('SELECT pg_try_advisory_xact_lock(?) AS ok', [OUTBOX_RELAY_LOCK]);
      if (!lock[0].ok) return 'busy';
      // The oldest rows, as many as fit in CLAIM_ITEMS (at least one); `left` says whether
      // locked rows were left for the next pass.
      const { rows } = await trx.raw<{ rows: Array<OutboxRow & { left: boolean }> }>(
        `WITH candidates AS (
           SELECT id, CASE WHEN jsonb_typeof(payload->'ids') = 'array' THEN greatest(jsonb_array_length(payload->'ids'), 1) ELSE 1 END AS items
             FROM ${SIDE_EFFECT_OUTBOX} WHERE kind = ANY(?::text[]) ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED
         ), picked AS (
           SELECT id FROM (SELECT id, sum(items) OVER (ORDER BY id) - items AS before FROM candidates) c WHERE before < ?
         )
         DELETE FROM ${SIDE_EFFECT_OUTBOX} WHERE id IN (SELECT id FROM picked)
         RETURNING id, kind, payload, (SELECT count(*) FROM candidates) > (SELECT count(*) FROM picked) AS left`,
        [KINDS_ARRAY, CLAIM_ROWS, CLAIM_ITEMS],
      );
      if (rows.length === 0) return 'none';
      // RETURNING has no order; ids are int8 strings without leading zeros.
      rows.sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : 1));
      await withTimeout(this.carryOut(trx, rows), PASS_REDIS_BUDGET_MS, 'relaying side effects');
      return rows.length === CLAIM_ROWS || rows[0].left ? 'more' : 'done';
    });
  }

  private async carryOut(trx: Knex.Transaction, rows: OutboxRow[]): Promise<void> {
    const pointIds = rows.flatMap((r) =>
      r.kind === 'gpsPoints' ? (r.payload as OutboxPayloads['gpsPoints']).ids : [],
    );
    if (pointIds.length) await this.relayGpsPoints(trx, pointIds);
    for (const r of rows) {
      if (r.kind !== 'email') continue;
      const { outboxId } = r.payload as OutboxPayloads['email'];
      // The job id makes a replayed row (at least once) a no-op while the first job exists.
      await this.deps.queues.enqueue('email', { outboxId }, { jobId: emailJobId(outboxId) });
    }
    for (const r of rows) {
      if (r.kind !== 'passwordReset') continue;
      // The job id makes a replayed row (at least once) a no-op while the first job waits or runs.
      await this.deps.queues.enqueue('passwordResets', r.payload as OutboxPayloads['passwordReset'], {
        jobId: `passwordReset-${r.id}`,
      });
    }
    const auditIds = rows.flatMap((r) =>
      r.kind === 'auditEvents' ? (r.payload as OutboxPayloads['auditEvents']).ids : [],
    );
    if (auditIds.length) await this.relayAuditEvents(trx, auditIds);
    for (const r of rows)
      if (r.kind === 'authInvalidation')
        await this.deps.bus.announceAuthInvalidation(r.payload as OutboxPayloads['authInvalidation']);
    // A row of another shape (written by hand, say) is carried out as far as it makes sense and
    // never holds up the rows behind it.
    const forget = rows.flatMap((r) => {
      const ids =
        r.kind === 'gpsLatestForget' ? (r.payload as OutboxPayloads['gpsLatestForget'] | null)?.deviceIds : [];
      return Array.isArray(ids) ? ids.filter((d) => d === null || typeof d === 'string') : [];
    });
    if (forget.length) await forgetLatestGps(this.deps.redis, this.deps.config, forget);
    const keys = new Set(
      rows.flatMap((r) => {
        const key =
          r.kind === 'systemConfigChange' ? (r.payload as OutboxPayloads['systemConfigChange'] | null)?.key : undefined;
        return typeof key === 'string' ? [key] : [];
      }),
    );
    for (const key of keys) await publishConfigChange(this.deps.redis, this.deps.config, key);
  }

  /** `auditEvent` pushes (REST shape) on `admin:audit`, in write order, for the events still stored. */
  private async relayAuditEvents(trx: Knex.Transaction, ids: string[]): Promise<void> {
    const { rows } = await trx.raw<{ rows: Array<Record<string, unknown>> }>(
      'SELECT * FROM audit_events WHERE id = ANY(?::uuid[])',
      [`{${ids.join(',')}}`],
    );
    const byId = new Map(rows.map((r) => [r.id as string, AuditEvent.fromDatabaseJson(r)]));
    const pushes: Array<{ channel: string; message: ServerPush }> = [];
    for (const id of ids) {
      const e = byId.get(id);
      if (e)
        pushes.push({ channel: ADMIN_AUDIT_WS_CHANNEL, message: { type: 'auditEvent', data: presentAuditEvent(e) } });
    }
    for (let i = 0; i < pushes.length; i += PUBLISH_CHUNK)
      this.learnReceivers(await this.deps.bus.publishMany(pushes.slice(i, i + PUBLISH_CHUNK)));
  }

  /**
   * gpsUpdate on `gps` and `gps:<device_id>` for each point still stored, in acceptance order; the
   * latest-point cache raised (the request did it too, unless Redis was down then: points this
   * process raised already cost no second round trip, see `recordLatestGps`); the points marked
   * pending for geofence evaluation, and their geofence jobs.
   */
  private async relayGpsPoints(trx: Knex.Transaction, ids: string[]): Promise<void> {
    const cols = GPS_POINT_COLUMNS.map((c) => `"${c}"`).join(', ');
    // One array parameter, whatever the number of ids (uuids need no quoting in an array literal).
    const { rows } = await trx.raw<{ rows: GpsPointRow[] }>(
      `SELECT ${cols} FROM gps_points WHERE id = ANY(?::uuid[])`,
      [`{${ids.join(',')}}`],
    );
    const byId = new Map(rows.map((p) => [p.id, p]));
    const points = ids.map((id) => byId.get(id)).filter((p): p is GpsPointRow => p !== undefined);
    if (points.length === 0) return;
    const pushes: Array<{ channel: string; message: ServerPush }> = [];
    for (const p of points) {
      const message: ServerPush = { type: 'gpsUpdate', data: presentGpsPoint(p) };
      pushes.push({ channel: 'gps', message });
      if (p.device_id) pushes.push({ channel: `gps:${p.device_id}`, message });
    }
    for (let i = 0; i < pushes.length; i += PUBLISH_CHUNK)
      this.learnReceivers(await this.deps.bus.publishMany(pushes.slice(i, i + PUBLISH_CHUNK)));
    await recordLatestGps(this.deps.db, this.deps.redis, this.deps.config, points);
    // Before the jobs: whichever job of a device runs first evaluates the device's earlier points with its own.
    await markGeofencePending(this.deps.redis, this.deps.config, points);
    for (let i = 0; i < points.length; i += GEOFENCE_JOB_MAX_IDS) {
      await this.deps.queues.enqueue('geofence', {
        gpsPointIds: points.slice(i, i + GEOFENCE_JOB_MAX_IDS).map((p) => p.id),
      });
    }
  }
}
