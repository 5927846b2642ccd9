import test from 'ava';
import { createUser } from '../helpers/factories';
import { explainJson } from '../helpers/statements';
import { useStack } from '../helpers/stack';

/**
 * The purge of a user (run once per user by the scheduled task, or forced by an administrator)
 * deletes their mail and one-time tokens by indexed probes, not by reading the whole mail history
 * and token table (migration 20261208000100_purge_indexes). Each statement it sends on those tables
 * is explained with sequential scans disabled: one the indexes cannot serve still scans.
 */
const stack = useStack(test);

test('a purge finds the user’s mail and tokens by index', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db);
  await s
    .db('email_outbox')
    .insert({ user_id: user.id, to_address: user.email, subject: 's', text_body: 'b', template: 't', status: 'sent' });
  // An address the user gave up: the purge also looks for rows written to it that name no user.
  await s.db('audit_events').insert({
    user_id: user.id,
    event_type: 'user_updated',
    metadata: JSON.stringify({ action: 'email_changed', previous_email: `old.${user.email}`, email: user.email }),
  });
  t.is((await s.request('DELETE', '/v1/users/me', { token: user.token })).status, 200);
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (/^delete from "(email_outbox|account_tokens)"/.test(q.sql)) seen.push(q);
  };
  s.db.on('query', listener);
  try {
    const r = await s.request('POST', `/v1/admin/users/${user.id}/force-delete`, {
      token: admin.token,
      body: { reason: 'plan test' },
    });
    t.is(r.status, 200, r.text);
  } finally {
    s.db.off('query', listener);
  }
  t.is(seen.length, 2, seen.map((q) => q.sql).join('\n'));
  for (const statement of seen) {
    const plan = await explainJson(s.db, statement, { settings: ['SET enable_seqscan = off'] });
    t.notRegex(plan, /"Node Type":"Seq Scan"/, statement.sql);
  }
  t.is((await s.db('email_outbox').where('user_id', user.id)).length, 0);
});
