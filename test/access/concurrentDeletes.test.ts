import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { lockWaiters } from '../helpers/wait';

/**
 * The same DELETE sent many times at once (a double-submitting client, a retrying proxy) acts
 * once: one success, the rest 404 as if sent one after the other, and one audit event.
 */
const stack = useStack(test);
const TIMES = 12;

const statuses = (rs: Array<{ status: number }>) => rs.map((r) => r.status).sort((a, b) => a - b);
const onceThen404 = (ok: number) => [ok, ...Array(TIMES - 1).fill(404)];

/**
 * Sends `edit` while a DELETE of `table`'s row `id` holds the row uncommitted: the edit's route
 * loads the row (still there), its write waits on the row lock, and the delete commits before it
 * goes on. The answer of an edit that lost the race this way.
 */
async function editWhileDeleted<R>(
  s: ReturnType<typeof stack>,
  table: string,
  id: string,
  edit: () => Promise<R>,
): Promise<R> {
  const trx = await s.db.transaction();
  try {
    if ((await trx(table).where('id', id).delete()) !== 1) throw new Error(`no ${table} row ${id} to delete`);
    const pending = edit();
    await lockWaiters(s.db, 1);
    await trx.commit();
    return await pending;
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
}

// Serial (ava runs these before the others): the lock waiter counted must be the edit's.
test.serial('an edit of an API key, role or OAuth client that a delete overtakes answers 404, not 500', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const gone = (r: { status: number; body: { message?: string } }, what: string) => {
    t.is(r.status, 404, JSON.stringify(r.body));
    t.is(r.body.message, `${what} not found`);
  };
  const newKey = async () => {
    const key = await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'raced', scopes: [] } });
    t.is(key.status, 201, key.text);
    return key.body.id as string;
  };
  let id = await newKey();
  gone(
    await editWhileDeleted(s, 'api_keys', id, () =>
      s.request('POST', `/v1/api-keys/${id}/regenerate`, { token: admin.token }),
    ),
    'api key',
  );
  t.falsy(
    await s
      .db('audit_events')
      .where({ resource_id: id, event_type: 'api_key_created' })
      .whereRaw("metadata->>'regenerated' = 'true'")
      .first(),
  );
  id = await newKey();
  gone(
    await editWhileDeleted(s, 'api_keys', id, () =>
      s.request('PATCH', `/v1/api-keys/${id}`, { token: admin.token, body: { name: 'renamed', is_active: false } }),
    ),
    'api key',
  );

  for (const body of [{ description: 'changed' }, { name: `Raced renamed ${Date.now()}` }]) {
    const role = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: `Raced ${Date.now()}` } });
    t.is(role.status, 201, role.text);
    const roleId = role.body.data.id as string;
    gone(
      await editWhileDeleted(s, 'roles', roleId, () =>
        s.request('PATCH', `/v1/roles/${roleId}`, { token: admin.token, body }),
      ),
      'role',
    );
  }

  const newClient = async () => {
    const client = await s.request('POST', '/v1/oauth/clients', {
      token: admin.token,
      body: { name: 'Raced', redirect_uris: ['https://raced.example/cb'], allowed_scopes: ['gps:read'] },
    });
    t.is(client.status, 201, client.text);
    return client.body.client.id as string;
  };
  let clientId = await newClient();
  gone(
    await editWhileDeleted(s, 'oauth_clients', clientId, () =>
      s.request('PATCH', `/v1/oauth/clients/${clientId}`, { token: admin.token, body: { name: 'Renamed' } }),
    ),
    'oauth client',
  );
  // A new secret for a client that is gone was a 200 with a secret that works nowhere.
  clientId = await newClient();
  gone(
    await editWhileDeleted(s, 'oauth_clients', clientId, () =>
      s.request('POST', `/v1/oauth/clients/${clientId}/regenerate-secret`, { token: admin.token }),
    ),
    'oauth client',
  );
});

