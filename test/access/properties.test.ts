import test from 'ava';
import fc from 'fast-check';
import { apiKeySource } from '../../shared/auth/credentialSources';
import { loadOAuthTokenEntry } from '../../shared/auth/oauthTokens';
import { sha256 } from '../../shared/crypto';
import { ALL_PERMISSIONS, DEFAULT_ROLES } from '../../shared/permissions';
import {
  authorize,
  authorizePermission,
  authorizeGrant,
  effectivePermissions,
  PermissionSet,
  Principal,
  subjects,
} from '../../shared/policies';
import { createKey, createOAuthToken, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

/**
 * Property tests of the two access rules, over random credential / role / scope combinations:
 * effective permissions ⊆ the owner's ∩ the grant, and no actor manages a user holding a permission
 * the actor lacks. Pure checks of shared/policies run many cases; checks through the real database
 * and HTTP stack fewer.
 */
const stack = useStack(test);

const RESOURCES = [...new Set(ALL_PERMISSIONS.map((p) => p.split(':')[0]))].filter((r) => r !== '*');
const grantArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ALL_PERMISSIONS) },
  { weight: 2, arbitrary: fc.constantFrom(...RESOURCES.map((r) => `${r}:*`)) },
  { weight: 1, arbitrary: fc.constantFrom('account:email', 'ws:ticket', 'account:*') },
);
const setArb = fc.array(grantArb, { maxLength: 12 }).map((g) => new PermissionSet(g));
const CHECKED = [...ALL_PERMISSIONS, 'account:email', 'ws:ticket'];

test('pure: effective permissions are always within the owner ∩ the grant', (t) => {
  fc.assert(
    fc.property(setArb, fc.oneof(fc.constant('all' as const), setArb), (owner, grant) => {
      const eff = effectivePermissions(owner, grant);
      for (const p of CHECKED) {
        if (eff.has(p) && !(owner.has(p) && (grant === 'all' || grant.has(p)))) return false;
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test('pure: no actor manages a user holding a permission the actor lacks', (t) => {
  fc.assert(
    fc.property(setArb, setArb, (actorPerms, targetPerms) => {
      const actor: Principal = {
        kind: 'user',
        userId: 'a',
        sessionId: 's',
        via: 'session',
        permissions: actorPerms,
        grant: 'all',
        roleIds: [],
      };
      let allowed = true;
      try {
        authorize(actor, 'manage', subjects.user('t', targetPerms));
      } catch {
        allowed = false;
      }
      return !allowed || CHECKED.every((p) => !targetPerms.has(p) || actorPerms.has(p));
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test('pure: a narrowed credential acts on itself and hands out scopes only within its grant', (t) => {
  fc.assert(
    fc.property(setArb, setArb, fc.constantFrom(...CHECKED), (owner, grant, permission) => {
      const key: Principal = {
        kind: 'apiKey',
        apiKeyId: 'k',
        userId: 'me',
        permissions: effectivePermissions(owner, grant),
        grant,
        roleIds: [],
        keyRoleIds: [],
      };
      const passes = (fn: () => void) => {
        try {
          fn();
          return true;
        } catch {
          return false;
        }
      };
      if (passes(() => authorizePermission(key, permission, { selfId: 'me' })) && !grant.has(permission)) return false;
      if (
        passes(() => authorizeGrant(key, [permission])) &&
        !(key.permissions.has(permission) || grant.names(permission))
      )
        return false;
      return true;
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

const roleIds = DEFAULT_ROLES.map((r) => r.id);
const perms = async (roles: string[]) => {
  const rows: Array<{ perm: string }> = await stack()
    .db('role_permissions as rp')
    .join('permissions as p', 'p.id', 'rp.permission_id')
    .whereIn('rp.role_id', roles)
    .select(stack().db.raw("p.resource || ':' || p.action as perm"));
  return new PermissionSet(rows.map((r) => r.perm));
};

test('database: API keys and OAuth tokens resolve to at most owner ∩ grant, whatever roles and scopes', async (t) => {
  const s = stack();
  await fc.assert(
    fc.asyncProperty(
      fc.subarray(roleIds),
      fc.array(grantArb, { maxLength: 6 }),
      fc.subarray(roleIds, { maxLength: 2 }),
      async (ownerRoles, scopes, keyRoles) => {
        const owner = await createUser(s.db, { roles: ownerRoles });
        const ownerPerms = await perms(ownerRoles);
        const key = await createKey({ userId: owner.id, scopes });
        if (keyRoles.length)
          await s.db('api_key_roles').insert(keyRoles.map((role_id) => ({ api_key_id: key.id, role_id })));
        const keyGrant = new PermissionSet([...scopes, ...(await perms(keyRoles)).list()]);
        const keyEntry = await apiKeySource.load(s.db, sha256(key.key));
        const oauth = await createOAuthToken(s.db, owner.id, scopes);
        const tokenEntry = await loadOAuthTokenEntry(s.db, { hash: sha256(oauth.token) });
        for (const p of CHECKED) {
          if (keyEntry!.principal.permissions.has(p) && !(ownerPerms.has(p) && keyGrant.has(p))) return false;
          if (tokenEntry!.principal.permissions.has(p) && !(ownerPerms.has(p) && new PermissionSet(scopes).has(p)))
            return false;
        }
        return true;
      },
    ),
    { numRuns: 25 },
  );
  t.pass();
});

test('HTTP: a user is changed by another only when the actor holds every permission the user holds', async (t) => {
  const s = stack();
  await fc.assert(
    fc.asyncProperty(fc.subarray(roleIds, { minLength: 1 }), fc.subarray(roleIds), async (actorRoles, targetRoles) => {
      const [actor, target] = await Promise.all([
        createUser(s.db, { roles: actorRoles }),
        createUser(s.db, { roles: targetRoles }),
      ]);
      const [a, tp] = await Promise.all([perms(actorRoles), perms(targetRoles)]);
      const r = await s.request('PATCH', `/v1/users/${target.id}`, {
        token: actor.token,
        body: { privacy_mode: true },
      });
      const outranks = tp.list().every((p) => a.has(p));
      if (r.status === 200) return a.has('users:write') && outranks;
      return r.status === 403 && !(a.has('users:write') && outranks);
    }),
    { numRuns: 30 },
  );
  t.pass();
});
