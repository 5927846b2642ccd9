import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/**
 * The same DELETE sent many times at once (a double-submitting client, a retrying proxy) acts
 * once: one success, the rest 404 as if sent one after the other, and one audit event.
 */
const stack = useStack(test);
const TIMES = 12;

const statuses = (rs: Array<{ status: number }>) => rs.map((r) => r.status).sort((a, b) => a - b);
const onceThen404 = (ok: number) => [ok, ...Array(TIMES - 1).fill(404)];

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
