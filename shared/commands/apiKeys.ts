import type { Knex } from 'knex';
import { randomToken, sha256 } from '../crypto';
import { ApiKey } from '../models/ApiKey';
import { loadUserAccess } from '../queries/access';

/** Prefix of every generated API key; the shown key_prefix is its first 12 characters. */
export const API_KEY_PREFIX = 'sk_';

export function keyPrefixOf(key: string): string {
  return key.slice(0, 12);
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
export async function createApiKey(input: NewApiKey, trx?: Knex.Transaction): Promise<{ apiKey: ApiKey; key: string }> {
  const key = randomToken(API_KEY_PREFIX, 32);
  const apiKey = await ApiKey.query(trx).insertAndFetch({
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

/**
 * Guarantees (idempotently) that a system key with exactly this value exists and is active.
 * Called at start-up with SYSTEM_API_KEY.
 */
export async function ensureSystemApiKey(db: Knex, key: string): Promise<string> {
  const hash = sha256(key);
  const rows = await db('api_keys')
    .insert({
      name: 'System',
      description: 'System key from SYSTEM_API_KEY',
      key_hash: hash,
      key_prefix: keyPrefixOf(key),
      scopes: JSON.stringify(['*:*']),
      is_system: true,
      is_active: true,
    })
    .onConflict('key_hash')
    .merge({ is_system: true, is_active: true, expires_at: null, updated_at: db.fn.now() })
    .returning('id');
  return rows[0].id as string;
}

/**
 * Replaces a key's secret: the old value stops matching at once (the caller must also invalidate
 * cached credentials for the key id); returns the row and the new full key, shown only once.
 */
export async function regenerateApiKey(apiKeyId: string, trx?: Knex.Transaction): Promise<{ apiKey: ApiKey; key: string }> {
  const key = randomToken(API_KEY_PREFIX, 32);
  const apiKey = await ApiKey.query(trx).patchAndFetchById(apiKeyId, { key_hash: sha256(key), key_prefix: keyPrefixOf(key) });
  return { apiKey, key };
}
