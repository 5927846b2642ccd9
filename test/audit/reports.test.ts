import test from 'ava';
import { randomUUID } from 'node:crypto';
import { useAccountsStack } from '../helpers/accounts';
import { createUser } from '../helpers/factories';

const { stack, mailbox } = useAccountsStack(test);

async function eventOf(userId: string, type = 'login') {
  const [row] = await stack()
    .db('audit_events')
    .insert({ user_id: userId, event_type: type, metadata: '{}' })
    .returning('id');
  return row.id as string;
}

test('report lifecycle: create, 409 twice, listed; admin lists by status, reviews, the user is mailed', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const eventId = await eventOf(user.id);

  const r = await s.request('POST', `/v1/users/me/audit/${eventId}/report`, {
    token: user.token,
    body: { reason: 'not_me', description: 'I was asleep' },
  });
  t.is(r.status, 201, r.text);
  t.true(r.body.success);
  t.is(r.body.error, null);
  const report = r.body.report;
  t.deepEqual(Object.keys(report).sort(), [
    'audit_event_id',
    'created_at',
    'description',
    'id',
    'reason',
    'resolution_notes',
    'reviewed_at',
    'reviewed_by',
    'status',
    'updated_at',
    'user_id',
  ]);
  t.is(report.status, 'pending');
  t.is(report.audit_event_id, eventId);
  t.true((await s.db('audit_events').where('id', eventId).first()).is_reported);
  const mine = await s.request('GET', `/v1/users/me/audit?event_type=login`, { token: user.token });
  t.true(mine.body.events[0].is_reported);

  const again = await s.request('POST', `/v1/users/me/audit/${eventId}/report`, {
    token: user.token,
    body: { reason: 'suspicious' },
  });
  t.is(again.status, 409);

  const list = await s.request('GET', '/v1/users/me/audit/reports', { token: user.token });
  t.is(list.status, 200);
  t.true(Array.isArray(list.body));
  t.deepEqual(
    list.body.map((x: { id: string }) => x.id),
    [report.id],
  );

  const pending = await s.request('GET', '/v1/admin/audit/reports?status=pending', { token: admin.token });
  t.is(pending.status, 200);
  t.true(Array.isArray(pending.body));
  t.true(pending.body.some((x: { id: string }) => x.id === report.id));
  const resolvedBefore = await s.request('GET', '/v1/admin/audit/reports?status=resolved', { token: admin.token });
  t.false(resolvedBefore.body.some((x: { id: string }) => x.id === report.id));
  t.is((await s.request('GET', '/v1/admin/audit/reports?status=open', { token: admin.token })).status, 400);
  t.is((await s.request('GET', '/v1/admin/audit/reports', { token: user.token })).status, 403);
  t.is(
    (await s.request('GET', `/v1/admin/audit?is_reported=true&user_id=${user.id}`, { token: admin.token })).body
      .events[0].id,
    eventId,
  );

  const patched = await s.request('PATCH', `/v1/admin/audit/reports/${report.id}`, {
    token: admin.token,
    body: { status: 'resolved', resolution_notes: 'Password reset enforced' },
  });
  t.is(patched.status, 200, patched.text);
  t.is(patched.body.status, 'resolved');
  t.is(patched.body.resolution_notes, 'Password reset enforced');
  t.is(patched.body.reviewed_by, admin.id);
  t.truthy(patched.body.reviewed_at);
  const mail = await mailbox().waitFor(user.email, (m) => m.text.includes('Password reset enforced'));
  t.regex(mail.subject, /resolved/);
  t.regex(mail.text, /"login" event/);

  // Dismissed: the event no longer counts as reported; back to reviewed: it does again.
  const dismissed = await s.request('PATCH', `/v1/admin/audit/reports/${report.id}`, {
    token: admin.token,
    body: { status: 'dismissed' },
  });
  t.is(dismissed.body.resolution_notes, 'Password reset enforced', 'notes kept when not given');
  t.false((await s.db('audit_events').where('id', eventId).first()).is_reported);
  await mailbox().waitFor(user.email, (m) => /dismissed/.test(m.subject));
  await s.request('PATCH', `/v1/admin/audit/reports/${report.id}`, {
    token: admin.token,
    body: { status: 'reviewed' },
  });
  t.true((await s.db('audit_events').where('id', eventId).first()).is_reported);

  // The same review again (a retry) records the reviewer but tells the reporter nothing new: no mail.
  const mails = async () => Number((await s.db('email_outbox').where('user_id', user.id).count('* as n'))[0].n);
  const before = await mails();
  const repeated = await s.request('PATCH', `/v1/admin/audit/reports/${report.id}`, {
    token: admin.token,
    body: { status: 'reviewed', resolution_notes: 'Password reset enforced' },
  });
  t.is(repeated.status, 200);
  t.is(await mails(), before);
  const noted = await s.request('PATCH', `/v1/admin/audit/reports/${report.id}`, {
    token: admin.token,
    body: { resolution_notes: 'Password reset enforced; sessions ended' },
  });
  t.is(noted.status, 200);
  t.is(await mails(), before + 1);
});

test("reports: 404 for another user's or an unknown event, 400 for a malformed id or a bad reason, 403/404 on review", async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const othersEvent = await eventOf(other.id);
  const post = (id: string, body: unknown) =>
    s.request('POST', `/v1/users/me/audit/${id}/report`, { token: user.token, body });
  t.is((await post(othersEvent, { reason: 'not_me' })).status, 404);
  t.false((await s.db('audit_events').where('id', othersEvent).first()).is_reported);
  t.is((await post(randomUUID(), { reason: 'not_me' })).status, 404);
  // A malformed id is bad input, named, as on every route with an id in its path.
  const malformed = await post('not-a-uuid', { reason: 'not_me' });
  t.is(malformed.status, 400);
  t.regex(malformed.body.message, /^event_id: must be a UUID/);
  const own = await eventOf(user.id);
  const bad = await post(own, { reason: 'bored' });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^reason:/);
  t.is((await post(own, {})).status, 400);

  const created = await post(own, { reason: 'unknown_device' });
  t.is(created.status, 201);
  const moderator = await createUser(s.db, { roles: ['role_moderator'] });
  // audit:read lists, audit:write reviews.
  t.is((await s.request('GET', '/v1/admin/audit/reports', { token: moderator.token })).status, 200);
  const refused = await s.request('PATCH', `/v1/admin/audit/reports/${created.body.report.id}`, {
    token: moderator.token,
    body: { status: 'reviewed' },
  });
  t.is(refused.status, 403);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is(
    (await s.request('PATCH', `/v1/admin/audit/reports/${randomUUID()}`, { token: admin.token, body: {} })).status,
    404,
  );
  const badStatus = await s.request('PATCH', `/v1/admin/audit/reports/${created.body.report.id}`, {
    token: admin.token,
    body: { status: 'closed' },
  });
  t.is(badStatus.status, 400);
  t.regex(badStatus.body.message, /^status:/);
});
