import test from 'ava';
import {
  authorize,
  authorizePermission,
  can,
  PermissionSet,
  Principal,
  refusal,
  subjects,
  systemKeyAllowed,
} from '../../shared/policies';
import { HttpError } from '../../shared/errors';
import { ALL_PERMISSIONS, DEFAULT_ROLES } from '../../shared/permissions';

const user = (perms: string[], userId = 'u1'): Principal => ({
  kind: 'user',
  userId,
  sessionId: 's',
  via: 'session',
  permissions: new PermissionSet(perms),
  grant: 'all',
  roleIds: [],
});

test('wildcards: *:* grants everything, resource:* grants that resource only', (t) => {
  const all = new PermissionSet(['*:*']);
  t.true(all.has('gps:read'));
  t.true(all.isSuperAdmin);
  const gps = new PermissionSet(['gps:*']);
  t.true(gps.has('gps:delete'));
  t.false(gps.has('trips:read'));
  t.false(gps.isSuperAdmin);
  t.false(new PermissionSet(['gps:read']).has('gps:write'));
});

test('narrow keeps only what the owner holds and expands wildcard requests', (t) => {
  const owner = new PermissionSet(['gps:read', 'gps:write', 'trips:read']);
  t.deepEqual(owner.narrow(['gps:read', 'users:delete']).list(), ['gps:read']);
  t.deepEqual(owner.narrow(['gps:*']).list(), ['gps:read', 'gps:write']);
  t.deepEqual(owner.narrow(['*:*']).list(), ['gps:read', 'gps:write', 'trips:read']);
  t.deepEqual(new PermissionSet(['*:*']).narrow(['gps:read']).list(), ['gps:read']);
});

test('authorize: 401 anonymous, 403 missing, self passes within the grant', (t) => {
  const e401 = t.throws(() => authorizePermission({ kind: 'anonymous' }, 'gps:read')) as HttpError;
  t.is(e401.status, 401);
  const e403 = t.throws(() => authorizePermission(user([]), 'users:read')) as HttpError;
  t.is(e403.status, 403);
  t.notThrows(() => authorizePermission(user([], 'me'), 'users:read', { selfId: 'me' }));
  const key = (scopes: string[]): Principal => ({
    kind: 'apiKey',
    apiKeyId: 'k',
    userId: 'me',
    permissions: new PermissionSet([]),
    grant: new PermissionSet(scopes),
    roleIds: [],
    keyRoleIds: [],
  });
  t.throws(() => authorizePermission(key(['gps:read']), 'users:read', { selfId: 'me' }));
  t.notThrows(() => authorizePermission(key(['users:read']), 'users:read', { selfId: 'me' }));
  t.true(can(user(['gps:read']), 'gps:read'));
  t.false(can({ kind: 'anonymous' }, 'gps:read'));
});

test('object-level: an OAuth client is managed by its owner, or with the permission of the action', (t) => {
  const client = subjects.oauthClient({ user_id: 'o' });
  t.notThrows(() => authorize(user([], 'o'), 'update', client));
  t.is((t.throws(() => authorize(user([], 'x'), 'update', client)) as HttpError).status, 403);
  t.notThrows(() => authorize(user(['oauth_clients:write'], 'x'), 'update', client));
  t.false(can(user(['oauth_clients:write'], 'x'), 'delete', client), 'write does not delete');
  t.is((t.throws(() => authorize({ kind: 'anonymous' }, 'read', client)) as HttpError).status, 401);
});

test('object-level: anonymous sockets get the refusals of a credential holding nothing', (t) => {
  const anon: Principal = { kind: 'anonymous' };
  t.is(refusal(anon, 'subscribe', subjects.channel('vessels')), null);
  t.is(refusal(anon, 'subscribe', subjects.channel('public:x')), null);
  t.is(refusal(anon, 'subscribe', subjects.channel('gps')), 'access denied to channel gps');
  t.is(refusal(user([]), 'subscribe', subjects.channel('gps')), 'access denied to channel gps');
  t.is(refusal(anon, 'send', subjects.wsRequest('createAuditEvent')), 'missing permission audit:write');
  t.is(refusal(user(['gps:read']), 'subscribe', subjects.channel('gps:boat-1')), null);
});

