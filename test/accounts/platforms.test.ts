import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('platforms: public list, enabled list, get by id or slug, 404', async (t) => {
  const s = stack();
  const all = await s.request('GET', '/v1/platforms');
  t.is(all.status, 200);
  const slugs = all.body.data.map((p: any) => p.slug);
  t.true(['email', 'chat', 'stream', 'google', 'github'].every((x) => slugs.includes(x)));
  const email = all.body.data.find((p: any) => p.slug === 'email');
  t.deepEqual(Object.keys(email).sort(), [
    'created_at',
    'enabled',
    'id',
    'is_oauth',
    'name',
    'slug',
    'two_factor_required',
    'two_factor_supported',
    'updated_at',
  ]);
  t.false(email.is_oauth);
  const byId = await s.request('GET', `/v1/platforms/${email.id}`);
  t.is(byId.body.data.slug, 'email');
  t.is((await s.request('GET', '/v1/platforms/github')).body.data.name, 'GitHub');
  t.is((await s.request('GET', '/v1/platforms/nope')).status, 404);
  t.is((await s.request('GET', '/v1/platforms/00000000-0000-4000-8000-000000000000')).status, 404);
});

test('PATCH enabled needs settings:write; the enabled list follows', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is((await s.request('PATCH', '/v1/platforms/google/enabled', { body: { enabled: false } })).status, 401);
  t.is(
    (await s.request('PATCH', '/v1/platforms/google/enabled', { token: user.token, body: { enabled: false } })).status,
    403,
  );
  const bad = await s.request('PATCH', '/v1/platforms/google/enabled', { token: admin.token, body: { enabled: 'no' } });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /^enabled/);
  const off = await s.request('PATCH', '/v1/platforms/google/enabled', {
    token: admin.token,
    body: { enabled: false },
  });
  t.is(off.status, 200);
  t.deepEqual(Object.keys(off.body.data).sort(), ['enabled', 'id', 'name', 'slug']);
  t.false(off.body.data.enabled);
  const enabled = await s.request('GET', '/v1/platforms/enabled');
  t.false(enabled.body.data.some((p: any) => p.slug === 'google'));
  t.true(enabled.body.data.some((p: any) => p.slug === 'github'));
  // Disabled: provider sign-in through it is refused with a clear message.
  const oauth = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: { email: null, name: 'G User', oauthProvider: 'google', oauthProviderId: 'g-1' },
  });
  t.is(oauth.status, 403);
  t.regex(oauth.body.message, /Google is disabled/);
  t.is(
    (await s.request('PATCH', '/v1/platforms/google/enabled', { token: admin.token, body: { enabled: true } })).body
      .data.enabled,
    true,
  );
  t.is(
    (
      await s.request('POST', '/v1/users/oauth', {
        token: s.systemKey,
        body: { email: null, name: 'G User', oauthProvider: 'google', oauthProviderId: 'g-1' },
      })
    ).status,
    200,
  );
});
