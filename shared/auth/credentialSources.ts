import type { Knex } from 'knex';
import { ApiKey } from '../models/ApiKey';
import { Session } from '../models/Session';
import { User } from '../models/User';
import { rowBy, rowById } from '../rowLoader';
import type { AccessSets } from '../caches/accessSets';
import { loadApiKeyRoleAccess, loadUserAccess } from '../queries/access';
import { userActiveBan } from '../queries/users';
import { effectivePermissions, PermissionSet, Principal, reachesAccountScope } from '../policies';

/*
 * The kinds of Bearer credential and how each loads its entry (sessions and API keys here, OAuth
 * access tokens in oauthTokens.ts); CredentialResolver (credentials.ts) caches what they load.
 */

/** What a credential resolved to, cached per token hash. */
export interface CredentialEntry {
  principal: Exclude<Principal, { kind: 'anonymous' }>;
  /** Epoch ms after which the credential is dead (Infinity: never). */
  expiresAt: number;
  /** Epoch ms until which the user is banned (0: not banned, Infinity: permanently). */
  bannedUntil: number;
  /** Ids this entry depends on, for targeted invalidation. */
  userId: string | null;
  apiKeyId: string | null;
}

export type CredentialResult =
  | { ok: true; principal: Exclude<Principal, { kind: 'anonymous' }>; entry: CredentialEntry }
  | { ok: false; status: 401 | 403; message: string };

/** A kind of Bearer credential: session token, API key, OAuth access token… */
export interface CredentialSource {
  name: string;
  /** Cheap test on the raw token (its prefix) to pick the source without a query. */
  matches(token: string): boolean;
  /**
   * Loads the entry for a token hash, or null when unknown / revoked / inactive. `access` is the
   * resolver's cache of users' access sets (CredentialResolver.access): the user's permissions
   * are read from it rather than queried.
   */
  load(db: Knex, tokenHash: string, access?: AccessSets): Promise<CredentialEntry | null>;
}

export const SESSION_PREFIX = 'sess_';

/** A user's permissions and role ids: from the access-set cache when there is one. */
/** A user's active ban, read with the other credential loads of the turn (one statement for all). */
async function activeBan(db: Knex, userId: string): Promise<{ expires_at: Date | null } | undefined> {
  return (await userActiveBan(db, userId))?.row;
}

function userAccess(
  db: Knex,
  userId: string,
  access?: AccessSets,
): Promise<{ permissions: string[]; roleIds: string[] }> {
  return access ? access.user(userId) : loadUserAccess(db, userId);
}

export async function buildUserCredentialEntry(
  db: Knex,
  userId: string,
  base: {
    sessionId: string | null;
    via: 'session' | 'oauth';
    oauthClientId?: string;
    oauthTokenId?: string;
    scopes?: string[] | null;
    expiresAt: number;
  },
  accessSets?: AccessSets,
): Promise<CredentialEntry> {
  const [access, ban] = await Promise.all([userAccess(db, userId, accessSets), activeBan(db, userId)]);
  const grant = base.scopes ? new PermissionSet(base.scopes) : 'all';
  return {
    principal: {
      kind: 'user',
      userId,
      sessionId: base.sessionId,
      via: base.via,
      ...(base.oauthClientId ? { oauthClientId: base.oauthClientId } : {}),
      ...(base.oauthTokenId ? { oauthTokenId: base.oauthTokenId } : {}),
      permissions: effectivePermissions(new PermissionSet(access.permissions), grant),
      grant,
      roleIds: access.roleIds,
    },
    expiresAt: base.expiresAt,
    bannedUntil: ban ? (ban.expires_at ? ban.expires_at.getTime() : Infinity) : 0,
    userId,
    apiKeyId: null,
  };
}

/** Session tokens issued by POST /v1/sessions (and the login flows). */
export const sessionSource: CredentialSource = {
  name: 'session',
  matches: (t) => t.startsWith(SESSION_PREFIX),
  async load(db, hash, access) {
    // The batched unique-key reads every route uses: concurrent first requests share a statement.
    const row = await rowBy(Session, 'token_hash', db).load(hash);
    if (!row) return null;
    const owner = await rowById(User, db).load(row.user_id);
    if (!owner || owner.deleted_at) return null;
    return buildUserCredentialEntry(
      db,
      row.user_id,
      { sessionId: row.id, via: 'session', expiresAt: new Date(row.expires_at).getTime() },
      access,
    );
  },
};

/** API keys (user keys and system keys). Also the fallback for tokens without a known prefix. */
export const apiKeySource: CredentialSource = {
  name: 'apiKey',
  matches: () => true,
  async load(db, hash, access) {
    const key = await rowBy(ApiKey, 'key_hash', db).load(hash);
    if (!key || !key.is_active) return null;
    if (key.user_id) {
      const owner = await rowById(User, db).load(key.user_id);
      if (!owner || owner.deleted_at) return null;
    }
    const expiresAt = key.expires_at ? new Date(key.expires_at).getTime() : Infinity;
    if (key.is_system) {
      return {
        principal: { kind: 'system', apiKeyId: key.id, permissions: new PermissionSet(['*:*']) },
        expiresAt,
        bannedUntil: 0,
        userId: null,
        apiKeyId: key.id,
      };
    }
    const [roleAccess, owner, ban] = await Promise.all([
      loadApiKeyRoleAccess(db, key.id),
      key.user_id
        ? userAccess(db, key.user_id, access)
        : Promise.resolve({ permissions: [] as string[], roleIds: [] as string[] }),
      key.user_id ? activeBan(db, key.user_id) : Promise.resolve(undefined),
    ]);
    // The key's roles widen its grant, never its owner: a demoted owner's key loses what the role gave.
    // An ownerless key (service key made by an operator) is bounded by its roles alone.
    // An account scope is granted by name in the key's own scopes, never by a role: a permission
    // named like one (made before they were refused) gives nothing here.
    const grant = new PermissionSet([
      ...(key.scopes as string[]),
      ...roleAccess.permissions.filter((p) => !reachesAccountScope(p)),
    ]);
    const bound = key.user_id ? owner.permissions : roleAccess.permissions;
    return {
      principal: {
        kind: 'apiKey',
        apiKeyId: key.id,
        userId: key.user_id,
        permissions: effectivePermissions(new PermissionSet(bound), grant),
        grant,
        roleIds: owner.roleIds,
        keyRoleIds: roleAccess.roleIds,
      },
      expiresAt,
      bannedUntil: ban ? (ban.expires_at ? ban.expires_at.getTime() : Infinity) : 0,
      userId: key.user_id,
      apiKeyId: key.id,
    };
  },
};
