import test from 'ava';
import { writeAudited } from '../../shared/audit';
import { SIDE_EFFECT_OUTBOX } from '../../shared/outbox';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test.serial('a write that touches a row records its event in the same statement', async (t) => {
  const { db } = stack();
  const user = await createUser(db);
  // Statements of this write (the api's background work, such as the outbox relay's poll, shares the pool).
  let statements = 0;
  const count = (q: { sql: string }) => {
    if (/\b(sessions|audit_events)\b/.test(q.sql)) statements++;
  };
  db.on('query', count);
  const rows = await writeAudited(db, db('sessions').where('id', user.sessionId).delete().returning('id'), {
    user_id: user.id,
    event_type: 'logout',
    resource_type: 'session',
    resource_id: user.sessionId,
    ip_address: '203.0.113.7',
    metadata: { reason: 'test', nested: { n: 1 } },
  });
  db.off('query', count);
  t.is(statements, 1);
  t.deepEqual(rows, [{ id: user.sessionId }]);
  t.is(await db('sessions').where('id', user.sessionId).first(), undefined);
  const event = await db('audit_events').where({ user_id: user.id, event_type: 'logout' }).first();
  // Each value took its column's type: inet, jsonb, uuid.
  t.is(event.ip_address, '203.0.113.7');
  t.deepEqual(event.metadata, { reason: 'test', nested: { n: 1 } });
  t.is(event.resource_id, user.sessionId);
  t.is(event.status, 'success');
  // Its delivery to the live feed (the outbox row) is covered end to end in test/audit/liveFeed.test.ts.
});

test.serial('a write that touches no row records nothing, and a failing write records nothing', async (t) => {
  const { db } = stack();
  const user = await createUser(db);
  const before = Number((await db(SIDE_EFFECT_OUTBOX).count({ n: '*' }))[0].n);
  const rows = await writeAudited(
    db,
    db('sessions').where('id', '00000000-0000-4000-8000-000000000000').delete().returning('id'),
    { user_id: user.id, event_type: 'logout', resource_type: 'session' },
  );
  t.deepEqual(rows, []);
  await t.throwsAsync(
    writeAudited(db, db('sessions').insert({ user_id: user.id, token_hash: null }).returning('id'), {
      user_id: user.id,
      event_type: 'session_created',
    }),
  );
  t.is(Number((await db('audit_events').where('user_id', user.id).count({ n: '*' }))[0].n), 0);
  // No empty outbox row either (the relay may only have removed rows meanwhile).
  t.true(Number((await db(SIDE_EFFECT_OUTBOX).count({ n: '*' }))[0].n) <= before);
});
