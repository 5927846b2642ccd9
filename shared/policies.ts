import { forbidden, unauthorized } from './errors';

/**
 * The one authorisation module. REST routes, GraphQL resolvers and the realtime process all ask
 * here; nothing checks a permission string anywhere else.
 */

/** A set of `resource:action` grants understanding the wildcards `*:*` and `resource:*`. */
export class PermissionSet {
  private readonly grants: Set<string>;

  constructor(grants: Iterable<string>) {
    this.grants = new Set(grants);
  }

  get isSuperAdmin(): boolean {
    return this.grants.has('*:*');
  }

  has(permission: string): boolean {
    if (this.grants.has('*:*') || this.grants.has(permission)) return true;
    const i = permission.indexOf(':');
    return i > 0 && this.grants.has(`${permission.slice(0, i)}:*`);
  }

  list(): string[] {
    return [...this.grants].sort();
  }

  /**
   * The grants of `requested` that this set covers: used to narrow API-key scopes and OAuth scopes
   * to what the owner holds. A wildcard request expands to the owner's matching grants.
   */
  narrow(requested: Iterable<string>): PermissionSet {
    const out = new Set<string>();
    for (const r of requested) {
      if (this.has(r)) out.add(r);
      else if (r === '*:*') this.grants.forEach((g) => out.add(g));
      else if (r.endsWith(':*')) {
        const res = r.slice(0, -1);
        this.grants.forEach((g) => g.startsWith(res) && out.add(g));
      }
    }
    return new PermissionSet(out);
  }

  union(other: PermissionSet): PermissionSet {
    return new PermissionSet([...this.grants, ...other.grants]);
  }
}

export const NO_PERMISSIONS = new PermissionSet([]);

export type Principal =
  | { kind: 'anonymous' }
  | {
      kind: 'user';
      userId: string;
      /** Internal session id when the credential is a session token. */
      sessionId: string | null;
      via: 'session' | 'oauth';
      oauthClientId?: string;
      permissions: PermissionSet;
      roleIds: string[];
    }
  | { kind: 'apiKey'; apiKeyId: string; userId: string | null; permissions: PermissionSet; roleIds: string[] }
  | { kind: 'system'; apiKeyId: string; permissions: PermissionSet };

export const ANONYMOUS: Principal = { kind: 'anonymous' };

/** The user a principal acts as, if any (a user-owned API key acts for its owner). */
export function actingUserId(p: Principal): string | null {
  if (p.kind === 'user') return p.userId;
  if (p.kind === 'apiKey') return p.userId;
  return null;
}

/** Does the principal hold the permission? Anonymous holds nothing. */
export function can(p: Principal, permission: string): boolean {
  return p.kind !== 'anonymous' && p.permissions.has(permission);
}

export function isSuperAdmin(p: Principal): boolean {
  return p.kind !== 'anonymous' && p.permissions.isSuperAdmin;
}

/** Throws 401 unless the caller is authenticated. */
export function requireAuthenticated(p: Principal): asserts p is Exclude<Principal, { kind: 'anonymous' }> {
  if (p.kind === 'anonymous') throw unauthorized();
}

/** Throws 401/403 unless the caller is a user (session or OAuth token), e.g. for session lists. */
export function requireUser(p: Principal, message = 'this endpoint needs a user credential'): asserts p is Extract<Principal, { kind: 'user' }> {
  requireAuthenticated(p);
  if (p.kind !== 'user') throw forbidden(message);
}

/** Throws 401 unless the caller is the system key. */
export function requireSystem(p: Principal, message = 'system key required'): asserts p is Extract<Principal, { kind: 'system' }> {
  if (p.kind !== 'system') throw unauthorized(message);
}

/**
 * Throws 401 for anonymous callers and 403 when the permission is missing. With `selfId`, a user
 * acting on their own record passes without the permission ('or self' in the spec).
 */
export function authorize(p: Principal, permission: string, opts: { selfId?: string | null } = {}): void {
  requireAuthenticated(p);
  if (opts.selfId && p.kind === 'user' && p.userId === opts.selfId) return;
  if (!p.permissions.has(permission)) throw forbidden(`missing permission ${permission}`);
}

/** Owner-or-permission rule for owned resources (OAuth clients, API keys, integrations). */
export function authorizeOwner(p: Principal, ownerId: string | null, adminPermission: string): void {
  requireAuthenticated(p);
  const uid = actingUserId(p);
  if (ownerId && uid === ownerId) return;
  if (!p.permissions.has(adminPermission)) throw forbidden('not the owner of this resource');
}

/**
 * System keys may only call these routes (spec §5.5). `exact` entries match the path alone,
 * `prefix` entries the path and everything below it.
 */
export const SYSTEM_KEY_ALLOWLIST: Array<{ path: string; match: 'exact' | 'prefix' }> = [
  { path: '/v1/users/oauth', match: 'exact' },
  { path: '/v1/users/email', match: 'prefix' },
  { path: '/v1/sessions', match: 'prefix' },
  { path: '/v1/auth/login', match: 'exact' },
  { path: '/v1/auth/2fa/check', match: 'exact' },
  { path: '/v1/auth/verify-email', match: 'exact' },
  { path: '/v1/auth/reset-password', match: 'prefix' },
  { path: '/v1/auth/register/verify', match: 'exact' },
  { path: '/v1/internal/audit', match: 'exact' },
  { path: '/v1/gql', match: 'exact' },
  { path: '/v1/ws', match: 'exact' },
];

/** Whether the system key may call `path` (trailing slashes ignored; prefixes match whole segments). */
export function systemKeyAllowed(path: string): boolean {
  const p = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return SYSTEM_KEY_ALLOWLIST.some(({ path: a, match }) =>
    match === 'exact' ? p === a : p === a || p.startsWith(a + '/'),
  );
}

/**
 * No escalation: a caller may hand out (as API-key scopes, or as a role's permissions) only grants
 * it holds itself; super admins are exempt. Throws 403 naming what is not theirs to give.
 */
export function authorizeGrant(p: Principal, requested: Iterable<string>, what = 'scopes'): void {
  requireAuthenticated(p);
  if (p.permissions.isSuperAdmin) return;
  const missing = [...requested].filter((r) => !p.permissions.has(r));
  if (missing.length) throw forbidden(`${what} exceed your own permissions: ${missing.join(', ')}`);
}

/** A caller may attach only roles it holds itself (super admins any role). */
export function authorizeRoleGrant(p: Principal, roleId: string): void {
  requireAuthenticated(p);
  if (p.permissions.isSuperAdmin) return;
  const held = p.kind === 'system' ? [] : p.roleIds;
  if (!held.includes(roleId)) throw forbidden('you may only assign roles you hold yourself');
}

/** Super admin (`*:*`) only, e.g. regenerating a system key. */
export function requireSuperAdmin(p: Principal, message = 'super admin required'): void {
  requireAuthenticated(p);
  if (!p.permissions.isSuperAdmin) throw forbidden(message);
}
