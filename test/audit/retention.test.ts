import test from 'ava';
import { purgeExpiredAuditEvents } from '../../shared/commands/auditRetention';
import { schedules } from '../../shared/queues';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('events older than audit.retention_days go in batches; newer ones and their reports stay', async (t) => {
  const s = stack();
  const seeded = await s.db('system_config').where('key', 'audit.retention_days').first();
  t.is(seeded.value, 365);
  t.true(schedules.purgeAuditEvents > 0);
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

  // No retention configured: nothing is deleted.
  await s.db('audit_events').insert({ user_id: user.id, event_type: 'login', created_at: old });
  await s
    .db('system_config')
    .where('key', 'audit.retention_days')
    .update({ value: JSON.stringify(null) });
  t.deepEqual(await purgeExpiredAuditEvents(s.db), { deleted: 0, batches: 0 });
});
