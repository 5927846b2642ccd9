import test from 'ava';
import { AuditBuffer } from '../../shared/auditBuffer';
import { hashPassword } from '../../shared/domain/passwords';
import { createLogger } from '../../shared/logger';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { eventually, lockWaiters, sleep } from '../helpers/wait';

const stack = useStack(test, { env: { RATE_LIMIT_ANONYMOUS: '100000' } });

test.serial(
  'a request succeeds while the audit table is unavailable; its event is written once it is back',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db);
    await s
      .db('platform_accounts')
      .where({ user_id: user.id })
      .update({ password_hash: await hashPassword('the right one') });
    // Stop the writer's target: the table is gone for the buffered writer's inserts.
    await s.db.raw('ALTER TABLE audit_events RENAME TO audit_events_away');
    let requestedAt = 0;
    let restoredAt = 0;
    try {
      requestedAt = Date.now();
      const failed = await s.request('POST', '/v1/auth/login', { body: { email: user.email, password: 'nope nope' } });
      t.is(failed.status, 401, failed.text);
      const session = await s.request('POST', '/v1/sessions', {
        token: s.systemKey,
        body: { userId: user.id, expires: new Date(Date.now() + 3600_000).toISOString() },
      });
      t.is(session.status, 201, session.text);
      await sleep(700); // a few failed attempts
      t.is(Number((await s.db('audit_events_away').where('user_id', user.id).count())[0]?.count), 0);
      restoredAt = Date.now();
    } finally {
      await s.db.raw('ALTER TABLE audit_events_away RENAME TO audit_events');
    }
    const rows = await eventually(async () => {
      const r = await s.db('audit_events').where('user_id', user.id).orderBy('created_at');
      return r.length === 2 ? r : null;
    }, 15_000);
    t.deepEqual(
      rows.map((r) => r.event_type),
      ['login_failed', 'session_created'],
    );
    // The time is that of the request, not of the late write (which cannot come before the table is back).
    for (const r of rows) {
      t.true(r.created_at.getTime() >= requestedAt, `${r.event_type} dated before its request`);
      t.true(r.created_at.getTime() < restoredAt, `${r.event_type} dated at its write`);
    }
  },
);

test.serial('a batch refused for one bad row writes the others and logs the bad one', async (t) => {
  const s = stack();
  const lines: string[] = [];
  const logger = createLogger('test', 'info');
  const buffer = new AuditBuffer({
    db: s.db,
    logger: Object.assign(Object.create(logger), {
      error: (o: unknown, msg: string) => lines.push(`${msg} ${JSON.stringify(o)}`),
    }),
  });
  const tag = `tag-${Date.now()}`;
  for (let i = 0; i < 10; i++) buffer.record({ event_type: 'login', resource_id: `${tag}-${i}` });
  buffer.record({ event_type: 'x'.repeat(100), resource_id: `${tag}-bad` });
  await buffer.flush();
  t.is(buffer.size, 0);
  t.is(Number((await s.db('audit_events').where('resource_id', 'like', `${tag}-%`).count())[0]?.count), 10);
  t.is(lines.length, 1);
  t.regex(lines[0]!, /refused by the database/);
  t.regex(lines[0]!, new RegExp(`${tag}-bad`));
  await buffer.close();
});

test.serial('the buffered writer groups events into few inserts', async (t) => {
  const s = stack();
  const buffer = new AuditBuffer({ db: s.db, logger: createLogger('test', 'silent') });
  const tag = `bulk-${Date.now()}`;
  const recorded = Array.from({ length: 2000 }, (_, i) => `${tag}-${i}`);
  // The INSERT statements into audit_events, each with the resource ids it carries, in order.
  const inserts: string[][] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => {
    if (/insert into "audit_events"/i.test(q.sql))
      inserts.push((q.bindings ?? []).filter((b): b is string => typeof b === 'string' && b.startsWith(`${tag}-`)));
  };
  s.db.on('query', listener);
  try {
    for (const id of recorded) buffer.record({ event_type: 'login', resource_id: id });
    await buffer.close();
  } finally {
    s.db.off('query', listener);
  }
  t.is(Number((await s.db('audit_events').where('resource_id', 'like', `${tag}-%`).count())[0]?.count), 2000);
  // One multi-row INSERT per 500 events (docs/audit.md), plus at most one a timer flush started early.
  t.true(inserts.length >= 4 && inserts.length <= 5, `${inserts.length} inserts`);
  t.true(
    inserts.every((ids) => ids.length <= 500),
    inserts.map((ids) => ids.length).join(','),
  );
  // The events go out in the order they were recorded.
  t.deepEqual(inserts.flat(), recorded);
});

/** An AuditBuffer holding at most 5 events, with its error log lines captured. */
function smallBuffer(s: ReturnType<typeof stack>) {
  const lost: string[] = [];
  const logger = createLogger('test', 'silent');
  const buffer = new AuditBuffer(
    {
      db: s.db,
      logger: Object.assign(Object.create(logger), {
        error: (o: { events?: Array<{ resource_id: string }> }, msg: string) => {
          if (/audit buffer full/.test(msg)) for (const e of o.events ?? []) lost.push(e.resource_id);
        },
      }),
    },
    { maxPending: 5, flushMs: 5, retryMs: 20 },
  );
  return { buffer, lost };
}

test.serial(
  'while the database is away the buffer holds maxPending events; the oldest beyond it are logged',
  async (t) => {
    const s = stack();
    const { buffer, lost } = smallBuffer(s);
    const tag = `cap-${Date.now()}`;
    await s.db.raw('ALTER TABLE audit_events RENAME TO audit_events_away');
    try {
      for (let i = 0; i < 8; i++) buffer.record({ event_type: 'login', resource_id: `${tag}-${i}` });
      t.is(buffer.size, 5);
      t.deepEqual(lost, [`${tag}-0`, `${tag}-1`, `${tag}-2`]);
    } finally {
      await s.db.raw('ALTER TABLE audit_events_away RENAME TO audit_events');
    }
    await buffer.close();
    const written = await s.db('audit_events').where('resource_id', 'like', `${tag}-%`).pluck('resource_id');
    t.deepEqual(
      written.sort(),
      [3, 4, 5, 6, 7].map((i) => `${tag}-${i}`),
    );
  },
);

test.serial('events recorded while a full buffer writes are neither lost nor dropped silently', async (t) => {
  const s = stack();
  const { buffer, lost } = smallBuffer(s);
  const tag = `inflight-${Date.now()}`;
  const ids = Array.from({ length: 7 }, (_, i) => `${tag}-${i}`);
  // The buffer's insert of the first five waits on this lock while two more events arrive.
  const trx = await s.db.transaction();
  try {
    await trx.raw('LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE');
    for (const id of ids.slice(0, 5)) buffer.record({ event_type: 'login', resource_id: id });
    await lockWaiters(s.db, 1);
    for (const id of ids.slice(5)) buffer.record({ event_type: 'login', resource_id: id });
  } finally {
    await trx.commit();
  }
  await buffer.close();
  const written = await s.db('audit_events').where('resource_id', 'like', `${tag}-%`).pluck('resource_id');
  // Each event is written, or logged as not written: none disappears without a trace.
  t.deepEqual(
    ids.filter((id) => !written.includes(id) && !lost.includes(id)),
    [],
  );
  // The two that arrived during the insert are written.
  t.true(written.includes(ids[5]!) && written.includes(ids[6]!), written.join(','));
});