test('account events: email events need account:email named by an OAuth grant; sessions get them all', (t) => {
  const oauth = (scopes: string[]): Principal => ({
    kind: 'user',
    userId: 'u1',
    sessionId: null,
    via: 'oauth',
    oauthClientId: 'c',
    oauthTokenId: 't',
    permissions: new PermissionSet(scopes),
    grant: new PermissionSet(scopes),
    roleIds: [],
  });
  for (const type of ['emailChangeVerified', 'emailLinkVerified']) {
    t.true(can(user([]), 'receive', subjects.accountEvent(type)), type);
    t.false(can(oauth(['gps:read', 'devices:read']), 'receive', subjects.accountEvent(type)), type);
    // `*:*` never names an account scope.
    t.false(can(oauth(['*:*']), 'receive', subjects.accountEvent(type)), type);
    t.true(can(oauth(['gps:read', 'account:email']), 'receive', subjects.accountEvent(type)), type);
    t.true(can(oauth(['account:*']), 'receive', subjects.accountEvent(type)), type);
  }
  for (const type of ['permissionsUpdated', 'forceLogout', 'oauthConsentRevoked', 'toString'])
    t.true(can(oauth(['gps:read']), 'receive', subjects.accountEvent(type)), type);
});

test('system key allowlist: exact routes match only themselves, prefixes match whole segments', (t) => {
  t.true(systemKeyAllowed('/v1/users/oauth'));
  t.false(systemKeyAllowed('/v1/users/oauth/x'));
  t.true(systemKeyAllowed('/v1/users/email'));
  t.true(systemKeyAllowed('/v1/users/email/a@b.c'));
  t.false(systemKeyAllowed('/v1/users/emailx'));
  t.true(systemKeyAllowed('/v1/sessions/abc'));
  t.true(systemKeyAllowed('/v1/auth/reset-password/confirm'));
  t.false(systemKeyAllowed('/v1/auth/login/x'));
  t.true(systemKeyAllowed('/v1/gql'));
  t.false(systemKeyAllowed('/v1/gql/x'));
  t.true(systemKeyAllowed('/v1/ws'));
  t.false(systemKeyAllowed('/v1/users'));
  t.false(systemKeyAllowed('/health'));
  // As the router serves paths: any case, one trailing slash.
  t.true(systemKeyAllowed('/V1/GQL'));
  t.true(systemKeyAllowed('/v1/gql/'));
  t.true(systemKeyAllowed('/V1/Sessions/abc'));
  t.false(systemKeyAllowed('/V1/USERS'));
  t.false(systemKeyAllowed('/v1/gql//'));
});

test('default roles: Admin and System *:*, 2FA grants of spec §5.3, API roles as described', (t) => {
  const role = (name: string) => new PermissionSet(DEFAULT_ROLES.find((r) => r.name === name)!.permissions);
  t.is(DEFAULT_ROLES.length, 7);
  t.true(role('Admin').isSuperAdmin);
  t.true(role('System').isSuperAdmin);
  for (const name of ['User', 'Moderator', 'Developer']) {
    t.true(role(name).has('two_factor:read'), name);
    t.true(role(name).has('two_factor:write'), name);
    t.false(role(name).has('two_factor:manage'), name);
  }
  const ro = role('API Read Only');
  t.true(ro.has('two_factor:read'));
  t.false(ro.has('two_factor:write'));
  t.true(ro.has('gps:read') && ro.has('users:read') && ro.has('roles:read'));
  t.false(ALL_PERMISSIONS.filter((p) => !p.endsWith(':read') && p !== '*:*').some((p) => ro.has(p)));
  const full = role('API Full Access');
  t.true(full.has('gps:delete') && full.has('users:write'));
  t.false(full.has('admin:read'));
  t.false(full.isSuperAdmin);
});