test('an API key and an OAuth client deleted many times at once: one 204, the rest 404, one audit event', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_developer'] });
  const key = await s.request('POST', '/v1/api-keys', { token: user.token, body: { name: 'twice', scopes: [] } });
  t.is(key.status, 201, key.text);
  const keyDeletes = await Promise.all(
    Array.from({ length: TIMES }, () => s.request('DELETE', `/v1/api-keys/${key.body.id}`, { token: user.token })),
  );
  t.deepEqual(statuses(keyDeletes), onceThen404(204));
  t.is((await s.db('audit_events').where({ resource_id: key.body.id, event_type: 'api_key_revoked' })).length, 1);

  const client = await s.request('POST', '/v1/oauth/clients', {
    token: user.token,
    body: { name: 'Twice', redirect_uris: ['https://twice.example/cb'], allowed_scopes: ['gps:read'] },
  });
  t.is(client.status, 201, client.text);
  const clientId = client.body.client.id as string;
  const clientDeletes = await Promise.all(
    Array.from({ length: TIMES }, () => s.request('DELETE', `/v1/oauth/clients/${clientId}`, { token: user.token })),
  );
  t.deepEqual(statuses(clientDeletes), onceThen404(204));
  t.is((await s.db('audit_events').where({ resource_id: clientId, event_type: 'client_deleted' })).length, 1);
});

test('a role, a role permission and a ban ended many times at once: one success, the rest 404', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const role = await s.request('POST', '/v1/roles', { token: admin.token, body: { name: `Twice ${Date.now()}` } });
  t.is(role.status, 201, role.text);
  const roleId = role.body.data.id as string;
  const permission = await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id');
  t.is(
    (
      await s.request('POST', `/v1/roles/${roleId}/permissions`, {
        token: admin.token,
        body: { permission_id: permission.id },
      })
    ).status,
    201,
  );
  const removals = await Promise.all(
    Array.from({ length: TIMES }, () =>
      s.request('DELETE', `/v1/roles/${roleId}/permissions/${permission.id}`, { token: admin.token }),
    ),
  );
  t.deepEqual(statuses(removals), onceThen404(204));
  const roleDeletes = await Promise.all(
    Array.from({ length: TIMES }, () => s.request('DELETE', `/v1/roles/${roleId}`, { token: admin.token })),
  );
  t.deepEqual(statuses(roleDeletes), onceThen404(204));

  const target = await createUser(s.db);
  const ban = await s.request('POST', `/v1/users/${target.id}/ban`, { token: admin.token, body: { reason: 'x' } });
  t.is(ban.status, 201, ban.text);
  const unbans = await Promise.all(
    Array.from({ length: TIMES }, () => s.request('DELETE', `/v1/users/${target.id}/ban`, { token: admin.token })),
  );
  t.deepEqual(statuses(unbans), onceThen404(200));
  const events = await s
    .db('audit_events')
    .where({ user_id: target.id, resource_type: 'ban' })
    .whereRaw("metadata->>'action' = 'unbanned'");
  t.is(events.length, 1);
});

test('a chat guild and an integration deleted many times at once: one 204, the rest 404, one audit event', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const [guild] = await s
    .db('chat_guilds')
    .insert({ guild_id: `7${Date.now()}`.slice(0, 18), name: 'Twice' })
    .returning(['id', 'guild_id']);
  const guildDeletes = await Promise.all(
    Array.from({ length: TIMES }, () => s.request('DELETE', `/v1/chat/guilds/${guild.id}`, { token: admin.token })),
  );
  t.deepEqual(statuses(guildDeletes), onceThen404(204));
  t.is((await s.db('audit_events').where({ resource_id: guild.guild_id, resource_type: 'chat_guild' })).length, 1);

  const user = await createUser(s.db);
  const [integration] = await s
    .db('integrations')
    .insert({
      user_id: user.id,
      platform_slug: 'stream',
      platform_user_id: `twice-${Date.now()}`,
      username: 'twice',
      access_token_sealed: 'sealed',
    })
    .returning('id');
  const disconnects = await Promise.all(
    Array.from({ length: TIMES }, () =>
      s.request('DELETE', `/v1/integrations/${integration.id}`, { token: user.token }),
    ),
  );
  t.is(disconnects.filter((r) => r.status < 300).length, 1, JSON.stringify(disconnects.map((r) => r.status)));
  t.true(disconnects.every((r) => r.status < 300 || r.status === 404));
  t.is((await s.db('audit_events').where({ resource_id: integration.id, event_type: 'account_unlinked' })).length, 1);
});
