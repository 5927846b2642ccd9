import test from 'ava';
import { AUDIT_PURGE_DEFAULTS, purgeExpiredAuditEvents } from '../../shared/commands/auditRetention';
import { schedules } from '../../shared/queues';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('events older than audit.retention_days go in batches; newer ones and their reports stay', async (t) => {
  const s = stack();
  const seeded = await s.db('system_config').where('key', 'audit.retention_days').first();
  t.is(seeded.value, 365);
  // Hourly (docs/workers.md), 5,000 rows a batch and 2,000,000 a run at most (docs/audit.md).
  t.is(schedules.purgeAuditEvents, 3_600_000);
  t.is(AUDIT_PURGE_DEFAULTS.batchSize, 5000);
  t.is(AUDIT_PURGE_DEFAULTS.batchSize * AUDIT_PURGE_DEFAULTS.maxBatches, 2_000_000);
  await s
    .db('system_config')
    .where('key', 'audit.retention_days')
    .update({ value: JSON.stringify(30) });
  const user = await createUser(s.db);
  const old = new Date(Date.now() - 40 * 86_400_000);
  const rows = Array.from({ length: 25 }, () => ({ user_id: user.id, event_type: 'login', created_at: old }));
  await s.db('audit_events').insert(rows);
  const [recent] = await s
    .db('audit_events')
    .insert({ user_id: user.id, event_type: 'login', created_at: new Date(Date.now() - 29 * 86_400_000) })
    .returning('id');
  const [oldReported] = await s
    .db('audit_events')
    .insert({ user_id: user.id, event_type: 'logout', created_at: old })
    .returning('id');
  await s.db('audit_reports').insert({ audit_event_id: oldReported.id, user_id: user.id, reason: 'other' });

  const result = await purgeExpiredAuditEvents(s.db, { batchSize: 10 });
  t.is(result.deleted, 26);
  t.is(result.batches, 3);
  const left = await s.db('audit_events').where('user_id', user.id).pluck('id');
  t.deepEqual(left, [recent.id]);
  t.is(Number((await s.db('audit_reports').where('user_id', user.id).count())[0]?.count), 0);

  // A run stops at its cap; the next one goes on.
  await s
    .db('audit_events')
    .insert(Array.from({ length: 5 }, () => ({ user_id: user.id, event_type: 'login', created_at: old })));
  t.deepEqual(await purgeExpiredAuditEvents(s.db, { batchSize: 2, maxBatches: 2 }), { deleted: 4, batches: 2 });
  t.deepEqual(await purgeExpiredAuditEvents(s.db, { batchSize: 2, maxBatches: 2 }), { deleted: 1, batches: 1 });

  // 0, set as an admin would, keeps everything.
  const [kept] = await s
    .db('audit_events')
    .insert({ user_id: user.id, event_type: 'login', created_at: old })
    .returning('id');
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const patched = await s.request('PATCH', '/v1/system-config/audit.retention_days', {
    token: admin.token,
    body: { value: 0 },
  });
  t.is(patched.status, 200, patched.text);
  t.deepEqual(await purgeExpiredAuditEvents(s.db), { deleted: 0, batches: 0 });
  t.deepEqual(await s.db('audit_events').where('id', kept.id).pluck('id'), [kept.id]);
});
