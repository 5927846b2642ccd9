import { badRequest, forbidden, HttpError, notFound, unauthorized } from './errors';
import { isRoutePath, isUnderRoutePath } from './routePaths';

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

  /** Names `scope` explicitly: the exact grant or its `resource:*`, never through `*:*`. */
  names(scope: string): boolean {
    if (this.grants.has(scope)) return true;
    const i = scope.indexOf(':');
    return i > 0 && this.grants.has(`${scope.slice(0, i)}:*`);
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

/**
 * What a credential allows before its owner's permissions bound it: `'all'` for a session (and the
 * system key), the granted scopes for an OAuth token, the scopes plus the roles' permissions for an
 * API key.
 */
export type Grant = 'all' | PermissionSet;

export type Principal =
  | { kind: 'anonymous' }
  | {
      kind: 'user';
      userId: string;
      /** Internal session id when the credential is a session token. */
      sessionId: string | null;
      via: 'session' | 'oauth';
      oauthClientId?: string;
      /** Row id of the OAuth access token (OAuth credentials only). */
      oauthTokenId?: string;
      /** Effective permissions: the owner's current permissions ∩ the grant. */
      permissions: PermissionSet;
      grant: Grant;
      /** Roles the user holds. */
      roleIds: string[];
    }
  | {
      kind: 'apiKey';
      apiKeyId: string;
      userId: string | null;
      /** Effective permissions: the owner's current permissions ∩ (scopes ∪ the key's roles' permissions). */
      permissions: PermissionSet;
      grant: PermissionSet;
      /** Roles the owner holds (what the key may hand on). */
      roleIds: string[];
      /** Roles put on the key itself. */
      keyRoleIds: string[];
    }
  | { kind: 'system'; apiKeyId: string; permissions: PermissionSet };

export const ANONYMOUS: Principal = { kind: 'anonymous' };

/**
 * The one place a request's power is computed: the owner's current permissions intersected with
 * the credential's grant. Used by the credential resolver for sessions, OAuth tokens and API keys
 * alike, and by the realtime process when it rebuilds a ticket's principal.
 */
export function effectivePermissions(owner: PermissionSet, grant: Grant): PermissionSet {
  return grant === 'all' ? owner : owner.narrow(grant.list());
}

/**
 * Scopes naming account-security operations. A session holds them on its own account; an OAuth
 * token or API key only when its grant names them explicitly (the exact scope or `account:*`;
 * `*:*` does not count), so a token granted for tracking data can never take over the account.
 */
export const ACCOUNT_SCOPES = {
  /** Email change, email/password linking, platform accounts (primary, unlink). */
  email: 'account:email',
  /** Listing and revoking sessions. */
  sessions: 'account:sessions',
  /** Scheduling or cancelling the deletion of the own account. */
  delete: 'account:delete',
  /** Listing and revoking OAuth consents. */
  consents: 'account:consents',
  /** Minting WebSocket tickets (REST and GraphQL). */
  wsTicket: 'ws:ticket',
  /** Downloading the personal data export and listing past exports. */
  export: 'account:export',
  /** Reading the own activity log (sign-ins with IPs and user agents) and reporting its events. */
  audit: 'account:audit',
} as const;

export type AccountScope = (typeof ACCOUNT_SCOPES)[keyof typeof ACCOUNT_SCOPES];

const ACCOUNT_SCOPE_LIST: readonly string[] = Object.values(ACCOUNT_SCOPES);

/**
 * Does a requested scope reach account-security operations: an account scope itself, or a
 * `resource:*` wildcard that names one (`account:*`, `ws:*`)? `*:*` does not: it never names them.
 */
export function reachesAccountScope(scope: string): boolean {
  if (ACCOUNT_SCOPE_LIST.includes(scope)) return true;
  if (!scope.endsWith(':*') || scope === '*:*') return false;
  const resource = scope.slice(0, -1);
  return ACCOUNT_SCOPE_LIST.some((a) => a.startsWith(resource));
}

/**
 * Does a granted scope set (an OAuth consent, a client's allowed scopes, a refresh token's grant)
 * cover a requested scope? A scope that reaches account-security operations must be named by the
 * grant (the exact scope or its `resource:*`): a grant of `*:*` never widens into one.
 */
export function grantCovers(granted: PermissionSet, scope: string): boolean {
  return reachesAccountScope(scope) ? granted.names(scope) : granted.has(scope);
}

/**
 * A requested scope list narrowed to what `granted` covers (`grantCovers`); a wildcard request
 * expands to the granted scopes it matches. A client whose allowed scopes narrow keeps only what it
 * may still ask for.
 */
export function narrowGrant(granted: PermissionSet, requested: Iterable<string>): PermissionSet {
  const out = new Set<string>();
  const held = granted.list();
  for (const r of requested) {
    if (grantCovers(granted, r)) out.add(r);
    else if (r === '*:*') held.forEach((g) => out.add(g));
    else if (r.endsWith(':*')) {
      const res = r.slice(0, -1);
      held.forEach((g) => g.startsWith(res) && out.add(g));
    }
  }
  return new PermissionSet(out);
}

/**
 * The scopes of a stored grant (a token's, a consent's) that a client allowed `allowed` may still
 * ask for (narrowGrant), in their stored order when nothing is cut: the client's allowed scopes
 * are a ceiling over what its users granted, applied where a token is issued or read.
 */
export function grantStillAllowed(allowed: readonly string[], scopes: readonly string[]): string[] {
  const set = new PermissionSet(allowed);
  return scopes.every((s) => grantCovers(set, s)) ? [...scopes] : narrowGrant(set, scopes).list();
}

/** The user a principal acts as, if any (a user-owned API key acts for its owner). */
export function actingUserId(p: Principal): string | null {
  if (p.kind === 'user') return p.userId;
  if (p.kind === 'apiKey') return p.userId;
  return null;
}

/**
 * The id an audit event names as actor: the acting user, else the acting API key (ownerless and
 * system keys); null for anonymous callers.
 */
export function actorIdOf(p: Principal): string | null {
  if (p.kind === 'anonymous') return null;
  return actingUserId(p) ?? (p.kind === 'apiKey' || p.kind === 'system' ? p.apiKeyId : null);
}

/** Does the principal hold the permission (effective, owner ∩ grant)? Anonymous holds nothing. */
function holds(p: Principal, permission: string): boolean {
  return p.kind !== 'anonymous' && p.permissions.has(permission);
}

export function isSuperAdmin(p: Principal): boolean {
  return p.kind !== 'anonymous' && p.permissions.isSuperAdmin;
}

/** Does the credential's grant name `scope` explicitly (exact or `resource:*`, never via `*:*`)? */
function grantNames(p: Principal, scope: string): boolean {
  if (p.kind === 'anonymous') return false;
  if (p.kind === 'system' || p.grant === 'all') return true;
  return p.grant.names(scope);
}

/** May the credential use `permission` on its owner's own record ("or self", bounded by the grant)? */
function grantAllowsSelf(p: Principal, permission: string): boolean {
  if (p.kind === 'user') return p.grant === 'all' || p.grant.has(permission);
  if (p.kind === 'apiKey') return p.grant.has(permission);
  return false;
}

/** Throws 401 unless the caller is authenticated. */
export function requireAuthenticated(p: Principal): asserts p is Exclude<Principal, { kind: 'anonymous' }> {
  if (p.kind === 'anonymous') throw unauthorized();
}

/** Throws 401 unless the caller is the system key. */
export function requireSystem(
  p: Principal,
  message = 'system key required',
): asserts p is Extract<Principal, { kind: 'system' }> {
  if (p.kind !== 'system') throw unauthorized(message);
}

/** Throws 403 unless a narrowed credential (OAuth token, API key) explicitly names the account scope. */
export function requireAccountScope(p: Principal, scope: AccountScope): void {
  requireAuthenticated(p);
  if (!grantNames(p, scope)) throw forbidden(`this credential's grant does not include ${scope}`);
}

/**
 * Throws unless the credential may hold a WebSocket ticket: a user credential (API keys and the
 * system key connect with an Authorization header instead) whose grant names `ws:ticket`. Checked
 * when a ticket is minted and again when it is redeemed, on the credential that minted it as it is
 * then: a ticket is worth no more than that credential still grants.
 */
export function authorizeWsTicket(p: Principal): asserts p is Extract<Principal, { kind: 'user' }> {
  requireAuthenticated(p);
  if (p.kind !== 'user')
    throw forbidden('a WebSocket ticket needs a user credential; API keys connect with an Authorization header');
  requireAccountScope(p, ACCOUNT_SCOPES.wsTicket);
}

/**
 * Throws 401 for anonymous callers and 403 when the permission is missing. With `selfId`, a user
 * acting on their own record passes without the permission ('or self' in the spec), but only as far
 * as the credential's grant allows: an OAuth token or API key needs the permission among its
 * scopes. With `scope`, the operation is account-security and a narrowed credential must also name
 * that scope explicitly, whoever the target is.
 */
export function authorizePermission(
  p: Principal,
  permission: string,
  opts: { selfId?: string | null; scope?: AccountScope } = {},
): void {
  requireAuthenticated(p);
  if (opts.scope) requireAccountScope(p, opts.scope);
  if (opts.selfId && actingUserId(p) === opts.selfId && grantAllowsSelf(p, permission)) return;
  if (!p.permissions.has(permission)) throw forbidden(`missing permission ${permission}`);
}

/**
 * The caller's own account: a user credential or a user-owned API key acting for its owner; with
 * `permission`, a narrowed credential needs it among its scopes (self-service reads and writes).
 * Returns the user id.
 */
export function authorizeSelf(p: Principal, permission?: string): string {
  requireAuthenticated(p);
  const uid = actingUserId(p);
  if (!uid) throw forbidden('this credential does not act for a user');
  if (permission && !grantAllowsSelf(p, permission) && !p.permissions.has(permission))
    throw forbidden(`this credential's grant does not include ${permission}`);
  return uid;
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

/**
 * Whether the system key may call `path`, compared as the router matches paths (shared/routePaths:
 * any case, one trailing slash; prefixes match whole segments).
 */
export function systemKeyAllowed(path: string): boolean {
  return SYSTEM_KEY_ALLOWLIST.some(({ path: a, match }) =>
    match === 'exact' ? isRoutePath(path, a) : isUnderRoutePath(path, a),
  );
}

/**
 * No escalation: a caller may hand out (as API-key scopes) only grants it holds itself: an
 * effective permission (spec §4.20: a subset of the caller's permissions, super admins exempt), or
 * an account scope (not a permission: it names operations on the own account), or a wildcard
 * reaching one (`account:*`), that its own credential names: a `*:*` OAuth token of a super admin
 * holds every permission but names no account scope. Throws 403 naming what is not theirs to give.
 */
export function authorizeGrant(p: Principal, requested: Iterable<string>, what = 'scopes'): void {
  requireAuthenticated(p);
  const missing = [...requested].filter((r) => !(reachesAccountScope(r) ? grantNames(p, r) : p.permissions.has(r)));
  if (missing.length) throw forbidden(`${what} exceed your own permissions: ${missing.join(', ')}`);
}

/**
 * Whether a new `expires_at` keeps a key alive longer than it is now: a later date, or none (never
 * expires) where it had one. Like switching the key back on, that is a takeover of what it confers
 * (`authorizeKeyTakeover`); an earlier date only narrows. Without this a credential with nothing
 * but `api_keys:write` (an OAuth token, a narrow key) could keep its owner's wider keys alive for
 * ever, though it may not regenerate or reactivate them.
 */
export function extendsKeyLife(current: Date | null, next: Date | null): boolean {
  return current !== null && (next === null || next.getTime() > current.getTime());
}

/**
 * Taking over what an API key confers: regenerating it (the answer carries its new value),
 * switching it back on or extending its life (`extendsKeyLife`). The caller must hold all of it, as if issuing such a key (`authorizeGrant`):
 * the key's scopes and its roles' permissions as far as its owner holds them (`ownerPermissions`:
 * the owner's current permissions; for an ownerless key, its roles'), and the account scopes it
 * names. Without this a narrowed credential with `api_keys:write` (an OAuth token, a narrow key)
 * could regenerate its owner's wider keys and use them. The owner's own session always holds what
 * the owner's keys confer.
 */
export function authorizeKeyTakeover(
  p: Principal,
  key: { scopes: readonly string[]; isSystem: boolean },
  ownerPermissions: PermissionSet,
  rolePermissions: readonly string[],
): void {
  const conferred = key.isSystem ? ['*:*'] : ownerPermissions.narrow([...key.scopes, ...rolePermissions]).list();
  const account = key.scopes.filter(reachesAccountScope);
  authorizeGrant(p, new Set([...conferred, ...account]), "the key's scopes and roles");
}

/**
 * GraphQL root fields the system key may run (spec §5.5: it is confined to what names it); every
 * other operation answers 403 to it, as a REST route off its allowlist would.
 */
const SYSTEM_KEY_GRAPHQL_FIELDS: ReadonlySet<string> = new Set([
  'me',
  'oauthSignin',
  'findUserByPlatform',
  'createAuditEvent',
  'logAuditEvent',
  'twoFactorStatus',
  'userRequiresTwoFactor',
  'setupTwoFactor',
  'verifyTwoFactor',
  'disableTwoFactor',
  'regenerateBackupCodes',
  '__typename',
  '__schema',
  '__type',
]);

/** Throws 403 when the system key asks for a GraphQL root field that does not name it. */
export function authorizeGraphqlRootField(p: Principal, field: string): void {
  if (p.kind === 'system' && !SYSTEM_KEY_GRAPHQL_FIELDS.has(field))
    throw forbidden(`system key not permitted on the GraphQL field ${field}`);
}

// ---------------------------------------------------------------------------------------------
// Object-level rules, Outline-style: `authorize(principal, action, subject)` throws 401/403 (or
// the rule's own error), `can(principal, action, subject)` answers a boolean, e.g. to filter a
// list. Subjects are tagged records (`{ type: 'apiKey', ... }`, built by `subjects.*` below from
// rows), so REST routes, GraphQL resolvers and the realtime process pass the same thing and get
// the same answer. Each rule answers `true` or the error to throw.
// ---------------------------------------------------------------------------------------------

type Authenticated = Exclude<Principal, { kind: 'anonymous' }>;
type Verdict = true | HttpError;

export interface SubjectTypes {
  /** An API key (spec §4.20): its owner, whether it is the system key, whether an admin switched it off. */
  apiKey: { userId: string | null; isSystem: boolean; locked: boolean };
  /** An OAuth client: its owner. */
  /** `ownerPermissions`: what the owner holds, for a change by someone else (hierarchy); none for reads. */
  oauthClient: { userId: string | null; ownerPermissions?: PermissionSet };
  /**
   * A role with the permissions it grants; `holders`: everything its holders hold, for a change to
   * the role (it changes every holder); none for giving or taking it (the user is checked then).
   */
  role: { id: string; isSystem: boolean; permissions: PermissionSet; holders?: PermissionSet };
  /** One permission of a role, added or removed; `holders`: everything the role's holders hold. */
  rolePermission: { name: string; holders: PermissionSet };
  /** Another user, with every permission they hold (hierarchy). */
  user: { id: string; permissions: PermissionSet };
  /** A user account's data reached by a lookup (by email, by platform account). */
  userLookup: { userId: string | null };
  /** A one-time token mailed to a user (email change or link confirmation). */
  accountToken: { userId: string };
  /** The caller's sessions (list, revoke): session credentials only. */
  ownSessions: { userId?: undefined };
  /** The caller's OAuth consents (list, revoke): sessions, OAuth tokens and user-owned API keys (with `account:consents`). */
  ownConsents: { userId?: undefined };
  /** What a trusted service says on others' behalf: the client's address, the user it relays, its own name. */
  relay: { userId?: undefined };
  /** A realtime channel (spec §4.26). */
  channel: { name: string };
  /** An account event pushed on the user's own channel (`user:<id>`), by its `type`. */
  accountEvent: { eventType: string };
  /** A user's two-factor authentication (spec §4.15, §5.3); `permissions`: what that user holds (hierarchy). */
  twoFactor: { userId: string; permissions: PermissionSet };
  /** A request sent over the WebSocket (audit, chat settings and sync, moderation). */
  wsRequest: { payload: string; action?: string; scope?: string };
  /** A stream-platform integration (spec §4.25): its owner. */
  integration: { userId: string };
  /** A pending integration connect, completed by the browser's callback: the user it was issued to. */
  integrationConnect: { userId: string };
  /** The BullMQ dashboard (Bull Board) at /v1/admin/queues: every queue, its jobs, retries. */
  queueDashboard: { name?: undefined };
}

export type SubjectType = keyof SubjectTypes;
export type Subject<T extends SubjectType = SubjectType> = { [K in T]: { type: K } & SubjectTypes[K] }[T];

type Rule<T extends SubjectType> = (p: Authenticated, s: SubjectTypes[T]) => Verdict;

const needs = (p: Authenticated, permission: string): Verdict =>
  p.permissions.has(permission) || forbidden(`missing permission ${permission}`);
const isOwner = (p: Authenticated, ownerId: string | null) => ownerId !== null && actingUserId(p) === ownerId;

/**
 * Allowed when the caller holds every permission of `held` (the hierarchy rule and its kin); else
 * 403 with `refusal` followed by the first few it lacks.
 */
const holdsAll = (p: Authenticated, held: PermissionSet, refusal: string): Verdict => {
  const missing = held.list().filter((perm) => !p.permissions.has(perm));
  return missing.length === 0 || forbidden(`${refusal} (missing ${missing.slice(0, 5).join(', ')})`);
};
const OUTRANK = 'you may only manage users whose every permission you hold';

/** Owner of the key, or a super admin; the system key belongs to super admins only. */
const ownKey: Rule<'apiKey'> = (p, k) => {
  if (k.isSystem) return p.permissions.isSuperAdmin || forbidden('system keys are managed by super admins only');
  if (p.permissions.isSuperAdmin || isOwner(p, k.userId)) return true;
  return forbidden('not the owner of this resource');
};

/** Owner of the client, or the oauth_clients permission of the action. */
const ownClient =
  (permission: string): Rule<'oauthClient'> =>
  (p, c) =>
    isOwner(p, c.userId) || p.permissions.has(permission) || forbidden('not the owner of this resource');

/**
 * Changing or deleting a client: its owner, or the oauth_clients permission of the action and the
 * hierarchy rule over the owner (holding every permission the owner holds). A client's redirect
 * URIs and secret decide where its users' authorization codes go: whoever rewrites an
 * administrator's client receives what that administrator grants through it. A client without an
 * owner is the install's (an operator registered it, e.g. the first-party app): its owner holds
 * everything, so only a holder of everything changes it.
 */
const changeClient =
  (permission: string): Rule<'oauthClient'> =>
  (p, c) => {
    if (isOwner(p, c.userId)) return true;
    if (!p.permissions.has(permission)) return forbidden('not the owner of this resource');
    if (c.userId === null)
      return p.permissions.isSuperAdmin || forbidden('clients without an owner are changed by super admins only');
    return (
      !c.ownerPermissions ||
      holdsAll(p, c.ownerPermissions, 'you may only change clients of users whose every permission you hold')
    );
  };

/** Holding every permission a role grants (giving, taking or deleting it moves all of them). */
const holdsRole: Rule<'role'> = (p, r) =>
  holdsAll(p, r.permissions, 'cannot manage a role granting permissions you do not hold');

/**
 * A change to a role is a change to every holder: the hierarchy rule over all of them, as if the
 * role were given to or taken from each (else emptying or deleting a role would demote users the
 * actor may not manage). Fails closed when the route did not load the holders.
 */
const managesHolders = (p: Authenticated, holders: PermissionSet | undefined): Verdict =>
  holders ? holdsAll(p, holders, 'you may only change roles whose every holder you may manage') : forbidden(OUTRANK);

/** The first refusal of several checks, in order (each runs only when those before it allowed). */
const every = (...checks: Array<() => Verdict>): Verdict => {
  for (const check of checks) {
    const v = check();
    if (v !== true) return v;
  }
  return true;
};

/**
 * Two-factor (spec §4.15, §5.3): one's own with two_factor:read / two_factor:write (effective, so a
 * narrowed credential needs it among its scopes); another user's with two_factor:manage and holding
 * every permission they hold (hierarchy), or as a super admin. The system key holds `*:*`.
 */
const twoFactorRule = (p: Authenticated, t: SubjectTypes['twoFactor'], own: string): Verdict => {
  if (actingUserId(p) === t.userId) return needs(p, own);
  if (p.permissions.isSuperAdmin) return true;
  if (!p.permissions.has('two_factor:manage'))
    return forbidden("missing permission two_factor:manage (needed for another user's two-factor authentication)");
  return holdsAll(p, t.permissions, OUTRANK);
};

/**
 * Whose two-factor authentication a call is about: `user_id` when given, else the caller's own
 * user. The system key acts for nobody, so it must name the user (400 without); so must a key
 * without an owner.
 */
export function twoFactorTargetId(p: Principal, userId: string | null | undefined): string {
  requireAuthenticated(p);
  if (userId) return userId;
  if (p.kind === 'system') throw badRequest('user_id: is required when the system key calls');
  const uid = actingUserId(p);
  if (!uid) throw badRequest('user_id: is required for a credential that does not act for a user');
  return uid;
}

/** Channels anyone may join, anonymous callers included. */
const isPublicChannel = (name: string) => name === 'vessels' || name === 'public' || name.startsWith('public:');

/** Channel rules of spec §4.26. */
function channelRule(p: Authenticated, name: string): Verdict {
  if (isPublicChannel(name)) return true;
  const denied = forbidden(`access denied to channel ${name}`);
  if (name.startsWith('user:')) return (p.kind === 'user' && name === `user:${p.userId}`) || denied;
  if (name.startsWith('admin:')) return p.permissions.has('admin:read') || denied;
  if (name === 'gps' || name.startsWith('gps:')) return p.permissions.has('gps:read') || denied;
  if (name === 'geofence' || name.startsWith('geofence:')) return p.permissions.has('geofences:read') || denied;
  return forbidden(`unknown channel ${name}`);
}

/**
 * Account events that carry what an account-security operation would show: a narrowed credential
 * receives them only when its grant names that scope, as it needs to for the operation itself
 * (docs/access-control.md). The new address of an email change is the email flows' (account:email).
 */
const ACCOUNT_EVENT_SCOPES: Readonly<Record<string, AccountScope>> = {
  emailChangeVerified: ACCOUNT_SCOPES.email,
  emailLinkVerified: ACCOUNT_SCOPES.email,
};

/** The permission each WebSocket request needs: that of the matching REST endpoint. */
function wsRequestPermission(r: SubjectTypes['wsRequest']): string | null {
  switch (r.payload) {
    case 'createAuditEvent':
      return 'audit:write';
    case 'chatSettingsRequest':
      return (r.action ?? 'CHAT_SETTINGS_GET') === 'CHAT_SETTINGS_GET' ? 'chat:read' : 'chat:edit';
    case 'chatSyncRequest':
      return r.scope === 'CHAT_SYNC_SCOPE_MEMBERS' ? 'chat:guild.sync' : 'chat:sync';
    case 'moderationRequest':
      return 'chat:edit';
    default:
      return null;
  }
}

/** Whether the identifier found is the caller's own, as far as the credential's grant allows reading oneself. */
const ownLookup = (p: Principal, u: { userId: string | null }) =>
  u.userId !== null && u.userId === actingUserId(p) && grantAllowsSelf(p, 'users:read');

/** Finding a user by an identifier: the system key and holders of users:read find anyone; others only themselves. */
const lookupOf =
  (refusal: string): Rule<'userLookup'> =>
  (p, u) =>
    p.kind === 'system' || p.permissions.has('users:read') || ownLookup(p, u) || forbidden(refusal);

/** Integrations are their owner's alone: anyone else is told there is no such integration. */
const ownIntegration: Rule<'integration'> = (p, i) => isOwner(p, i.userId) || notFound('integration');

const rules: { [T in SubjectType]: Record<string, Rule<T>> } = {
  apiKey: {
    read: ownKey,
    update: ownKey,
    regenerate: ownKey,
    delete: (p, k) => (k.isSystem ? forbidden('system keys cannot be deleted') : ownKey(p, k)),
    /**
     * Changing what a key grants or whether it works (scopes, is_active, expires_at). A system key
     * holds every scope and is kept active from SYSTEM_API_KEY at every start: stored scopes would
     * be ignored, and switching it off would be the deletion the spec forbids. Name and
     * description stay editable (`update`).
     */
    changeGrant: (p, k) =>
      k.isSystem
        ? forbidden(
            'a system key holds every scope and cannot be switched off or expire: only its name and description change',
          )
        : ownKey(p, k),
    /**
     * Linking it to a device as the device's tracker key: "only the key's owner or system keys may
     * link" (spec §4.3). Holding `*:*` is no exception: a device's points are written with the key,
     * so whoever links it decides where another user's tracker reports.
     */
    linkToDevice: (p, k) =>
      p.kind === 'system' ||
      (!k.isSystem && isOwner(p, k.userId)) ||
      forbidden("api_key_id: only the key's owner or a system key may link it to a device"),
    /** Switching a key back on: an administrator's switch-off (or the account's deletion) sticks for the owner. */
    reactivate: (p, k) =>
      !(k.locked && isOwner(p, k.userId)) ||
      forbidden(
        'is_active: this key was switched off by an administrator or by the deletion of the account; only an administrator can switch it back on',
      ),
  },
  oauthClient: {
    read: ownClient('oauth_clients:read'),
    update: changeClient('oauth_clients:write'),
    delete: changeClient('oauth_clients:delete'),
    /** Marking a client first-party (consent skipped) is an administrator's decision. */
    markFirstParty: (p) => needs(p, 'oauth_clients:write'),
  },
  role: {
    /** Giving it to a user or taking it away. */
    grant: holdsRole,
    /** Putting it on an API key: only roles the owner holds, and all they grant. */
    assignToKey: (p, r) => {
      if (!p.permissions.isSuperAdmin && !(p.kind === 'system' ? [] : p.roleIds).includes(r.id))
        return forbidden('you may only assign roles you hold yourself');
      return holdsRole(p, r);
    },
    /**
     * Changing it (name, description, whether its holders need two-factor): holding all it grants,
     * as for giving or deleting it. Otherwise a holder of roles:write could switch off the
     * two-factor requirement of a role above it (Admin).
     */
    update: (p, r) =>
      every(
        () => holdsRole(p, r),
        () => managesHolders(p, r.holders),
      ),
    rename: (_p, r) => !r.isSystem || forbidden('system roles cannot be renamed'),
    /** Deleting takes it from every holder: not a system role, holding all it grants, managing every holder. */
    delete: (p, r) =>
      every(
        () => !r.isSystem || forbidden('system roles cannot be deleted'),
        () => holdsRole(p, r),
        () => managesHolders(p, r.holders),
      ),
  },
  rolePermission: {
    add: (p, x) =>
      every(
        () => p.permissions.has(x.name) || forbidden(`you may only add permissions you hold yourself (${x.name})`),
        () => managesHolders(p, x.holders),
      ),
    remove: (p, x) =>
      every(
        () => p.permissions.has(x.name) || forbidden(`you may only remove permissions you hold yourself (${x.name})`),
        () => managesHolders(p, x.holders),
      ),
  },
  user: {
    /** Hierarchy: manage another user only holding every permission they hold; oneself always. */
    manage: (p, u) => {
      return actingUserId(p) === u.id || holdsAll(p, u.permissions, OUTRANK);
    },
  },
  userLookup: {
    /**
     * By email (GET /v1/users/email/{email}): spec §4.11 lets the system key look up any address
     * and every user only their own, whatever their permissions; a user with users:read finds
     * others through GET /v1/users instead.
     */
    read: (p, u) => p.kind === 'system' || ownLookup(p, u) || forbidden('you may only look up your own email address'),
    /**
     * By platform account (GraphQL findUserByPlatform), the same rule. `userId` is whose account it
     * is: another user's and an unlinked one are refused alike, so a refusal tells nothing.
     */
    readAccount: lookupOf('you may only look up your own platform accounts'),
  },
  accountToken: {
    /** Someone else's token is reported like an unknown one (the system key relays link clicks). */
    use: (p, t) =>
      p.kind === 'system' ||
      t.userId === actingUserId(p) ||
      p.permissions.has('users:write') ||
      badRequest('invalid or expired token'),
  },
  ownConsents: {
    // The route already requires `account:consents` in a token's or key's grant (docs/access-control.md).
    manage: (p) =>
      p.kind === 'user' ||
      (p.kind === 'apiKey' && p.userId !== null) ||
      forbidden('this endpoint needs a user credential or a user-owned API key'),
  },
  relay: {
    /** Named by X-Forwarded-For (the web app relaying a sign-in): the system key only. */
    forwardClientAddress: (p) => p.kind === 'system' || forbidden('only the system key relays client addresses'),
    /** A WebSocket connection acting for `?userId=`: the system key only. */
    actForUser: (p) => p.kind === 'system' || forbidden('only the system key may act for a user'),
    /** X-Source-Service: API keys and the system key (services), never a user's session. */
    declareSourceService: (p) =>
      p.kind === 'apiKey' || p.kind === 'system' || forbidden('only service credentials name a source service'),
  },
  ownSessions: {
    manage: (p) =>
      (p.kind === 'user' && p.via === 'session' && !!p.sessionId) || forbidden('this endpoint needs a session token'),
  },
  twoFactor: {
    read: (p, t) => twoFactorRule(p, t, 'two_factor:read'),
    write: (p, t) => twoFactorRule(p, t, 'two_factor:write'),
  },
  channel: {
    subscribe: (p, c) => channelRule(p, c.name),
    /** The internal chat bot channel: the system key, or an API key with chat:sync. */
    actAsChatBot: (p) =>
      p.kind === 'system' ||
      (p.kind === 'apiKey' && p.permissions.has('chat:sync')) ||
      forbidden('access denied to chat bot channel'),
  },
  accountEvent: {
    /** Whether a socket on its user's channel gets the event: a session always, a narrowed credential per ACCOUNT_EVENT_SCOPES. */
    receive: (p, e) => {
      const scope = Object.prototype.hasOwnProperty.call(ACCOUNT_EVENT_SCOPES, e.eventType)
        ? ACCOUNT_EVENT_SCOPES[e.eventType]
        : undefined;
      return !scope || grantNames(p, scope) || forbidden(`this credential's grant does not include ${scope}`);
    },
  },
  integration: {
    read: ownIntegration,
    update: ownIntegration,
    refresh: ownIntegration,
    delete: ownIntegration,
  },
  integrationConnect: {
    /** The callback is authenticated by its state; a Bearer credential sent along must be the same user's. */
    complete: (p, c) =>
      isOwner(p, c.userId) || forbidden('the state was issued to another user than the credential sent with it'),
    /**
     * Creating the integration, judged on the connect's user as they are now (rebuilt when the
     * callback arrives), not as they were when the state was issued: a ban, a deletion or a lost
     * integrations:write in between voids the connect.
     */
    finish: (p, c) =>
      (isOwner(p, c.userId) && needs(p, 'integrations:write')) || forbidden('you may no longer connect integrations'),
  },
  queueDashboard: {
    /** Seeing jobs exposes every queue's payloads: administrators only. */
    view: (p) => needs(p, 'admin:read'),
    /**
     * Changing them (retry, promote, remove, clean, empty, pause a queue) is more than reading: a
     * super admin only. `admin:read` is the catalog's only administrative permission, and a
     * credential narrowed to it (an API key, an OAuth token) must not empty the mail queue.
     */
    manage: (p) => needs(p, '*:*'),
  },
  wsRequest: {
    send: (p, r) => {
      const permission = wsRequestPermission(r);
      if (!permission) return badRequest('not a request');
      return needs(p, permission);
    },
  },
};

/** Actions defined for each subject type. */
export type Action<T extends SubjectType> = keyof (typeof rules)[T] & string;

function verdict<T extends SubjectType>(p: Principal, action: Action<T>, subject: Subject<T>): Verdict {
  if (p.kind === 'anonymous') {
    // Realtime answers anonymous sockets with the same refusals as anyone holding nothing.
    const s = subject as Subject;
    if (s.type === 'channel' && action === 'subscribe')
      return isPublicChannel(s.name) || forbidden(`access denied to channel ${s.name}`);
    if (s.type === 'wsRequest' && action === 'send') {
      const permission = wsRequestPermission(s);
      return permission ? forbidden(`missing permission ${permission}`) : badRequest('not a request');
    }
    // The browser reaching an integration callback carries no credential: the state authenticates it.
    if (s.type === 'integrationConnect' && action === 'complete') return true;
    return unauthorized();
  }
  const rule = (rules[subject.type] as Record<string, Rule<T>>)[action];
  if (!rule) throw new Error(`no policy for ${action} on ${subject.type}`);
  return rule(p, subject as unknown as SubjectTypes[T]);
}

/** Throws 401 for anonymous callers, else the rule's 403 (or its own error) unless it allows. */
export function authorize<T extends SubjectType>(
  p: Principal,
  action: Action<T>,
  subject: Subject<T>,
): asserts p is Authenticated {
  const v = verdict(p, action, subject);
  if (v !== true) throw v;
}

/**
 * Without a subject: does the principal hold the permission (effective: owner ∩ grant)? With one:
 * would `authorize(p, action, subject)` allow? For filtering lists and for answers that are not
 * errors (realtime refusals, GraphQL nulls).
 */
export function can(p: Principal, permission: string): boolean;
export function can<T extends SubjectType>(p: Principal, action: Action<T>, subject: Subject<T>): boolean;
export function can<T extends SubjectType>(p: Principal, action: string, subject?: Subject<T>): boolean {
  if (!subject) return holds(p, action);
  return verdict(p, action as Action<T>, subject) === true;
}

/** Why `authorize` would refuse, as a message; null when it allows (realtime refusals). */
export function refusal<T extends SubjectType>(p: Principal, action: Action<T>, subject: Subject<T>): string | null {
  const v = verdict(p, action, subject);
  return v === true ? null : v.message;
}

/**
 * Which API keys a list shows: every key to a super admin, a user's own (not system) keys to
 * anyone acting for that user, none to an ownerless key.
 */
export function apiKeyListScope(p: Principal): { all: true } | { userId: string } | null {
  if (isSuperAdmin(p)) return { all: true };
  const uid = actingUserId(p);
  return uid ? { userId: uid } : null;
}

/** `apiKeyListScope` as one value (the list's cache variant): callers with equal values see the same list. */
export function apiKeyListScopeKey(p: Principal): string {
  const scope = apiKeyListScope(p);
  return !scope ? 'none' : 'all' in scope ? 'all' : `user:${scope.userId}`;
}

/** Builds subjects from rows, so every caller describes a thing the same way. */
export const subjects = {
  apiKey: (k: { user_id: string | null; is_system: boolean; locked?: boolean | null }): Subject<'apiKey'> => ({
    type: 'apiKey',
    userId: k.user_id,
    isSystem: k.is_system,
    locked: !!k.locked,
  }),
  oauthClient: (c: { user_id: string | null }, ownerPermissions?: PermissionSet): Subject<'oauthClient'> => ({
    type: 'oauthClient',
    userId: c.user_id,
    ownerPermissions,
  }),
  role: (
    r: { id: string; is_system: boolean },
    permissions: PermissionSet,
    holders?: PermissionSet,
  ): Subject<'role'> => ({
    type: 'role',
    id: r.id,
    isSystem: r.is_system,
    permissions,
    holders,
  }),
  rolePermission: (name: string, holders: PermissionSet): Subject<'rolePermission'> => ({
    type: 'rolePermission',
    name,
    holders,
  }),
  user: (id: string, permissions: PermissionSet): Subject<'user'> => ({ type: 'user', id, permissions }),
  userLookup: (userId: string | null): Subject<'userLookup'> => ({ type: 'userLookup', userId }),
  accountToken: (t: { user_id: string }): Subject<'accountToken'> => ({ type: 'accountToken', userId: t.user_id }),
  ownSessions: (): Subject<'ownSessions'> => ({ type: 'ownSessions' }),
  ownConsents: (): Subject<'ownConsents'> => ({ type: 'ownConsents' }),
  relay: (): Subject<'relay'> => ({ type: 'relay' }),
  channel: (name: string): Subject<'channel'> => ({ type: 'channel', name }),
  accountEvent: (eventType: string): Subject<'accountEvent'> => ({ type: 'accountEvent', eventType }),
  twoFactor: (userId: string, permissions: PermissionSet): Subject<'twoFactor'> => ({
    type: 'twoFactor',
    userId,
    permissions,
  }),
  integration: (i: { user_id: string }): Subject<'integration'> => ({ type: 'integration', userId: i.user_id }),
  integrationConnect: (userId: string): Subject<'integrationConnect'> => ({ type: 'integrationConnect', userId }),
  queueDashboard: (): Subject<'queueDashboard'> => ({ type: 'queueDashboard' }),
  wsRequest: (payload: string, detail: { action?: string; scope?: string } = {}): Subject<'wsRequest'> => ({
    type: 'wsRequest',
    payload,
    ...detail,
  }),
};
