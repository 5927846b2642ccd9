import type { Knex } from 'knex';
import { attributed, Attribution, AuditInput, recordAuditEvent } from '../audit';
import { randomToken, sha256 } from '../crypto';
import { afterCommit, transaction } from '../db';
import { conflict, notFound } from '../errors';
import { ApiKey } from '../models/ApiKey';
import type { Role } from '../models/Role';
import { loadUserAccess } from '../queries/access';
import { AccessServices, invalidateCredentials } from './accessChanges';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

/** Prefix of every generated API key; the shown key_prefix is its first 12 characters. */
export const API_KEY_PREFIX = 'sk_';

/** The part of a generated key shown again after its creation (`sk_` and 9 of its 43 random characters). */
export function keyPrefixOf(key: string): string {
  return key.slice(0, 12);
}

/**
 * The part of an operator's own key (SYSTEM_API_KEY) shown again: its first 4 characters. Such a
 * key may be as short as 16 characters, and 12 of them shown (and stored beside its hash) would
 * leave only 4 to guess.
 */
export function configuredKeyPrefixOf(key: string): string {
  return key.slice(0, 4);
}

export interface NewApiKey {
  userId: string | null;
  name: string;
  description?: string | null;
  scopes?: string[];
  expiresAt?: Date | null;
  isSystem?: boolean;
}

/** Creates an API key; returns the row and the full key, which is never retrievable again. */
export async function createApiKey(
  input: NewApiKey,
  trx: Knex | Knex.Transaction,
): Promise<{ apiKey: ApiKey; key: string }> {
  const key = randomToken(API_KEY_PREFIX, 32);
  const apiKey = await insertRow(ApiKey, trx, {
    user_id: input.userId,
    name: input.name,
    description: input.description ?? null,
    key_hash: sha256(key),
    key_prefix: keyPrefixOf(key),
    scopes: input.scopes ?? [],
    is_system: input.isSystem ?? false,
    is_active: true,
    expires_at: input.expiresAt ?? null,
  });
  return { apiKey, key };
}

/**
 * Scopes for a key that holds what its owner holds: `*:*` when the owner is a super admin (the key
 * then follows the owner), else the owner's current permission list. A key's power is always the
 * owner's current permissions narrowed to its scopes (docs/access-control.md), so a permission the
 * owner loses leaves the key too; one the owner gains later is not added to a listed key.
 */
export async function ownerPermissionScopes(db: Knex, userId: string): Promise<string[]> {
  const { permissions } = await loadUserAccess(db, userId);
  return permissions.includes('*:*') ? ['*:*'] : permissions;
}

/** SYSTEM_API_KEY names a value that was regenerated through the API: it is not stored again. */
export class RetiredSystemKeyError extends Error {
  constructor(readonly retiredAt: Date) {
    super(
      `SYSTEM_API_KEY was replaced by a regeneration on ${retiredAt.toISOString()} and stays revoked: ` +
        'set SYSTEM_API_KEY to the regenerated key',
    );
    this.name = 'RetiredSystemKeyError';
  }
}

/**
 * Guarantees (idempotently) that a system key with exactly this value exists and is active.
 * Called at start-up with SYSTEM_API_KEY. A value a regeneration replaced stays revoked
 * (RetiredSystemKeyError): an operator who regenerated a leaked system key must not see it come
 * back at the next deploy.
 */
export async function ensureSystemApiKey(db: Knex, key: string): Promise<string> {
  const hash = sha256(key);
  const retired = await db('retired_key_hashes').where('key_hash', hash).first('retired_at');
  if (retired) throw new RetiredSystemKeyError(new Date(retired.retired_at));
  const rows = await db('api_keys')
    .insert({
      name: 'System',
      description: 'System key from SYSTEM_API_KEY',
      key_hash: hash,
      key_prefix: configuredKeyPrefixOf(key),
      scopes: JSON.stringify(['*:*']),
      is_system: true,
      is_active: true,
    })
    .onConflict('key_hash')
    // key_prefix too: a row stored before the prefix was shortened loses the longer one.
    .merge({
      is_system: true,
      is_active: true,
      expires_at: null,
      key_prefix: configuredKeyPrefixOf(key),
      updated_at: db.fn.now(),
    })
    .returning('id');
  return rows[0].id as string;
}

/** An api_key audit event about `key`, for its owner (or, for an ownerless key, whoever acted). */
function keyEvent(by: Attribution, key: ApiKey, event: Pick<AuditInput, 'event_type' | 'metadata'>): AuditInput {
  return attributed(by, {
    user_id: key.user_id ?? by.actorId,
    resource_type: 'api_key',
    resource_id: key.id,
    ...event,
  });
}

/** Creates a key for the caller (POST /v1/api-keys) and records api_key_created. */
export async function issueApiKey(
  db: Knex,
  input: NewApiKey,
  by: Attribution,
): Promise<{ apiKey: ApiKey; key: string }> {
  return transaction(db, async (trx) => {
    const made = await createApiKey(input, trx);
    const { id, user_id, name, key_prefix, scopes } = made.apiKey;
    // The owner is the caller: an ownerless caller's key names no user.
    const event = {
      user_id,
      resource_type: 'api_key',
      resource_id: id,
      event_type: 'api_key_created',
      metadata: { name, key_prefix, scopes },
    };
    await recordAuditEvent(attributed(by, event), trx);
    return made;
  });
}

export interface ApiKeyChanges {
  name?: string;
  description?: string | null;
  scopes?: string[];
  is_active?: boolean;
  expires_at?: Date | null;
}

/**
 * Updates a key; its cached credentials are dropped after the commit. An expired key cannot be
 * extended (409): moving its expiry would revive a credential that may have leaked. `locking`:
 * the caller is one whose switch the owner cannot undo (an administrator), so switching the key
 * off locks it and switching it on unlocks it. `recheck`: the caller's access rule, run again on
 * the key as locked here (an administrator's switch-off that committed after the route loaded the
 * key is what the owner's request must face: its `is_active: true` became a reactivation).
 */
export async function updateApiKey(
  services: AccessServices,
  key: ApiKey,
  changes: ApiKeyChanges,
  opts: { locking: boolean; recheck?: (current: ApiKey) => void },
  by: Attribution,
): Promise<ApiKey> {
  if (changes.expires_at !== undefined && key.expires_at && key.expires_at.getTime() <= Date.now()) {
    throw conflict('expires_at: this key has expired and cannot be extended; create a new key');
  }
  const patch: Partial<ApiKey> = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
  if (changes.is_active !== undefined && opts.locking) patch.locked = !changes.is_active;
  return transaction(services.db, async (trx) => {
    // A key deleted since the route loaded it: 404, and no event about it.
    const current = await ApiKey.query(trx).findById(key.id).forUpdate();
    if (!current) throw notFound('api key');
    opts.recheck?.(current);
    const row = await patchLoaded(current, trx, patch, 'api key');
    if (current.is_active && changes.is_active === false) {
      await recordAuditEvent(
        keyEvent(by, key, {
          event_type: 'api_key_revoked',
          metadata: { key_prefix: key.key_prefix, reason: 'deactivated' },
        }),
        trx,
      );
    }
    afterCommit(trx, () => invalidateCredentials(services, { apiKeyIds: [key.id] }));
    return row;
  });
}

/**
 * Replaces a key's secret: the old value stops working at once (cached credentials are dropped
 * after the commit). Returns the row and the new full key, shown only once.
 */
export async function regenerateApiKey(
  services: AccessServices,
  old: ApiKey,
  by: Attribution,
): Promise<{ apiKey: ApiKey; key: string }> {
  const key = randomToken(API_KEY_PREFIX, 32);
  return transaction(services.db, async (trx) => {
    const apiKey = await patchLoaded(old, trx, { key_hash: sha256(key), key_prefix: keyPrefixOf(key) }, 'api key');
    // A system key's old value stays revoked where it is configured too (SYSTEM_API_KEY,
    // ensureSystemApiKey). Only a system key's: no other value comes back from configuration, and
    // a row per regeneration of every key grew the table for good.
    if (old.is_system)
      await trx('retired_key_hashes')
        .insert({ key_hash: old.key_hash, api_key_id: old.id })
        .onConflict('key_hash')
        .ignore();
    await recordAuditEvent(
      keyEvent(by, old, {
        event_type: 'api_key_revoked',
        metadata: { key_prefix: old.key_prefix, reason: 'regenerated' },
      }),
      trx,
    );
    await recordAuditEvent(
      keyEvent(by, old, {
        event_type: 'api_key_created',
        metadata: { key_prefix: apiKey.key_prefix, regenerated: true, scopes: apiKey.scopes },
      }),
      trx,
    );
    afterCommit(trx, () => invalidateCredentials(services, { apiKeyIds: [old.id] }));
    return { apiKey, key };
  });
}

/**
 * Deletes a key and records api_key_revoked; its cached credentials are dropped after the commit.
 * 404 when it is gone already: of concurrent deletes one records the event and answers 204.
 */
export async function deleteApiKey(services: AccessServices, key: ApiKey, by: Attribution): Promise<void> {
  await transaction(services.db, async (trx) => {
    if ((await deleteById(ApiKey, trx, key.id)) === 0) throw notFound('api key');
    await recordAuditEvent(
      keyEvent(by, key, {
        event_type: 'api_key_revoked',
        metadata: { key_prefix: key.key_prefix, name: key.name, reason: 'deleted' },
      }),
      trx,
    );
    afterCommit(trx, () => invalidateCredentials(services, { apiKeyIds: [key.id] }));
  });
}

/** Puts a role on a key (409 when it is there already); the key's cached credential is dropped. */
export async function assignApiKeyRole(services: AccessServices, key: ApiKey, role: Role): Promise<void> {
  await transaction(services.db, async (trx) => {
    if (await trx('api_key_roles').where({ api_key_id: key.id, role_id: role.id }).first())
      throw conflict('role already assigned to this key');
    await trx('api_key_roles').insert({ api_key_id: key.id, role_id: role.id });
    afterCommit(trx, () => invalidateCredentials(services, { apiKeyIds: [key.id] }));
  });
}

/** Takes a role off a key (404 when it is not there); the key's cached credential is dropped. */
export async function removeApiKeyRole(services: AccessServices, key: ApiKey, roleId: string): Promise<void> {
  await transaction(services.db, async (trx) => {
    if (!(await trx('api_key_roles').where({ api_key_id: key.id, role_id: roleId }).delete()))
      throw notFound('api key role');
    afterCommit(trx, () => invalidateCredentials(services, { apiKeyIds: [key.id] }));
  });
}
